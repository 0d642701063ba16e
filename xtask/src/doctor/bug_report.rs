//! `doctor --report`: the report as a Markdown block to paste into a bug
//! report, like `python -m torch.utils.collect_env`: the tool and its
//! knowledge, the machine, the kernel and module verdict, the libraries and
//! their verdicts, the knobs, every fault's verdict, the firmware and the
//! GPU faults of the logs. Private by construction: only the environment
//! variables the knowledge files name are ever read ([`super::env_names`]),
//! and every line goes through [`Private::scrub`] (home folders as `~`, the
//! user's name as `<user>`).

use std::fmt::Write;
use std::path::Path;

use super::fsread::{self, Root};
use super::{Report, Status};
use crate::input::invocation::Invocation;
use crate::input::knowledge::Severity;
use crate::shared::settings::Environment;

/// The user names a report must not show: the name of this process's uid
/// in the machine's `/etc/passwd`, and `$USER`/`$LOGNAME`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Private {
    pub(crate) names: Vec<String>,
}

impl Private {
    /// Reads `<root>/etc/passwd` for the uid doctor runs as, and `USER`
    /// and `LOGNAME` of `env`.
    pub(crate) fn read(root: &Path, env: &Environment) -> Private {
        // SAFETY: getuid cannot fail and touches no memory of ours.
        let uid = unsafe { libc::getuid() };
        let passwd = Root::new(root)
            .read_text(Path::new("/etc/passwd"), fsread::SMALL)
            .unwrap_or_default();
        let from_passwd = passwd.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
        });
        let from_env = ["USER", "LOGNAME"]
            .iter()
            .filter_map(|v| env.get(v)?.to_str().map(str::to_owned));
        let mut names: Vec<String> = from_passwd.into_iter().chain(from_env).collect();
        names.retain(|n| n.len() >= 2 && n != "root");
        names.sort();
        names.dedup();
        Private { names }
    }

    /// `text` with `/home/<name>` and `/Users/<name>` as `~` and every
    /// word that is one of the names as `<user>`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for base in ["/home/", "/Users/"] {
            out = homes_to_tilde(&out, base);
        }
        for name in &self.names {
            out = replace_word(&out, name, "<user>");
        }
        out
    }
}

