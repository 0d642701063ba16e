//! The one range grammar of kernels and versions: alternatives (`||`) of
//! comparator sets (`,`), each comparator an operator (`>=`, `<=`, `>`,
//! `<`, `=`) and a version, as in `>=6.11, <6.12.64 || >=6.13, <6.18.4`.
//! One parser, generic over the version ([`Bound`]): `kernel.rs`'s
//! `KernelRange` and `knowledge/version.rs`'s `VersionRange` are this
//! [`Range`] of their version. Imports nothing of the crate.

use std::borrow::Borrow;
use std::fmt;

/// A comparator's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

impl Op {
    /// The operators, longest spelling first (`>=` before `>`).
    const ALL: [(&'static str, Op); 5] = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
    ];

    /// Whether `ord` (a version against the bound) satisfies this operator.
    pub(crate) fn holds(self, ord: std::cmp::Ordering) -> bool {
        match self {
            Op::Ge => ord.is_ge(),
            Op::Gt => ord.is_gt(),
            Op::Le => ord.is_le(),
            Op::Lt => ord.is_lt(),
            Op::Eq => ord.is_eq(),
        }
    }

    /// Whether it bounds from below (`>=`, `>`, `=`).
    pub(crate) fn bounds_below(self) -> bool {
        matches!(self, Op::Ge | Op::Gt | Op::Eq)
    }

    /// Whether it bounds from above (`<=`, `<`, `=`).
    pub(crate) fn bounds_above(self) -> bool {
        matches!(self, Op::Le | Op::Lt | Op::Eq)
    }
}

/// A version the grammar compares: its numbers, and what the messages say
/// of it.
pub trait Bound: Ord + Sized {
    /// The most dot-separated numbers a bound may have.
    const PARTS: usize;
    /// What a bound is, for the message of a bad one: "a kernel version
    /// such as `6.12` or `6.12.64`".
    const WHAT: &'static str;
    /// A range to show in the message of a bad comparator.
    const EXAMPLE: &'static str;
    /// The version of `text`: dot-separated numbers, at most [`Self::PARTS`].
    fn from_numbers(text: &str) -> Option<Self>;
}

/// Alternatives (`||`) of comparator sets (`,`): a version is in the range
/// when every comparator of some set holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range<V> {
    text: String,
    alternatives: Vec<Vec<(Op, V)>>,
}

impl<V: Bound> Range<V> {
    /// Parses `text`; a bad comparator or version is named with what the
    /// grammar takes.
    pub(crate) fn parse(text: &str) -> Result<Range<V>, String> {
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let mut set = Vec::new();
            for comparator in alternative.split(',') {
                set.push(comparator_of(comparator.trim())?);
            }
            alternatives.push(set);
        }
        Ok(Range {
            text: text.trim().to_owned(),
            alternatives,
        })
    }

    /// Whether `version` is in the range.
    pub fn matches(&self, version: impl Borrow<V>) -> bool {
        let version = version.borrow();
        self.alternatives
            .iter()
            .any(|set| set.iter().all(|(op, bound)| op.holds(version.cmp(bound))))
    }
}

impl<V> Range<V> {
    /// The range as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The comparator sets, one per alternative.
    pub(crate) fn alternatives(&self) -> &[Vec<(Op, V)>] {
        &self.alternatives
    }
}

/// One comparator: its operator and its version.
fn comparator_of<V: Bound>(comparator: &str) -> Result<(Op, V), String> {
    let (op, version) = Op::ALL
        .iter()
        .find_map(|(prefix, op)| {
            comparator
                .strip_prefix(prefix)
                .map(|rest| (*op, rest.trim()))
        })
        .ok_or_else(|| {
            format!(
                "`{comparator}` is not a comparator: write e.g. `{}`",
                V::EXAMPLE
            )
        })?;
    let valid = !version.is_empty()
        && version.split('.').count() <= V::PARTS
        && version.split('.').all(|p| p.parse::<u32>().is_ok());
    V::from_numbers(version)
        .filter(|_| valid)
        .map(|v| (op, v))
        .ok_or_else(|| format!("`{version}` is not {}", V::WHAT))
}

impl<V> fmt::Display for Range<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version of two numbers at most, to try the grammar alone.
    #[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Two(u32, u32);

    impl Bound for Two {
        const PARTS: usize = 2;
        const WHAT: &'static str = "a two-part version";
        const EXAMPLE: &'static str = ">=1.0, <2";
        fn from_numbers(text: &str) -> Option<Two> {
            let mut parts = text.split('.').map(|p| p.parse().ok());
            Some(Two(parts.next()??, parts.next().unwrap_or(Some(0))?))
        }
    }

    #[test]
    fn one_grammar_of_alternatives_and_sets() {
        let r = Range::<Two>::parse(" >=1.2, <2 || =5 ").unwrap();
        assert_eq!(r.as_str(), ">=1.2, <2 || =5");
        assert!(r.matches(Two(1, 2)) && r.matches(Two(1, 9)) && r.matches(Two(5, 0)));
        assert!(!r.matches(Two(1, 1)) && !r.matches(Two(2, 0)) && !r.matches(Two(5, 1)));
        let (lower, upper) = (Op::Gt.bounds_below(), Op::Gt.bounds_above());
        assert!(lower && !upper);
        assert_eq!(
            Range::<Two>::parse("1.2").unwrap_err(),
            "`1.2` is not a comparator: write e.g. `>=1.0, <2`"
        );
        assert_eq!(
            Range::<Two>::parse(">=1.2.3").unwrap_err(),
            "`1.2.3` is not a two-part version"
        );
        assert_eq!(
            Range::<Two>::parse(">=1, <").unwrap_err(),
            "`` is not a two-part version"
        );
    }
}
