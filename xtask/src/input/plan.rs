//! The plan of a build as a value: every input with its pin, every patch
//! with its hash, every output file and the ordered steps, with its two
//! renderings (stable JSON for `cargo xtask plan --json` and the manifest's
//! inputs digest, and text for a person). `line::plan` makes it from a
//! recipe; the executor, the manifest and the packaging values read it.

use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;

use crate::formats::Format;
use crate::input::recipe::{Config, Dkms, KindName, PackageInfo, PatchOrigin, Source};

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub(crate) recipe: String,
    /// The recipe file, relative to the project root when it lies below it.
    pub(crate) recipe_file: String,
    pub(crate) kind: KindName,
    pub(crate) package: PackageInfo,
    pub(crate) source: PlannedSource,
    pub patches: Vec<PlannedPatch>,
    pub(crate) target: PlannedTarget,
    pub(crate) dkms: Option<Dkms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) config: Option<Config>,
    /// Files the recipe publishes, relative to `dist/`.
    pub(crate) outputs: Vec<String>,
    /// What the build runs, in order.
    pub(crate) steps: Vec<Step>,
    /// Inputs that carry no pin yet (`cargo xtask lock` fills them in).
    pub(crate) unpinned: Vec<String>,
}

/// One step of a build. Every kind runs the same line; a kind contributes
/// its `assemble` step and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub(crate) enum Step {
    /// Fetch (or take from the cache, verified) the source and the patches;
    /// stop here when the publication is up to date.
    Fetch,
    /// Reuse the patched tree when its whole state record (pins, patches,
    /// tolerance) is this build's, else extract and apply afresh; strictly,
    /// but for the fuzz a recipe allows one of its patches.
    EnsureApplied,
    /// Check the patched tree against its state record.
    Verify,
    /// The pristine source, the patches and `series` under `source/`.
    PublishSource { files: Vec<String> },
    /// The packaging files from `templates/`, under `packaging/`.
    Render,
    /// What the recipe's kind makes of the patched tree: the package's
    /// files (and, for dkms, the source packages listed here).
    Assemble {
        kind: KindName,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        files: Vec<String>,
    },
    /// One binary package.
    Package { format: Format, file: String },
    /// `manifest.json`, `SHA256SUMS`, and the folder swapped into place.
    Publish,
}

impl Step {
    /// `package deb`, `ensure-applied`: how the reporter names it.
    pub(crate) fn label(&self) -> String {
        match self {
            Step::Fetch => "fetch".to_owned(),
            Step::EnsureApplied => "ensure-applied".to_owned(),
            Step::Verify => "verify".to_owned(),
            Step::PublishSource { .. } => "publish-source".to_owned(),
            Step::Render => "render".to_owned(),
            Step::Assemble { kind, .. } => format!("assemble {}", kind.as_str()),
            Step::Package { format, .. } => format!("package {}", format.as_str()),
            Step::Publish => "publish".to_owned(),
        }
    }

