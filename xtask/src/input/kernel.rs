//! Kernel series gating: version ranges such as `>=6.11, <6.12.64 || >=6.13, <6.18.4`
//! matched against a kernel release string such as `6.12.117+deb12-amd64`.

use std::fmt;

use crate::input::range::{Bound, Op, Range};

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

impl Bound for KernelVersion {
    const PARTS: usize = 3;
    const WHAT: &'static str = "a kernel version such as `6.12` or `6.12.64`";
    const EXAMPLE: &'static str = ">=6.11, <6.12.64 || >=6.13, <6.18.4";
    fn from_numbers(text: &str) -> Option<KernelVersion> {
        KernelVersion::from_release(text)
    }
}

/// A kernel range: alternatives (`||`) of comparator sets (`,`), the
/// release matching when every comparator of some set holds; the one
/// grammar of `range.rs`.
pub(crate) type KernelRange = Range<KernelVersion>;

impl Range<KernelVersion> {
    /// A POSIX extended regex (for DKMS's `BUILD_EXCLUSIVE_KERNEL`, matched
    /// with bash `=~`) that accepts exactly the releases this range accepts.
    pub(crate) fn to_regex(&self) -> String {
        let mut alternatives = Vec::new();
        for set in self.alternatives() {
            let mut low = [0u32, 0, 0];
            let mut high: [Option<u32>; 3] = [None, None, None];
            let mut empty = false;
            for (op, v) in set {
                let v = [v.0, v.1, v.2];
                let lower = |x: [u32; 3], low: &mut [u32; 3]| *low = (*low).max(x);
                let upper =
                    |x: Option<[u32; 3]>, high: &mut [Option<u32>; 3], empty: &mut bool| match x {
                        None => *empty = true,
                        Some(x) => {
                            if tuple_le_bound(x, high) {
                                *high = [Some(x[0]), Some(x[1]), Some(x[2])];
                            }
                        }
                    };
                match op {
                    Op::Ge => lower(v, &mut low),
                    Op::Gt => lower([v[0], v[1], v[2] + 1], &mut low),
                    Op::Le => upper(Some(v), &mut high, &mut empty),
                    Op::Lt => upper(predecessor(v), &mut high, &mut empty),
                    Op::Eq => {
                        lower(v, &mut low);
                        upper(Some(v), &mut high, &mut empty);
                    }
                }
            }
            if !empty && tuple_le_bound(low, &high) {
                alternatives.push(interval(&low, &high));
            }
        }
        if alternatives.is_empty() {
            // Nothing matches: a regex no release can satisfy.
            return "^$.".to_owned();
        }
        format!("^({})([^0-9]|$)", alternatives.join("|"))
    }
}

/// The largest version below `v`, with `None` components meaning "any".
fn predecessor(v: [u32; 3]) -> Option<[u32; 3]> {
    if v[2] > 0 {
        Some([v[0], v[1], v[2] - 1])
    } else if v[1] > 0 {
        Some([v[0], v[1] - 1, u32::MAX])
    } else if v[0] > 0 {
        Some([v[0] - 1, u32::MAX, u32::MAX])
    } else {
        None
    }
}

/// `x <= bound` lexicographically, `None` (and `u32::MAX`) being infinite.
fn tuple_le_bound(x: [u32; 3], bound: &[Option<u32>; 3]) -> bool {
    let b = bound.map(|c| c.unwrap_or(u32::MAX));
    x <= b
}

/// Regex for the versions `low..=high` (components after the first `\.`-joined).
fn interval(low: &[u32], high: &[Option<u32>]) -> String {
    let any = |n: usize| vec!["[0-9]+"; n].join("\\.");
    let finite = |c: Option<u32>| c.filter(|&c| c != u32::MAX);
    let (l0, h0) = (low[0], finite(high[0]));
    if low.len() == 1 {
        return number_range(l0, h0);
    }
    let rest_unbounded = vec![None; low.len() - 1];
    let rest_zero = vec![0; low.len() - 1];
    if h0 == Some(l0) {
        return format!("{l0}\\.({})", interval(&low[1..], &high[1..]));
    }
    let mut parts = vec![format!("{l0}\\.({})", interval(&low[1..], &rest_unbounded))];
    let middle_high = h0.map(|h| h.checked_sub(1));
    match middle_high {
        None => parts.push(format!(
            "({})\\.{}",
            number_range(l0 + 1, None),
            any(low.len() - 1)
        )),
        Some(Some(mh)) if mh > l0 => parts.push(format!(
            "({})\\.{}",
            number_range(l0 + 1, Some(mh)),
            any(low.len() - 1)
        )),
        _ => {}
    }
    if let Some(h) = h0 {
        parts.push(format!("{h}\\.({})", interval(&rest_zero, &high[1..])));
    }
    parts.join("|")
}

