//! The plan: a pure function from a recipe to every input with its pin,
//! every patch with its hash and every output path. `cargo xtask plan`
//! prints it; later stages walk it. Reads only the recipe's patch files.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::recipe::{Config, Dkms, Format, Kind, Package, PatchOrigin, Recipe, Source};

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub recipe: String,
    /// The recipe file, relative to the project root when it lies below it.
    pub recipe_file: String,
    pub kind: Kind,
    pub package: Package,
    pub source: PlannedSource,
    pub patches: Vec<PlannedPatch>,
    pub target: PlannedTarget,
    pub dkms: Option<Dkms>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Config>,
    /// Files the recipe publishes, relative to `dist/`.
    pub outputs: Vec<String>,
    /// Inputs that carry no pin yet (`cargo xtask lock` fills them in).
    pub unpinned: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlannedSource {
    #[serde(flatten)]
    pub source: Source,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlannedPatch {
    /// 1-based position in the series.
    pub index: usize,
    pub name: String,
    #[serde(flatten)]
    pub origin: PatchOrigin,
    /// sha256 of the patch bytes: computed for files, pinned for the others.
    pub sha256: Option<String>,
    /// The fuzz the recipe allows this patch (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub fuzz: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize)]
pub struct PlannedTarget {
    pub kernel: Option<String>,
    pub kernel_regex: Option<String>,
    pub formats: Vec<Format>,
}

/// Plans `recipe`. Paths are shown relative to the project root so the plan
/// is the same on every machine.
pub fn plan(recipe: &Recipe) -> Result<Plan> {
    let relative = |p: &Path| p.strip_prefix(&recipe.root).unwrap_or(p).to_path_buf();
    let mut patches = Vec::new();
    for (i, patch) in recipe.patches.iter().enumerate() {
        let (origin, sha256) = match &patch.origin {
            PatchOrigin::File { path } => {
                let bytes = std::fs::read(path)
                    .with_context(|| format!("reading patch {}", path.display()))?;
                (
                    PatchOrigin::File {
                        path: relative(path),
                    },
                    Some(sha256_hex(&bytes)),
                )
            }
            PatchOrigin::Url { sha256, .. } | PatchOrigin::Git { sha256, .. } => {
                (patch.origin.clone(), sha256.clone())
            }
        };
        patches.push(PlannedPatch {
            index: i + 1,
            name: patch.name.clone(),
            origin,
            sha256,
            fuzz: patch.fuzz,
        });
    }
    let source = match &recipe.source {
        Source::Local {
            path,
            sha256,
            strip,
            include,
        } => Source::Local {
            path: relative(path),
            sha256: sha256.clone(),
            strip: *strip,
            include: include.clone(),
        },
        other => other.clone(),
    };
    Ok(Plan {
        recipe: recipe.name.clone(),
        recipe_file: relative(&recipe.path).display().to_string(),
        kind: recipe.target.kind,
        package: recipe.package.clone(),
        source: PlannedSource { source },
        patches,
        target: PlannedTarget {
            kernel: recipe.target.kernel.as_ref().map(|k| k.as_str().to_owned()),
            kernel_regex: recipe.target.kernel_regex.clone(),
            formats: recipe.target.formats.clone(),
        },
        dkms: recipe.dkms.clone(),
        config: recipe.config.clone(),
        outputs: outputs(recipe),
        unpinned: recipe.unpinned(),
    })
}

/// The file names a recipe publishes into `dist/`, sorted.
pub fn outputs(recipe: &Recipe) -> Vec<String> {
    let p = &recipe.package;
    let (name, version, release) = (&p.name, &p.version, &p.release);
    let mut out = vec![
        "SHA256SUMS".to_owned(),
        "manifest.json".to_owned(),
        format!("source/{name}_{version}.orig.tar.gz"),
        "source/patches/series".to_owned(),
    ];
    out.extend(
        recipe
            .patches
            .iter()
            .map(|patch| format!("source/patches/{}", patch.name)),
    );
    if recipe.target.kind == Kind::Config {
        // Each format's package and source package; the files they carry
        // are the recipe's own.
        for format in &recipe.target.formats {
            out.extend(match format {
                Format::Deb => vec![
                    format!("{name}_{version}-{release}_all.deb"),
                    format!("source/{name}_{version}-{release}.dsc"),
                    format!("source/{name}_{version}-{release}.debian.tar.xz"),
                ],
                Format::Rpm => vec![
                    format!("{name}-{version}-{release}.noarch.rpm"),
                    format!("{name}-{version}-{release}.src.rpm"),
                ],
                Format::Arch => vec![
                    format!("{name}-{version}-{release}-any.pkg.tar.zst"),
                    format!("{name}-{version}-{release}.src.tar.gz"),
                ],
                Format::Tar => Vec::new(),
            });
        }
        out.sort();
        return out;
    }
    if recipe.target.kind == Kind::Dkms {
        for format in &recipe.target.formats {
            match format {
                Format::Deb => out.extend([
                    format!("source/{name}_{version}-{release}.dsc"),
                    format!("source/{name}_{version}-{release}.debian.tar.xz"),
                ]),
                Format::Rpm => out.push(format!("{name}-dkms-{version}-{release}.src.rpm")),
                Format::Arch => out.push(format!("{name}-dkms-{version}-{release}.src.tar.gz")),
                _ => {}
            }
            out.push(match format {
                Format::Deb => format!("{name}-dkms_{version}-{release}_all.deb"),
                Format::Rpm => format!("{name}-dkms-{version}-{release}.noarch.rpm"),
                Format::Arch => format!("{name}-dkms-{version}-{release}-any.pkg.tar.zst"),
                Format::Tar => format!("{name}-{version}-source-only.dkms.tar.gz"),
            });
        }
    } else {
        out.push(format!("source/{name}-{version}-patched.tar.gz"));
    }
    out.sort();
    out
}

pub use crate::hash::sha256_hex;

/// The plan as stable JSON: keys sorted, two-space indented.
pub fn to_json(plan: &Plan) -> Result<String> {
    // serde_json::Value keeps object keys in a BTreeMap: sorted output.
    let value = serde_json::to_value(plan)?;
    Ok(serde_json::to_string_pretty(&value)? + "\n")
}

/// The plan for a person to read.
pub fn to_text(plan: &Plan) -> String {
    let mut s = String::new();
    let p = &plan.package;
    let _ = writeln!(s, "recipe   {} ({})", plan.recipe, plan.recipe_file);
    let _ = writeln!(
        s,
        "package  {} {}-{} [{}]",
        p.name,
        p.version,
        p.release,
        plan.kind.as_str()
    );
    let pin = |v: &Option<String>| v.clone().unwrap_or_else(|| "UNPINNED".to_owned());
    let source = match &plan.source.source {
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
    };
    let _ = writeln!(s, "source   {source}");
    if let Some(k) = &plan.target.kernel {
        let _ = writeln!(s, "kernel   {k}");
    }
    if let Some(k) = &plan.target.kernel_regex {
        let _ = writeln!(s, "kernel   /{k}/");
    }
    let _ = writeln!(s, "patches  {}", plan.patches.len());
    for patch in &plan.patches {
        let origin = match &patch.origin {
            PatchOrigin::File { path } => format!("file {}", path.display()),
            PatchOrigin::Url { url, .. } => format!("url {url}"),
            PatchOrigin::Git { url, commit, .. } => format!("git {url} @ {commit}"),
        };
        let _ = writeln!(
            s,
            "  {:>2}. {}  sha256 {}  ({origin})",
            patch.index,
            patch.name,
            pin(&patch.sha256)
        );
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

fn include_text(include: &[String]) -> String {
    if include.is_empty() {
        String::new()
    } else {
        format!(" include {}", include.join(" "))
    }
}
