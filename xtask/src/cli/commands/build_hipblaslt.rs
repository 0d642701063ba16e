//! `cargo xtask build-hipblaslt [<recipe>]`: a patched hipBLASLt into
//! `dist/<recipe>/` through the one build line (`line::run`): the source
//! artifacts always, the library packaged as deb, rpm and Arch packages
//! when a ROCm toolchain is found.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::fetch::FetchOptions;
use crate::gpu::hipblaslt_cmake::{self, toolchain, BuildMode};
use crate::input::recipe::{self, KindName, Recipe};
use crate::input::workspace::Workspace;
use crate::line::hipblaslt::{Binary, Settings};
use crate::line::{self, Options, Outcome};
use crate::release::manifest::Manifest;
use crate::shared::diag::{display_path, UsageError};

/// Build a patched hipBLASLt from a `kind = "hipblaslt"` recipe
///
/// Fetches the pinned rocm-libraries source and patches, applies the series,
/// and publishes into the output folder at once: the pristine and patched
/// source archives, the series, manifest.json and SHA256SUMS. When a ROCm
/// toolchain is found (--rocm, else $ROCM_PATH, else /opt/rocm; it needs
/// bin/amdclang++ or bin/hipcc, lib/cmake/hip and cmake on PATH) the library
/// is configured and built with CMake for the GPU targets, installed into a
/// staging root and packaged as .deb, .rpm and Arch packages that install
/// into /opt/rocm-patchkit/hipblaslt-<version>. The build log is kept in
/// target/patchkit/work/<recipe>/build.log.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name or path [default: the hipblaslt recipe for the found ROCm release]
    pub(crate) recipe: Option<String>,
    /// The ROCm prefix to build with [default: $ROCM_PATH, else /opt/rocm]
    #[arg(long, value_name = "PATH")]
    pub(crate) rocm: Option<PathBuf>,
    /// GPU targets, separated by `;` or `,`
    #[arg(long, value_name = "LIST", default_value = hipblaslt_cmake::DEFAULT_GPU_TARGETS)]
    pub(crate) gpu_targets: String,
    /// Whether to build the library
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub(crate) build: BuildMode,
    /// Parallel compile jobs [default: the number of CPUs]
    #[arg(long, short, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// The output folder; new, empty or an earlier publication (with its
    /// manifest.json), as the whole folder is replaced [default: dist/<recipe>]
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Use only inputs already in the cache (no network)
    #[arg(long)]
    pub(crate) offline: bool,
    /// Fetch inputs that carry no pin yet, recording the pins taken
    #[arg(long)]
    pub(crate) allow_unpinned: bool,
}

/// This command, as a kind names the command that builds it: the recipes
/// it builds are those whose kind names it.
const COMMAND: &str = "build-hipblaslt";

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let name = match &args.recipe {
        Some(name) => name.clone(),
        None => default_recipe(ws, args)?,
    };
    let recipe = Recipe::load(&ws.root, &name)?;
    if recipe.kind.name().build_command() != COMMAND {
        bail!(UsageError(format!(
            "recipe {} is of kind `{}`; build-hipblaslt builds `kind = \"hipblaslt\"` recipes \
             (use `cargo xtask {} {}`)",
            recipe.name,
            recipe.kind.name().as_str(),
            recipe.kind.name().build_command(),
            recipe.name
        )));
    }
    let opts = Options {
        recipe: name,
        kind: Some(KindName::Hipblaslt),
        kernel: None,
        modules_dir: PathBuf::from("/lib/modules"),
        formats: None,
        out: args.out.clone(),
        fetch: FetchOptions {
            offline: args.offline,
            allow_unpinned: args.allow_unpinned,
            ..Default::default()
        },
        compression: None,
        hipblaslt: Settings {
            rocm: args.rocm.clone(),
            gpu_targets: args.gpu_targets.clone(),
            mode: args.build,
            jobs: args.jobs.unwrap_or(Settings::default().jobs),
        },
    };
    let outcome = line::run(ws, &opts)?;
    let Outcome::Published { dir, outputs } = &outcome else {
        crate::shared::report::out(&outcome.to_text());
        return Ok(());
    };
    for output in outputs.keys() {
        crate::outln!("{}", display_path(&dir.join(output)).display());
    }
    let manifest = Manifest::read(dir)
        .with_context(|| format!("reading the manifest of {}", display_path(dir).display()))?;
    match Binary::recorded(&manifest)? {
        Binary::Built => crate::outln!(
            "built {} for {}: {} package(s) and the source in {}",
            recipe.name,
            hipblaslt_cmake::normalize_gpu_targets(&args.gpu_targets)?,
            outputs.keys().filter(|o| is_package(o)).count(),
            display_path(dir).display()
        ),
        Binary::Skipped { why } => crate::outln!(
            "published the source of {} in {}; binary build skipped: {why}",
            recipe.name,
            display_path(dir).display()
        ),
    }
    Ok(())
}

/// A binary package among the outputs.
fn is_package(name: &str) -> bool {
    [".deb", ".rpm", ".pkg.tar.zst"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// The hipblaslt recipe whose version has the found ROCm's major.minor.
fn default_recipe(ws: &Workspace, args: &Args) -> Result<String> {
    let mut candidates = Vec::new();
    for name in recipe::list(&ws.root)? {
        match Recipe::load(&ws.root, &name) {
            Ok(r) if r.kind.name().build_command() == COMMAND => candidates.push(r),
            Ok(_) => {}
            // it may be the one meant: say why it is not a candidate
            Err(err) => ws.reporter.warn(format!(
                "recipe {name} could not be read, so it is not a candidate: {err:#}"
            )),
        }
    }
    let names = || {
        candidates
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if candidates.len() == 1 {
        return Ok(candidates[0].name.clone());
    }
    let found = toolchain::find(args.rocm.as_deref(), &ws.settings.env);
    let release = found
        .as_ref()
        .ok()
        .and_then(|tc| tc.version.as_deref())
        .and_then(toolchain::major_minor);
    let Some(release) = release else {
        bail!(UsageError(format!(
            "name a recipe: no ROCm release to choose one by ({}); hipblaslt recipes: {}",
            match &found {
                Ok(tc) => format!("{} has no .info/version", tc.prefix.display()),
                Err(missing) => missing.describe(),
            },
            names()
        )));
    };
    let matching: Vec<&Recipe> = candidates
        .iter()
        .filter(|r| toolchain::major_minor(&r.package.about.version).as_deref() == Some(&*release))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one.name.clone()),
        _ => bail!(UsageError(format!(
            "name a recipe: {} hipblaslt recipe(s) match ROCm {release}; hipblaslt recipes: {}",
            matching.len(),
            names()
        ))),
    }
}
