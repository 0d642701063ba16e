//! The knowledge file as serde sees it (unknown keys refused) and its
//! validation into [`Knowledge`], every problem with its place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::{
    Build, Fault, Fix, KernelFacts, Knowledge, Library, Mitigation, Severity, VersionRange,
};
use crate::input::kernel::KernelRange;
use crate::shared::diag::{Diag, InvalidInput};

type Text = Spanned<String>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKnowledge {
    #[serde(default)]
    fault: Vec<Spanned<RawFault>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    id: Text,
    title: String,
    severity: Severity,
    gfx: Vec<Text>,
    summary: String,
    links: Vec<Text>,
    workaround: String,
    kernel: Option<RawKernel>,
    kfd_fixed: Option<Text>,
    rocm: Option<Text>,
    hipblaslt: Option<Text>,
    hipblaslt_fixed: Option<Text>,
    comgr: Option<Text>,
    trigger_rocm: Option<Text>,
    #[serde(default)]
    trigger_expert_sched: bool,
    needs: Option<Library>,
    #[serde(default)]
    fixed_by_packages: Vec<Text>,
    #[serde(default)]
    mitigation: RawMitigation,
    stopgap: Option<Text>,
    #[serde(default)]
    fix: Vec<Spanned<RawFix>>,
    log: Option<Spanned<super::log::RawLog>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    affected: Text,
    fixed: Option<Text>,
    unsupported: Option<Text>,
    unsupported_why: Option<Text>,
    retired: Option<Text>,
    retired_why: Option<Text>,
    #[serde(default)]
    trap_handler: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMitigation {
    #[serde(default)]
    cwsr_off: bool,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFix {
    recipe: Text,
    build: Build,
    kernel: Option<Text>,
    rocm: Option<Text>,
    release_contains: Option<String>,
    note: Option<String>,
}

/// Parses and validates the text of a knowledge file; every problem is
/// reported as `path:line:col: message` (an [`InvalidInput`], exit status 2).
pub(crate) fn parse(path: &Path, text: &str) -> Result<Knowledge> {
    let raw: RawKnowledge = toml::from_str(text).map_err(|err| {
        let at = err.span().map_or(0, |s| s.start);
        InvalidInput(vec![Diag::at(path, text, at, err.message().trim())])
    })?;
    let mut c = Checker {
        path,
        text,
        diags: Vec::new(),
    };
    let mut ids = BTreeSet::new();
    let mut faults = Vec::new();
    if raw.fault.is_empty() {
        c.err(
            0,
            "no `[[fault]]`: the knowledge file lists at least one fault",
        );
    }
    for spanned in &raw.fault {
        let f = spanned.get_ref();
        if !is_name(f.id.get_ref()) {
            c.err_at(&f.id, "`id` must be lower-case letters, digits and `-`");
        }
        if !ids.insert(f.id.get_ref().clone()) {
            c.err_at(&f.id, format!("fault `{}` is listed twice", f.id.get_ref()));
        }
        faults.push(fault(&mut c, f, spanned.span().start));
    }
    if c.diags.is_empty() {
        Ok(Knowledge {
            faults,
            knobs: Default::default(),
            revision: Default::default(),
        })
    } else {
        c.diags.sort_by_key(|d| (d.line, d.col));
        Err(InvalidInput(c.diags).into())
    }
}

struct Checker<'a> {
    path: &'a Path,
    text: &'a str,
    diags: Vec<Diag>,
}

impl Checker<'_> {
    fn err(&mut self, offset: usize, message: impl Into<String>) {
        self.diags
            .push(Diag::at(self.path, self.text, offset, message));
    }

    fn err_at(&mut self, value: &Text, message: impl Into<String>) {
        self.err(value.span().start, message);
    }

    fn kernel_range(&mut self, value: &Option<Text>, key: &str) -> Option<KernelRange> {
        let v = value.as_ref()?;
        KernelRange::parse(v.get_ref())
            .map_err(|why| self.err_at(v, format!("`{key}`: {why}")))
            .ok()
    }

    fn version_range(&mut self, value: &Option<Text>, key: &str) -> Option<VersionRange> {
        let v = value.as_ref()?;
        VersionRange::parse(v.get_ref())
            .map_err(|why| self.err_at(v, format!("`{key}`: {why}")))
            .ok()
    }

    /// A ROCm range, which must stay inside one release stream (see
    /// [`VersionRange::one_rocm_stream`]).
    fn rocm_range(&mut self, value: &Option<Text>, key: &str) -> Option<VersionRange> {
        let range = self.version_range(value, key)?;
        if let (Err(why), Some(v)) = (range.one_rocm_stream(), value) {
            self.err_at(v, format!("`{key}`: {why}"));
        }
        Some(range)
    }

    fn recipe_name(&mut self, value: &Text, key: &str) -> String {
        if !is_name(value.get_ref()) {
            self.err_at(
                value,
                format!("`{key}`: a recipe name is lower-case letters, digits, `.` and `-`"),
            );
        }
        value.get_ref().clone()
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

fn fault(c: &mut Checker, f: &RawFault, at: usize) -> Fault {
    check_targets_and_links(c, f, at);
    let kernel = f.kernel.as_ref().and_then(|k| kernel_facts(c, k));
    let rocm = c.rocm_range(&f.rocm, "rocm");
    let hipblaslt = c.version_range(&f.hipblaslt, "hipblaslt");
    if f.kernel.is_none()
        && f.rocm.is_none()
        && f.hipblaslt.is_none()
        && f.comgr.is_none()
        && f.needs.is_none()
        && f.log.is_none()
    {
        c.err(
            at,
            "a fault needs something to judge by: `[fault.kernel]`, `rocm`, `hipblaslt`, `comgr`, `needs` or `[fault.log]`",
        );
    }
    let fixes = fixes(c, f);
    let log = super::log::facts(f.log.as_ref(), &mut |at, m| c.err(at, m));
    check_env_names(c, f, at);
    Fault {
        id: f.id.get_ref().clone(),
        title: f.title.clone(),
        severity: f.severity,
        gfx: f.gfx.iter().map(|g| g.get_ref().clone()).collect(),
        summary: f.summary.trim().to_owned(),
        links: f.links.iter().map(|l| l.get_ref().clone()).collect(),
        kernel,
        kfd_fixed: c.version_range(&f.kfd_fixed, "kfd_fixed"),
        rocm,
        hipblaslt,
        hipblaslt_fixed: c.version_range(&f.hipblaslt_fixed, "hipblaslt_fixed"),
        comgr: c.version_range(&f.comgr, "comgr"),
        trigger_rocm: c.rocm_range(&f.trigger_rocm, "trigger_rocm"),
        trigger_expert_sched: f.trigger_expert_sched,
        needs: f.needs,
        fixed_by_packages: f
            .fixed_by_packages
            .iter()
            .map(|p| c.recipe_name(p, "fixed_by_packages"))
            .collect(),
        mitigation: Mitigation {
            cwsr_off: f.mitigation.cwsr_off,
            env: f.mitigation.env.clone(),
        },
        stopgap: f.stopgap.as_ref().map(|s| c.recipe_name(s, "stopgap")),
        workaround: f.workaround.trim().to_owned(),
        fixes,
        log,
    }
}

/// `gfx` names targets or families, `links` are upstream https links.
fn check_targets_and_links(c: &mut Checker, f: &RawFault, at: usize) {
    let gfx_ok = |g: &str| {
        let body = g.strip_prefix("gfx").unwrap_or("");
        let body = body.strip_suffix('*').unwrap_or(body);
        !body.is_empty() && body.chars().all(|c| c.is_ascii_hexdigit())
    };
    if f.gfx.is_empty() {
        c.err(at, "`gfx`: name at least one GPU target such as `gfx1201`");
    }
    for g in &f.gfx {
        if !gfx_ok(g.get_ref()) {
            c.err_at(
                g,
                "`gfx`: write a target such as `gfx1201` or a family such as `gfx103*`",
            );
        }
    }
    if f.links.is_empty() {
        c.err(at, "`links`: give at least one upstream link for the fault");
    }
    for link in &f.links {
        if !link.get_ref().starts_with("https://") {
            c.err_at(link, "`links`: an upstream link starts with https://");
        }
    }
}

/// `[fault.kernel]`: its ranges, each reason beside what it explains.
fn kernel_facts(c: &mut Checker, k: &RawKernel) -> Option<KernelFacts> {
    let facts = KernelFacts {
        affected: c.kernel_range(&Some(k.affected.clone()), "kernel.affected")?,
        fixed: c.kernel_range(&k.fixed, "kernel.fixed"),
        unsupported: c.kernel_range(&k.unsupported, "kernel.unsupported"),
        unsupported_why: k.unsupported_why.as_ref().map(|w| w.get_ref().clone()),
        retired: c.kernel_range(&k.retired, "kernel.retired"),
        retired_why: k.retired_why.as_ref().map(|w| w.get_ref().clone()),
        trap_handler: k.trap_handler,
    };
    match (&k.unsupported, &k.unsupported_why) {
        (Some(u), None) => c.err_at(u, "`kernel.unsupported` needs `unsupported_why`"),
        (None, Some(w)) => c.err_at(w, "`kernel.unsupported_why` without `unsupported`"),
        _ => {}
    }
    match (&k.retired, &k.retired_why) {
        (Some(r), None) => c.err_at(r, "`kernel.retired` needs `retired_why`"),
        (None, Some(w)) => c.err_at(w, "`kernel.retired_why` without `retired`"),
        _ => {}
    }
    Some(facts)
}

/// `[[fault.fix]]`: each says when it applies.
fn fixes(c: &mut Checker, f: &RawFault) -> Vec<Fix> {
    let mut fixes = Vec::new();
    for raw in &f.fix {
        let fix = raw.get_ref();
        if fix.build.doctor_fix().is_none() {
            c.err(
                raw.span().start,
                format!(
                    "`fix.build`: `{}` is not the kind of a fix; give one of {}",
                    fix.build.as_str(),
                    fix_kinds()
                ),
            );
        }
        if fix.kernel.is_none() && fix.rocm.is_none() {
            c.err(
                raw.span().start,
                "`[[fault.fix]]` says when it applies: give `kernel` or `rocm`",
            );
        }
        fixes.push(Fix {
            recipe: c.recipe_name(&fix.recipe, "fix.recipe"),
            build: fix.build,
            kernel: c.kernel_range(&fix.kernel, "fix.kernel"),
            rocm: c.rocm_range(&fix.rocm, "fix.rocm"),
            release_contains: fix.release_contains.clone(),
            note: fix.note.clone(),
        });
    }
    fixes
}

/// `mitigation.env` names environment variables.
fn check_env_names(c: &mut Checker, f: &RawFault, at: usize) {
    for name in f.mitigation.env.keys() {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_');
        if !ok {
            c.err(
                at,
                format!("`mitigation.env`: `{name}` is not an environment variable name"),
            );
        }
    }
}

/// The kinds a fix can be, as `fix.build` names them: `dkms`, `hipblaslt`.
fn fix_kinds() -> String {
    let kinds: Vec<String> = Build::ALL
        .iter()
        .filter(|(_, kind)| kind.doctor_fix().is_some())
        .map(|(name, _)| format!("`{name}`"))
        .collect();
    kinds.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_all_reported_with_their_place() {
        let text = r#"
[[fault]]
id = "Bad Id"
title = "t"
severity = "fault"
gfx = ["gfx12x"]
summary = "s"
links = ["http://example.org"]
workaround = "w"
rocm = ">=7.x"
"#;
        let err = parse(Path::new("k.toml"), text).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("k.toml:3:6: `id` must be"), "{msg}");
        assert!(msg.contains("k.toml:6:8: `gfx`"), "{msg}");
        assert!(msg.contains("k.toml:8:10: `links`"), "{msg}");
        assert!(msg.contains("k.toml:10:8: `rocm`"), "{msg}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let text = "[[fault]]\nid = \"a\"\ncolour = \"red\"\n";
        let err = parse(Path::new("k.toml"), text).unwrap_err().to_string();
        assert!(err.contains("unknown field `colour`"), "{err}");
    }
}