/// Every `<base><name>` (the name up to the next `/`, space or quote) as
/// `~` where a path starts with it; inside a longer path (a copy of a
/// machine below another folder) the name alone as `<user>`.
fn homes_to_tilde(text: &str, base: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(base) {
        out.push_str(&rest[..at]);
        let starts = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || "`'\"(=:".contains(c));
        let after = &rest[at + base.len()..];
        let end = after
            .find(|c: char| c == '/' || c.is_whitespace() || "\"'`),;:".contains(c))
            .unwrap_or(after.len());
        match starts {
            true => out.push('~'),
            false => {
                out.push_str(base);
                out.push_str("<user>");
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `word` replaced where it stands alone (no letter, digit, `_` or `-`
/// on either side: `alice.txt` and `/data/alice/` lose it too).
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let part = |c: char| c.is_alphanumeric() || "_-".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(at) = text[i..].find(word).map(|a| a + i) {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        out.push_str(&text[i..at]);
        if before.is_some_and(part) || after.is_some_and(part) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        i = at + word.len();
    }
    out.push_str(&text[i..]);
    out
}

impl Report {
    /// The Markdown block of `--report`, scrubbed by `private`.
    pub(crate) fn to_markdown(&self, inv: &Invocation, private: &Private) -> String {
        let mut out = String::new();
        let tool = super::Tool::of(inv);
        let k = &self.knowledge;
        let _ = writeln!(
            out,
            "<details><summary>rocm-patchkit doctor --report</summary>\n"
        );
        let _ = writeln!(out, "#### rocm-patchkit doctor report\n");
        let _ = writeln!(
            out,
            "- tool: rocm-patchkit {} (commit {}), knowledge {} sha256 {}",
            tool.version,
            tool.commit,
            k.source,
            k.sha256.get(..16).unwrap_or(&k.sha256)
        );
        self.machine_lines(&mut out);
        self.libraries_md(&mut out);
        self.verdicts_md(&mut out);
        self.rest_md(&mut out);
        let _ = writeln!(out, "\n</details>");
        private.scrub(&out)
    }

    fn machine_lines(&self, out: &mut String) {
        let m = &self.machine;
        let os =
            m.os.as_ref()
                .map_or("not read".to_owned(), |o| o.describe());
        let gpus = m.gpus.as_ref().map_or("not read".to_owned(), |g| {
            let names: Vec<String> = g
                .iter()
                .map(|g| match g.device_id {
                    Some(id) => format!("{} (0x{id:04x})", g.gfx),
                    None => g.gfx.clone(),
                })
                .collect();
            names.join(", ")
        });
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "not read".to_owned());
        let module = m
            .amdgpu_file
            .as_ref()
            .map_or("not found".to_owned(), |f| format!("{}: {}", f.path, f.why));
        let kfd = m
            .kfd_abi
            .map_or("not read".to_owned(), |(a, b)| format!("{a}.{b}"));
        let cwsr = m
            .cwsr_enable
            .map_or("not read".to_owned(), |c| c.to_string());
        let _ = writeln!(out, "- OS: {os}");
        let _ = writeln!(out, "- GPUs: {gpus}");
        let _ = writeln!(
            out,
            "- kernel: {}; amdgpu cwsr_enable={cwsr}; KFD ABI {kfd}",
            or(&m.kernel_release)
        );
        let _ = writeln!(out, "- amdgpu module: {module}");
        let _ = writeln!(out, "- Secure Boot: {}", m.secure_boot.describe());
        let _ = writeln!(out, "- ROCm: {}", or(&m.rocm_version));
        for fw in &m.firmware {
            let _ = writeln!(out, "- firmware: {}", fw.describe());
        }
        for (key, text) in m.access.lines() {
            let _ = match key.is_empty() {
                true => writeln!(out, "  {text}"),
                false => writeln!(out, "- {key}: {text}"),
            };
        }
        for p in &m.dkms {
            let _ = writeln!(
                out,
                "- DKMS: {} {} (loaded: {})",
                p.name, p.version, p.loaded
            );
        }
    }

    fn libraries_md(&self, out: &mut String) {
        let m = &self.machine;
        let libs: Vec<_> = m
            .hipblaslt_libraries
            .iter()
            .chain(&m.tensile_libraries)
            .collect();
        if libs.is_empty() {
            let _ = writeln!(
                out,
                "\nlibraries: no hipBLASLt, rocBLAS or hipSPARSELt with gfx12 kernels found"
            );
            return;
        }
        let _ = writeln!(
            out,
            "\n| library | kind | version | kernels |\n|---|---|---|---|"
        );
        for l in libs {
            let mut verdict = l.judgement.describe();
            if let Some(r) = &l.rewritten {
                verdict.push_str(&format!("; patched: {r}"));
            }
            let version = l.version.as_deref().unwrap_or("?");
            let _ = writeln!(
                out,
                "| `{}` | {} | {version} | {} |",
                l.path,
                l.kind,
                cell(&verdict)
            );
        }
    }

    fn verdicts_md(&self, out: &mut String) {
        let _ = writeln!(out, "\n| fault | verdict | why |\n|---|---|---|");
        for f in &self.faults {
            let status = match (f.verdict.status, f.severity) {
                (Status::Affected, Severity::Info) => "info",
                (s, sev) => s.label(sev),
            };
            let _ = writeln!(out, "| {} | {status} | {} |", f.id, cell(&f.verdict.why));
        }
    }

    fn rest_md(&self, out: &mut String) {
        if !self.knobs.is_empty() {
            let _ = writeln!(out, "\nknobs set:");
        }
        for k in &self.knobs {
            let s = &k.setting;
            let _ = writeln!(
                out,
                "- `{}={}` ({}): {}",
                s.name,
                s.value,
                s.from,
                k.judgement.label()
            );
        }
        let logs = self.logs.to_text();
        if !logs.trim().is_empty() {
            let _ = writeln!(out, "\nlogs:\n\n```\n{}\n```", logs.trim_matches('\n'));
        }
        if !self.machine.unread.is_empty() {
            let _ = writeln!(out, "\ncould not read:");
        }
        for u in &self.machine.unread {
            let _ = writeln!(out, "- `{}`: {}", u.path, u.why);
        }
    }
}

/// Text for one table cell: no `|`, no line break.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homes_and_names_are_scrubbed() {
        let p = Private {
            names: vec!["alice".into()],
        };
        assert_eq!(
            p.scrub("/home/alice/venv/lib and /Users/bob/x, alice's job; malice alice.txt /tmp/m/home/carol/d"),
            "~/venv/lib and ~/x, <user>'s job; malice <user>.txt /tmp/m/home/<user>/d"
        );
    }
}
