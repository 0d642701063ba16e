//! The knowledge file of known faults, `knowledge/faults.toml`: each fault
//! with its upstream links, affected GPU targets, kernel / ROCm / hipBLASLt
//! ranges, the recipes that fix it and the workaround. Parsed with unknown
//! keys refused and validated with every problem reported at once; nothing
//! here reads the machine (that is `doctor`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::diag::{Diag, InvalidInput};
use crate::recipe::KernelRange;

/// Where the knowledge file lives below the project root.
pub const PATH: &str = "knowledge/faults.toml";

/// Every known fault, in file order.
#[derive(Debug, Clone)]
pub struct Knowledge {
    pub path: PathBuf,
    pub faults: Vec<Fault>,
}

/// How much an affected verdict matters: `Fault` makes `doctor` exit 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Fault,
    Info,
}

/// A library that must be present for a fault to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Library {
    Hipblaslt,
    Miopen,
}

impl Library {
    pub fn as_str(self) -> &'static str {
        match self {
            Library::Hipblaslt => "hipBLASLt",
            Library::Miopen => "MIOpen",
        }
    }
}

/// Which `cargo xtask build-*` command builds a fix recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Build {
    Dkms,
    Hipblaslt,
}

impl Build {
    pub fn command(self) -> &'static str {
        match self {
            Build::Dkms => "build-dkms",
            Build::Hipblaslt => "build-hipblaslt",
        }
    }
}

/// One known fault, validated.
#[derive(Debug, Clone)]
pub struct Fault {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// GPU targets (`gfx1201`) or families (`gfx103*`).
    pub gfx: Vec<String>,
    pub summary: String,
    pub links: Vec<String>,
    pub kernel: Option<KernelFacts>,
    pub kfd_fixed: Option<VersionRange>,
    pub rocm: Option<VersionRange>,
    pub hipblaslt: Option<VersionRange>,
    pub hipblaslt_fixed: Option<VersionRange>,
    pub trigger_rocm: Option<VersionRange>,
    pub needs: Option<Library>,
    pub fixed_by_packages: Vec<String>,
    pub mitigation: Mitigation,
    pub stopgap: Option<String>,
    pub workaround: String,
    pub fixes: Vec<Fix>,
}

/// The kernels a kernel-side fault affects, is fixed in, or cannot happen on.
#[derive(Debug, Clone)]
pub struct KernelFacts {
    pub affected: KernelRange,
    pub fixed: Option<KernelRange>,
    pub unsupported: Option<KernelRange>,
    pub unsupported_why: Option<String>,
}

/// What makes the fault harmless without fixing it.
#[derive(Debug, Clone, Default)]
pub struct Mitigation {
    /// Compute wave save/restore switched off (`amdgpu.cwsr_enable=0`).
    pub cwsr_off: bool,
    /// Environment variables that, all set to these values, avoid it.
    pub env: BTreeMap<String, String>,
}

/// A recipe that fixes the fault, and when it applies.
#[derive(Debug, Clone)]
pub struct Fix {
    pub recipe: String,
    pub build: Build,
    pub kernel: Option<KernelRange>,
    pub rocm: Option<VersionRange>,
    /// Applies only when the kernel release contains this (`+deb`).
    pub release_contains: Option<String>,
    pub note: Option<String>,
}

impl Fault {
    /// Whether a GPU target such as `gfx1201` is one this fault affects.
    pub fn affects_gfx(&self, gfx: &str) -> bool {
        self.gfx
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => gfx.starts_with(prefix),
                None => gfx == pattern,
            })
    }
}

impl Knowledge {
    /// Reads and validates `<root>/knowledge/faults.toml`.
    pub fn load(root: &Path) -> Result<Knowledge> {
        let path = root.join(PATH);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading the knowledge file {}: run from a rocm-patchkit checkout (or set PATCHKIT_ROOT)",
                path.display()
            )
        })?;
        parse(&path, &text).with_context(|| {
            format!(
                "the knowledge file {} is invalid",
                crate::diag::display_path(&path).display()
            )
        })
    }

    /// Every recipe a fault names (fixes and stop-gaps), sorted.
    pub fn recipes(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for fault in &self.faults {
            names.extend(fault.fixes.iter().map(|f| f.recipe.clone()));
            names.extend(fault.stopgap.iter().cloned());
        }
        names
    }
}

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

/// A ROCm / hipBLASLt / KFD version range in the recipe kernel-range
/// grammar: `>=7.0, <7.2 || >=7.3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    text: String,
    alternatives: Vec<Vec<(String, Version)>>,
}

