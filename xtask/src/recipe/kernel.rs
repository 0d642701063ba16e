//! Kernel series gating: version ranges such as `>=6.11, <6.12.64 || >=6.13, <6.18.4`
//! matched against a kernel release string such as `6.12.117+deb12-amd64`.

use std::cmp::Ordering;
use std::fmt;

/// A kernel version: the leading `major.minor.patch` of a release string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelVersion(pub u32, pub u32, pub u32);

impl KernelVersion {
    /// Reads the numeric prefix of a release (`6.14.0-36-generic` -> 6.14.0,
    /// `6.12.117+deb12-amd64` -> 6.12.117, `6.19-rc1` -> 6.19.0).
    pub fn from_release(release: &str) -> Option<KernelVersion> {
        let numeric_end = release
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(release.len());
        let mut parts = release[..numeric_end].trim_end_matches('.').split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        Some(KernelVersion(major, minor, patch))
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

/// Alternatives (`||`) of comparator sets (`,`): the release matches when
/// every comparator of some set holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRange {
    text: String,
    alternatives: Vec<Vec<(Op, KernelVersion)>>,
}

impl KernelRange {
    pub fn parse(text: &str) -> Result<KernelRange, String> {
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let mut set = Vec::new();
            for comparator in alternative.split(',') {
                let comparator = comparator.trim();
                let (op, version) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt), ("=", Op::Eq)]
                    .iter()
                    .find_map(|(prefix, op)| comparator.strip_prefix(prefix).map(|rest| (*op, rest.trim())))
                    .ok_or_else(|| {
                        format!("`{comparator}` is not a comparator: write e.g. `>=6.11, <6.12.64 || >=6.13, <6.18.4`")
                    })?;
                let valid = !version.is_empty()
                    && version.split('.').count() <= 3
                    && version.split('.').all(|p| p.parse::<u32>().is_ok());
                if !valid {
                    return Err(format!(
                        "`{version}` is not a kernel version such as `6.12` or `6.12.64`"
                    ));
                }
                let version = KernelVersion::from_release(version)
                    .ok_or_else(|| format!("`{version}` is not a kernel version"))?;
                set.push((op, version));
            }
            alternatives.push(set);
        }
        Ok(KernelRange {
            text: text.trim().to_owned(),
            alternatives,
        })
    }

    pub fn matches(&self, version: KernelVersion) -> bool {
        self.alternatives.iter().any(|set| {
            set.iter().all(|(op, bound)| {
                let ord = version.cmp(bound);
                match op {
                    Op::Ge => ord != Ordering::Less,
                    Op::Gt => ord == Ordering::Greater,
                    Op::Le => ord != Ordering::Greater,
                    Op::Lt => ord == Ordering::Less,
                    Op::Eq => ord == Ordering::Equal,
                }
            })
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_to_their_numeric_prefix() {
        assert_eq!(
            KernelVersion::from_release("6.12.117+deb12-amd64"),
            Some(KernelVersion(6, 12, 117))
        );
        assert_eq!(
            KernelVersion::from_release("6.14.0-36-generic"),
            Some(KernelVersion(6, 14, 0))
        );
        assert_eq!(
            KernelVersion::from_release("6.19-rc1"),
            Some(KernelVersion(6, 19, 0))
        );
        assert_eq!(KernelVersion::from_release("generic"), None);
    }

    #[test]
    fn ranges_gate_the_affected_series() {
        let range = KernelRange::parse(">=6.11, <6.12.64 || >=6.13, <6.18.4").unwrap();
        let m = |r: &str| range.matches(KernelVersion::from_release(r).unwrap());
        assert!(m("6.11.0"));
        assert!(m("6.12.63"));
        assert!(!m("6.12.64"));
        assert!(!m("6.12.117+deb12-amd64"));
        assert!(m("6.14.0-36-generic"));
        assert!(m("6.18.3"));
        assert!(!m("6.18.4"));
        assert!(!m("6.10.14"));
    }

    #[test]
    fn bad_ranges_say_what_to_write() {
        assert!(KernelRange::parse("6.12")
            .unwrap_err()
            .contains("not a comparator"));
        assert!(KernelRange::parse(">=6.x")
            .unwrap_err()
            .contains("not a kernel version"));
    }
}
