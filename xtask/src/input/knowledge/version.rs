//! ROCm, hipBLASLt and KFD versions (`7.1.1-53`) and their ranges in the
//! recipe kernel-range grammar (`>=7.0, <7.2 || >=7.3`).

use std::cmp::Ordering;
use std::fmt;

use crate::input::range::{Bound, Range};

/// A version such as ROCm's `7.1.1-53` or hipBLASLt's `1.1.0`: its leading
/// numeric components. Missing components count as 0: `7.1` == `7.1.0`.
#[derive(Debug, Clone)]
pub struct Version(pub Vec<u32>);

impl Version {
    /// The numeric prefix of `text` (`7.1.1-53` -> 7.1.1); `None` when it
    /// does not start with a number.
    pub fn parse_prefix(text: &str) -> Option<Version> {
        let text = text.trim();
        let end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let parts: Option<Vec<u32>> = text[..end]
            .trim_end_matches('.')
            .split('.')
            .map(|p| p.parse().ok())
            .collect();
        parts.filter(|p| !p.is_empty()).map(Version)
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Version {}

impl Ord for Version {
    fn cmp(&self, other: &Version) -> Ordering {
        let n = self.0.len().max(other.0.len());
        let at = |v: &Version, i: usize| v.0.get(i).copied().unwrap_or(0);
        (0..n)
            .map(|i| at(self, i).cmp(&at(other, i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

impl Bound for Version {
    const PARTS: usize = 4;
    const WHAT: &'static str = "a version such as `7.1` or `1.5.0`";
    const EXAMPLE: &'static str = ">=7.0, <7.2";
    fn from_numbers(text: &str) -> Option<Version> {
        Version::parse_prefix(text)
    }
}

/// A ROCm / hipBLASLt / KFD version range in the one range grammar of
/// `range.rs`, the kernels': `>=7.0, <7.2 || >=7.3`.
pub type VersionRange = Range<Version>;

impl Range<Version> {
    /// ROCm's numbers are two release streams, not one line: the legacy
    /// builds 7.0 to 7.2 (and any 7.3 to 7.8) and TheRock's 7.9 to 7.14
    /// and 10.x, whose "7.10" is older code than legacy 7.2.4. A ROCm
    /// range must say which: every alternative bounded below and above,
    /// both bounds on the same side of 7.9.
    pub(crate) fn one_rocm_stream(&self) -> Result<(), String> {
        let therock = Version(vec![7, 9]);
        for set in self.alternatives() {
            let lower = set.iter().find(|(op, _)| op.bounds_below());
            let upper = set.iter().find(|(op, _)| op.bounds_above());
            let (Some((_, lo)), Some((_, hi))) = (lower, upper) else {
                return Err(format!(
                    "`{}` is open-ended: ROCm numbers are two streams (legacy 7.0-7.2, TheRock 7.9 on and 10.x; TheRock's 7.10 is older code than 7.2.4), so bound it on both sides within one",
                    self.as_str()
                ));
            };
            if (lo < &therock) != (hi <= &therock) {
                return Err(format!(
                    "`{}` spans the legacy (7.0-7.8) and TheRock (7.9 on, 10.x) streams, whose numbers do not order their code: give one range per stream",
                    self.as_str()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse_prefix(s).unwrap()
    }

    #[test]
    fn versions_compare_by_their_numbers() {
        assert_eq!(v("7.1.1-53"), Version(vec![7, 1, 1]));
        assert!(v("7.1") == v("7.1.0"));
        assert!(v("7.10.0") > v("7.2.1"));
        assert_eq!(Version::parse_prefix("rocm"), None);
    }

    #[test]
    fn ranges_match_rocm_and_hipblaslt_versions() {
        let r = VersionRange::parse(">=7.2, <7.3").unwrap();
        assert!(r.matches(v("7.2.1")));
        assert!(r.matches(v("7.2")));
        assert!(!r.matches(v("7.3.0")));
        assert!(!r.matches(v("7.10.0")));
        let r = VersionRange::parse("<1.5 || =2.0").unwrap();
        assert!(r.matches(v("1.4.9")) && r.matches(v("2")) && !r.matches(v("1.5.0")));
        assert!(VersionRange::parse("7.1")
            .unwrap_err()
            .contains("not a comparator"));
        assert!(VersionRange::parse(">=7.x")
            .unwrap_err()
            .contains("not a version"));
    }

    #[test]
    fn rocm_ranges_stay_in_one_release_stream() {
        let ok = |t: &str| VersionRange::parse(t).unwrap().one_rocm_stream();
        assert!(ok(">=7.1, <7.2").is_ok());
        assert!(ok(">=7.0, <7.9").is_ok());
        assert!(ok(">=7.13, <7.15 || >=10.0, <10.2").is_ok());
        assert!(ok("=7.10.0").is_ok());
        assert!(ok(">=7.0").unwrap_err().contains("open-ended"));
        assert!(ok(">=7.2, <7.11").unwrap_err().contains("spans the legacy"));
    }
}