impl VersionRange {
    pub fn parse(text: &str) -> Result<VersionRange, String> {
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let mut set = Vec::new();
            for comparator in alternative.split(',') {
                let comparator = comparator.trim();
                let (op, rest) = [">=", "<=", ">", "<", "="]
                    .iter()
                    .find_map(|op| comparator.strip_prefix(op).map(|rest| (*op, rest.trim())))
                    .ok_or_else(|| {
                        format!("`{comparator}` is not a comparator: write e.g. `>=7.0, <7.2`")
                    })?;
                let valid = !rest.is_empty()
                    && rest.split('.').count() <= 4
                    && rest.split('.').all(|p| p.parse::<u32>().is_ok());
                let version = Version::parse_prefix(rest)
                    .filter(|_| valid)
                    .ok_or_else(|| format!("`{rest}` is not a version such as `7.1` or `1.5.0`"))?;
                set.push((op.to_owned(), version));
            }
            alternatives.push(set);
        }
        Ok(VersionRange {
            text: text.trim().to_owned(),
            alternatives,
        })
    }

    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives.iter().any(|set| {
            set.iter().all(|(op, bound)| {
                let ord = version.cmp(bound);
                match op.as_str() {
                    ">=" => ord.is_ge(),
                    ">" => ord.is_gt(),
                    "<=" => ord.is_le(),
                    "<" => ord.is_lt(),
                    _ => ord.is_eq(),
                }
            })
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

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
    trigger_rocm: Option<Text>,
    needs: Option<Library>,
    #[serde(default)]
    fixed_by_packages: Vec<Text>,
    #[serde(default)]
    mitigation: RawMitigation,
    stopgap: Option<Text>,
    #[serde(default)]
    fix: Vec<Spanned<RawFix>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    affected: Text,
    fixed: Option<Text>,
    unsupported: Option<Text>,
    unsupported_why: Option<Text>,
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
pub fn parse(path: &Path, text: &str) -> Result<Knowledge> {
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
            path: path.to_owned(),
            faults,
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
    for link in &f.links {
        if !link.get_ref().starts_with("https://") {
            c.err_at(link, "`links`: an upstream link starts with https://");
        }
    }
    let kernel = f.kernel.as_ref().and_then(|k| {
        let facts = KernelFacts {
            affected: c.kernel_range(&Some(k.affected.clone()), "kernel.affected")?,
            fixed: c.kernel_range(&k.fixed, "kernel.fixed"),
            unsupported: c.kernel_range(&k.unsupported, "kernel.unsupported"),
            unsupported_why: k.unsupported_why.as_ref().map(|w| w.get_ref().clone()),
        };
        match (&k.unsupported, &k.unsupported_why) {
            (Some(u), None) => c.err_at(u, "`kernel.unsupported` needs `unsupported_why`"),
            (None, Some(w)) => c.err_at(w, "`kernel.unsupported_why` without `unsupported`"),
            _ => {}
        }
        Some(facts)
    });
    let rocm = c.version_range(&f.rocm, "rocm");
    let hipblaslt = c.version_range(&f.hipblaslt, "hipblaslt");
    if f.kernel.is_none() && f.rocm.is_none() && f.hipblaslt.is_none() && f.needs.is_none() {
        c.err(
            at,
            "a fault needs something to judge by: `[fault.kernel]`, `rocm`, `hipblaslt` or `needs`",
        );
    }
    let mut fixes = Vec::new();
    for raw in &f.fix {
        let fix = raw.get_ref();
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
            rocm: c.version_range(&fix.rocm, "fix.rocm"),
            release_contains: fix.release_contains.clone(),
            note: fix.note.clone(),
        });
    }
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
        trigger_rocm: c.version_range(&f.trigger_rocm, "trigger_rocm"),
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
        assert!(r.matches(&v("7.2.1")));
        assert!(r.matches(&v("7.2")));
        assert!(!r.matches(&v("7.3.0")));
        assert!(!r.matches(&v("7.10.0")));
        let r = VersionRange::parse("<1.5 || =2.0").unwrap();
        assert!(r.matches(&v("1.4.9")) && r.matches(&v("2")) && !r.matches(&v("1.5.0")));
        assert!(VersionRange::parse("7.1")
            .unwrap_err()
            .contains("not a comparator"));
        assert!(VersionRange::parse(">=7.x")
            .unwrap_err()
            .contains("not a version"));
    }

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