    /// The files this step adds to the publication.
    pub(crate) fn files(&self) -> Vec<String> {
        match self {
            Step::PublishSource { files } | Step::Assemble { files, .. } => files.clone(),
            Step::Package { file, .. } => vec![file.clone()],
            Step::Publish => vec!["SHA256SUMS".to_owned(), "manifest.json".to_owned()],
            _ => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlannedSource {
    #[serde(flatten)]
    pub(crate) source: Source,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlannedPatch {
    /// 1-based position in the series.
    pub(crate) index: usize,
    pub(crate) name: String,
    #[serde(flatten)]
    pub(crate) origin: PatchOrigin,
    /// sha256 of the patch bytes: computed for files, pinned for the others.
    pub(crate) sha256: Option<String>,
    /// The fuzz the recipe allows this patch (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) fuzz: usize,
    /// The rendering-independent pins (normalised diff, produced blobs).
    #[serde(flatten)]
    pub(crate) pin: crate::input::recipe::PatchPin,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlannedTarget {
    pub(crate) kernel: Option<String>,
    pub(crate) kernel_regex: Option<String>,
    pub(crate) formats: Vec<Format>,
}

/// The plan as stable JSON: keys sorted, two-space indented.
pub fn to_json(plan: &Plan) -> Result<String> {
    // serde_json::Value keeps object keys in a BTreeMap: sorted output.
    let value = serde_json::to_value(plan)?;
    Ok(serde_json::to_string_pretty(&value)? + "\n")
}

/// The plan for a person to read.
pub(crate) fn to_text(plan: &Plan) -> String {
    let mut s = String::new();
    let p = &plan.package;
    let _ = writeln!(s, "recipe   {} ({})", plan.recipe, plan.recipe_file);
    let _ = writeln!(
        s,
        "package  {} {}-{} [{}]",
        p.name,
        p.about.version,
        p.about.release,
        plan.kind.as_str()
    );
    let _ = writeln!(s, "source   {}", source_text(&plan.source.source));
    if let Some(k) = &plan.target.kernel {
        let _ = writeln!(s, "kernel   {k}");
    }
    if let Some(k) = &plan.target.kernel_regex {
        let _ = writeln!(s, "kernel   /{k}/");
    }
    let pin = |v: &Option<String>| v.clone().unwrap_or_else(|| "UNPINNED".to_owned());
    let _ = writeln!(s, "patches  {}", plan.patches.len());
    for patch in &plan.patches {
        let origin = match &patch.origin {
            PatchOrigin::File { path } => format!("file {}", path.display()),
            PatchOrigin::Url { url, .. } => format!("url {url}"),
            PatchOrigin::Git { url, commit, .. } => format!("git {url} @ {commit}"),
        };
        let pins = match (&patch.sha256, &patch.pin.diff_sha256) {
            (None, Some(diff)) => format!("diff sha256 {diff}"),
            (sha, _) if sha.is_some() || patch.pin.produces.is_empty() => {
                format!("sha256 {}", pin(sha))
            }
            _ => String::new(),
        };
        let produces = match patch.pin.produces.len() {
            0 => String::new(),
            n => format!(
                "{}produces {n} blob(s)",
                if pins.is_empty() { "" } else { ", " }
            ),
        };
        let _ = writeln!(
            s,
            "  {:>2}. {}  {pins}{produces}  ({origin})",
            patch.index, patch.name,
        );
    }
    let _ = writeln!(s, "steps    {}", plan.steps.len());
    for (i, step) in plan.steps.iter().enumerate() {
        let line = format!(
            "  {:>2}. {:<16} {}",
            i + 1,
            step.label(),
            step.files().join(" ")
        );
        let _ = writeln!(s, "{}", line.trim_end());
    }
    let _ = writeln!(s, "outputs  (in dist/)");
    for out in &plan.outputs {
        let _ = writeln!(s, "  {out}");
    }
    if !plan.unpinned.is_empty() {
        let _ = writeln!(
            s,
            "unpinned {} (run `cargo xtask lock {}` to pin them)",
            plan.unpinned.join(", "),
            plan.recipe
        );
    }
    s
}

/// The source line of the plan's text: where the source comes from and its pin.
fn source_text(source: &Source) -> String {
    let pin = |v: &Option<String>| v.clone().unwrap_or_else(|| "UNPINNED".to_owned());
    match source {
        Source::Git {
            url,
            commit,
            reference,
            paths,
        } => {
            let mut line = format!("git {url} @ {}", pin(commit));
            if let Some(r) = reference {
                let _ = write!(line, " (ref {r})");
            }
            if !paths.is_empty() {
                let _ = write!(line, " paths {}", paths.join(" "));
            }
            line
        }
        Source::Tarball {
            url,
            sha256,
            strip,
            include,
        } => {
            format!(
                "tarball {url} sha256 {} strip {strip}{}",
                pin(sha256),
                include_text(include)
            )
        }
        Source::Deb(deb) => format!(
            "deb {} {} ({}) sha256 {}{}",
            deb.package,
            deb.version,
            deb.arch,
            deb.sha256,
            match (&deb.url, &deb.local) {
                (Some(url), _) => format!(" from {url}"),
                (_, Some(path)) => format!(" from {}", path.display()),
                _ => " through apt".to_owned(),
            }
        ),
        Source::Local {
            path,
            sha256,
            strip,
            include,
        } => format!(
            "local {} sha256 {} strip {strip}{}",
            path.display(),
            sha256
                .clone()
                .unwrap_or_else(|| "(not pinned; local input)".to_owned()),
            include_text(include)
        ),
    }
}

fn include_text(include: &[String]) -> String {
    if include.is_empty() {
        String::new()
    } else {
        format!(" include {}", include.join(" "))
    }
}