/// Regex alternatives for the decimal numbers `low..=high` (`None`: no end).
fn number_range(low: u32, high: Option<u32>) -> String {
    let digits = |n: u32| n.to_string().len() as u32;
    match high {
        None => {
            let top = 10u32.pow(digits(low)) - 1;
            let mut parts = fixed_ranges(low, top);
            parts.push(format!("[1-9][0-9]{{{},}}", digits(low)));
            parts.join("|")
        }
        Some(high) => {
            let mut parts = Vec::new();
            let mut lo = low;
            while lo <= high {
                let top = (10u32.pow(digits(lo)) - 1).min(high);
                parts.extend(fixed_ranges(lo, top));
                lo = top + 1;
            }
            parts.join("|")
        }
    }
}

/// Alternatives for `low..=high`, two numbers of the same digit count.
fn fixed_ranges(low: u32, high: u32) -> Vec<String> {
    fn go(lo: u32, hi: u32, width: u32) -> Vec<String> {
        if width == 1 {
            return vec![if lo == hi {
                lo.to_string()
            } else {
                format!("[{lo}-{hi}]")
            }];
        }
        let p = 10u32.pow(width - 1);
        let (a, b, rl, rh) = (lo / p, hi / p, lo % p, hi % p);
        let tail = |w: u32| "[0-9]".repeat(w as usize);
        if a == b {
            return go(rl, rh, width - 1)
                .into_iter()
                .map(|s| format!("{a}{s}"))
                .collect();
        }
        let mut out = Vec::new();
        let mut first_full = a;
        if rl != 0 {
            out.extend(
                go(rl, p - 1, width - 1)
                    .into_iter()
                    .map(|s| format!("{a}{s}")),
            );
            first_full = a + 1;
        }
        let last_full = if rh == p - 1 { b } else { b - 1 };
        if first_full <= last_full {
            let class = if first_full == last_full {
                first_full.to_string()
            } else {
                format!("[{first_full}-{last_full}]")
            };
            out.push(format!("{class}{}", tail(width - 1)));
        }
        if rh != p - 1 {
            out.extend(go(0, rh, width - 1).into_iter().map(|s| format!("{b}{s}")));
        }
        out
    }
    go(low, high, low.to_string().len() as u32)
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

    /// bash's own `=~` must agree with `matches` on every release tried.
    #[test]
    fn the_regex_agrees_with_the_range_in_bash() {
        let ranges = [
            ">=6.11, <6.12.64 || >=6.13, <6.18.4",
            ">=5.10",
            "<6.1",
            ">6.12.9, <=6.14.0",
            "=6.12.117",
            ">=6.11, <6.11",
        ];
        let mut releases = Vec::new();
        for major in [4, 5, 6, 7, 10] {
            for minor in [0, 1, 9, 10, 11, 12, 13, 14, 17, 18, 19, 20, 99, 100] {
                for patch in [0, 1, 3, 4, 9, 10, 11, 63, 64, 65, 99, 100, 117, 1000] {
                    releases.push(format!("{major}.{minor}.{patch}"));
                }
            }
        }
        releases.extend(
            [
                "6.12.117+deb12-amd64",
                "6.14.0-36-generic",
                "6.18.3-arch1-1",
            ]
            .map(String::from),
        );
        for text in ranges {
            let range = KernelRange::parse(text).unwrap();
            // Quoted as `render::sh_quote` does; the kernel module sits below render.
            let quoted = range.to_regex().replace('\'', "'\\''");
            let script = format!(
                "re='{quoted}'; while read -r k; do if [[ $k =~ $re ]]; then echo 1; else echo 0; fi; done"
            );
            let mut child = std::process::Command::new("bash")
                .arg("-c")
                .arg(script)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("bash");
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all((releases.join("\n") + "\n").as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let verdicts: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
            assert_eq!(verdicts.len(), releases.len());
            for (release, verdict) in releases.iter().zip(verdicts) {
                let expected = range.matches(KernelVersion::from_release(release).unwrap());
                assert_eq!(
                    verdict == "1",
                    expected,
                    "range `{text}`, regex `{}`, release {release}",
                    range.to_regex()
                );
            }
        }
    }

    #[test]
    fn number_ranges_are_exact() {
        assert_eq!(number_range(0, Some(63)), "[0-9]|[1-5][0-9]|6[0-3]");
        assert_eq!(number_range(64, None), "6[4-9]|[7-9][0-9]|[1-9][0-9]{2,}");
        assert_eq!(number_range(11, Some(11)), "11");
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
