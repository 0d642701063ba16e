//! `[fault.log]` of the knowledge file: how a known fault shows in the logs
//! a user has (the UTCL2 client the kernel log names for a GPU page fault,
//! the GEMM kernels a HIP log names), so that `doctor --log` can name it.
//! Parsed and checked here; matching a log against it is `doctor::log`.

use serde::Deserialize;
use toml::Spanned;

use super::Fault;

/// `[fault.log]` as serde sees it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    #[serde(default)]
    clients: Vec<Spanned<String>>,
    #[serde(default)]
    kernels: Vec<Spanned<String>>,
}

/// How a fault shows in logs; empty when the knowledge file says nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogFacts {
    /// "Faulty UTCL2 client ID" names of the kernel log (`TCP`, `SDMA0`).
    pub(crate) clients: Vec<String>,
    /// Kernel-name patterns (`Cijk_*DTVB1*`) of the GPU kernels that fault.
    pub(crate) kernels: Vec<Glob>,
}

impl LogFacts {
    pub(crate) fn is_empty(&self) -> bool {
        self.clients.is_empty() && self.kernels.is_empty()
    }

    /// Whether a kernel log naming `client` points to this fault.
    pub(crate) fn has_client(&self, client: &str) -> bool {
        self.clients.iter().any(|c| c == client)
    }

    /// The first pattern `kernel` matches.
    pub(crate) fn kernel_match(&self, kernel: &str) -> Option<&Glob> {
        self.kernels.iter().find(|g| g.matches(kernel))
    }
}

/// A kernel-name pattern: `*` stands for any run of characters, every
/// other character for itself; the whole name must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob(String);

impl Glob {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The first of the longest runs of literal characters: only a line
    /// holding it can name a matching kernel.
    pub(crate) fn anchor(&self) -> &str {
        self.0
            .split('*')
            .fold("", |best, s| if s.len() > best.len() { s } else { best })
    }

    pub(crate) fn matches(&self, name: &str) -> bool {
        let parts: Vec<&str> = self.0.split('*').collect();
        let (first, rest) = parts.split_first().expect("split yields one part");
        let Some(mut tail) = name.strip_prefix(first) else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            return tail.is_empty();
        };
        for part in middle {
            match tail.find(part) {
                Some(at) => tail = &tail[at + part.len()..],
                None => return false,
            }
        }
        tail.len() >= last.len() && tail.ends_with(last)
    }
}

impl Fault {
    /// A fault the knowledge file gives nothing to judge a machine by but
    /// its signature in logs.
    pub(crate) fn judged_only_by_log(&self) -> bool {
        !self.log.is_empty()
            && self.kernel.is_none()
            && self.rocm.is_none()
            && self.hipblaslt.is_none()
            && self.comgr.is_none()
            && self.needs.is_none()
    }
}

/// `[fault.log]` checked: every problem goes to `err` with its offset in
/// the file.
pub(super) fn facts(raw: Option<&Spanned<RawLog>>, err: &mut dyn FnMut(usize, String)) -> LogFacts {
    let Some(raw) = raw else {
        return LogFacts::default();
    };
    let log = raw.get_ref();
    if log.clients.is_empty() && log.kernels.is_empty() {
        err(
            raw.span().start,
            "`[fault.log]` names at least one of `clients` or `kernels`".to_owned(),
        );
    }
    for client in &log.clients {
        let name = client.get_ref();
        let ok = !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || " ()/_-".contains(c));
        if !ok {
            err(
                client.span().start,
                "`log.clients`: a UTCL2 client as the kernel log names it (`TCP`, `SDMA0`, `SQC (data)`)"
                    .to_owned(),
            );
        }
    }
    for kernel in &log.kernels {
        let pattern = kernel.get_ref();
        let ok = pattern.len() <= 256
            && pattern.chars().any(|c| c != '*')
            && pattern
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.$*-".contains(c));
        if !ok {
            err(
                kernel.span().start,
                "`log.kernels`: a kernel-name pattern of letters, digits, `_`, `.`, `$`, `-` and `*` (`Cijk_*DTVB1*`)"
                    .to_owned(),
            );
        }
    }
    LogFacts {
        clients: log.clients.iter().map(|c| c.get_ref().clone()).collect(),
        kernels: log
            .kernels
            .iter()
            .map(|k| Glob(k.get_ref().clone()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        let g = Glob("Cijk_*DTVB1*".to_owned());
        assert!(g.matches("Cijk_Alik_Bljk_HHS_BH_MT64x64x64_SN_DTVB1_ISA1201"));
        assert!(g.matches("Cijk_DTVB1"));
        assert!(!g.matches("Cijk_Alik_DTVB0_ISA1201"));
        assert!(!g.matches("xCijk_DTVB1"));
        assert_eq!(g.anchor(), "Cijk_");
        let exact = Glob("abc".to_owned());
        assert!(exact.matches("abc") && !exact.matches("abcd"));
        let ends = Glob("*_ISA1201".to_owned());
        assert!(ends.matches("Cijk_ISA1201") && !ends.matches("Cijk_ISA1201_x"));
        // a suffix may not reuse what a middle part took
        let overlap = Glob("a*ab*b".to_owned());
        assert!(!overlap.matches("aab"));
        assert!(overlap.matches("aabb"));
    }

    #[test]
    fn problems_of_a_log_table_are_located() {
        let text = "[log]\nclients = [\"TCP\", \"\\u001b[31m\"]\nkernels = [\"*\", \"Cijk_*\"]\n";
        #[derive(Deserialize)]
        struct Doc {
            log: Spanned<RawLog>,
        }
        let doc: Doc = toml::from_str(text).unwrap();
        let mut errs = Vec::new();
        let facts = facts(Some(&doc.log), &mut |at, m| errs.push((at, m)));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].1.contains("`log.clients`"), "{errs:?}");
        assert!(errs[1].1.contains("`log.kernels`"), "{errs:?}");
        assert!(facts.has_client("TCP"));
    }
}
