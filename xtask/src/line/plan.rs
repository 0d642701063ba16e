//! Planning: a pure function from a recipe (and the formats asked for) to
//! its [`Plan`]: every input with its pin, every patch with its hash, every
//! output file and the ordered steps the build runs. `cargo xtask plan`
//! prints it; the executor (`line::exec`) walks its steps; the manifest's
//! inputs digest is taken over it. Reads only the recipe's patch files.

use std::path::Path;

use anyhow::{Context, Result};

use super::identity::{identity, machine};
use crate::formats::names;
use crate::formats::Format;
use crate::input::plan::{Plan, PlannedPatch, PlannedSource, PlannedTarget, Step};
use crate::input::recipe::{PatchOrigin, Recipe, Source};

/// Plans `recipe` for its own `target.formats`.
pub fn plan(recipe: &Recipe) -> Result<Plan> {
    plan_for(recipe, &recipe.target.formats)
}

/// Plans `recipe` for `formats`. Paths are shown relative to the project
/// root so the plan is the same on every machine.
pub(crate) fn plan_for(recipe: &Recipe, formats: &[Format]) -> Result<Plan> {
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
                    Some(crate::shared::hash::sha256_hex(&bytes)),
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
            pin: patch.pin.clone(),
        });
    }
    let steps = steps(recipe, formats);
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
        Source::Deb(deb) => Source::Deb(crate::input::recipe::DebSource {
            local: deb.local.as_deref().map(relative),
            ..deb.clone()
        }),
        other => other.clone(),
    };
    Ok(Plan {
        recipe: recipe.name.clone(),
        recipe_file: relative(&recipe.path).display().to_string(),
        kind: recipe.kind.name(),
        package: recipe.package.clone(),
        source: PlannedSource { source },
        patches,
        target: PlannedTarget {
            kernel: recipe.target.kernel.as_ref().map(|k| k.as_str().to_owned()),
            kernel_regex: recipe.target.kernel_regex.clone(),
            formats: formats.to_vec(),
        },
        dkms: recipe.kind.dkms().cloned(),
        config: recipe.kind.config().cloned(),
        outputs: outputs(&steps),
        steps,
        unpinned: recipe.unpinned(),
    })
}

/// The steps a build of `recipe` as `formats` runs, in order.
pub(crate) fn steps(recipe: &Recipe, formats: &[Format]) -> Vec<Step> {
    let kind = recipe.kind.name();
    let builds = super::kind_of(kind);
    let meta = identity(recipe);
    let mut steps = vec![Step::Fetch, Step::EnsureApplied, Step::Verify];
    // A rewrite's source is a binary package, pinned in the manifest: no
    // source artifacts to publish.
    if builds.publishes_source() {
        steps.push(Step::PublishSource {
            files: source_files(recipe),
        });
    }
    let mut files = Vec::new();
    if builds.renders() {
        // The templates see the orig tarball's sha256: render follows it.
        steps.push(Step::Render);
        files = formats
            .iter()
            .flat_map(|f| names::source_packages(*f, &meta))
            .collect();
    }
    // No format asked (hipBLASLt without a toolchain): the source only.
    if !formats.is_empty() {
        steps.push(Step::Assemble { kind, files });
    }
    for format in formats {
        if !kind.makes(*format) {
            continue;
        }
        steps.push(Step::Package {
            format: *format,
            file: names::file_name(*format, &meta, machine(kind)),
        });
    }
    steps.push(Step::Publish);
    steps
}

/// `source/`: the pristine archive, the patches and `series`, and for
/// hipBLASLt the patched tree.
fn source_files(recipe: &Recipe) -> Vec<String> {
    let p = &recipe.package;
    let mut files = vec![format!("source/{}", names::orig(&p.name, &p.about.version))];
    if super::kind_of(recipe.kind.name()).publishes_patched() {
        files.push(format!(
            "source/{}",
            names::patched(&p.name, &p.about.version)
        ));
    }
    files.extend(
        recipe
            .patches
            .iter()
            .map(|patch| format!("source/patches/{}", patch.name)),
    );
    files.push("source/patches/series".to_owned());
    files
}

/// Every file the steps publish, sorted.
fn outputs(steps: &[Step]) -> Vec<String> {
    let mut out: Vec<String> = steps.iter().flat_map(Step::files).collect();
    out.sort();
    out
}
