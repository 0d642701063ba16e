//! build-hipblaslt: a patched hipBLASLt from a `kind = "hipblaslt"` recipe.
//! Always the source artifacts (pristine and patched source, the series,
//! manifest, checksums); with a ROCm toolchain also the library, built with
//! CMake and packaged as deb, rpm and Arch packages. Everything is published
//! into the output folder at once, or not at all.

pub mod cmake;
pub mod kernels;
pub mod packages;
pub mod source;
pub mod toolchain;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::diag::UsageError;
use crate::fetch::{self, FetchOptions};
use crate::manifest::Manifest;
use crate::patch::{stage, Tolerance};
use crate::recipe::{Kind, Recipe};
use crate::workspace::Workspace;
use toolchain::Toolchain;

/// The GPU targets built when none are given: RDNA4 (RX 9060/9070, R9700).
pub const DEFAULT_GPU_TARGETS: &str = "gfx1200;gfx1201";

/// Whether to build the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BuildMode {
    /// Build when a ROCm toolchain is found, else publish the source artifacts only
    Auto,
    /// Build, and fail at once when no ROCm toolchain is found
    Always,
    /// Publish the source artifacts only
    Never,
}

impl BuildMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildMode::Auto => "auto",
            BuildMode::Always => "always",
            BuildMode::Never => "never",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    /// `--rocm`; else `$ROCM_PATH`, else `/opt/rocm`.
    pub rocm: Option<PathBuf>,
    /// `gfx1200;gfx1201` (commas are accepted too).
    pub gpu_targets: String,
    pub mode: BuildMode,
    pub jobs: usize,
    /// The publication folder (`dist/<recipe>`).
    pub out: PathBuf,
    pub fetch: FetchOptions,
}

/// What a build published.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub dist: PathBuf,
    pub outputs: Vec<String>,
    /// The binary packages written, or why the binary build was skipped.
    pub binary: Result<Vec<String>, String>,
}

/// The toolchain the build will use, or why the binary build is skipped;
/// with `--build always` a missing toolchain is an error naming what is
/// missing, before anything is fetched.
pub fn toolchain_for(opts: &Options) -> Result<Result<Toolchain, String>> {
    match opts.mode {
        BuildMode::Never => Ok(Err("--build never".to_owned())),
        BuildMode::Always => match toolchain::find(opts.rocm.as_deref()) {
            Ok(tc) => Ok(Ok(tc)),
            Err(missing) => bail!(
                "--build always needs a ROCm toolchain: {}; install ROCm, or pass --rocm PATH, \
                 or use --build auto to publish the source artifacts only",
                missing.describe()
            ),
        },
        BuildMode::Auto => Ok(toolchain::find(opts.rocm.as_deref()).map_err(|m| m.describe())),
    }
}

/// `gfx1200;gfx1201` from `gfx1200,gfx1201` or `gfx1200;gfx1201`, each
/// target checked.
pub fn normalize_gpu_targets(list: &str) -> Result<String> {
    let targets: Vec<&str> = list
        .split([';', ','])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let bad: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|t| {
            !t.starts_with("gfx")
                || t.len() < 6
                || !t
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ":+-".contains(c))
        })
        .collect();
    if targets.is_empty() || !bad.is_empty() {
        bail!(UsageError(format!(
            "--gpu-targets `{list}`: expected GPU targets such as `gfx1200;gfx1201`{}",
            if bad.is_empty() {
                String::new()
            } else {
                format!(" (not a target: {})", bad.join(", "))
            }
        )));
    }
    Ok(targets.join(";"))
}

/// Runs the whole pipeline for `recipe`.
pub fn build(ws: &Workspace, recipe: &Recipe, opts: &Options) -> Result<Outcome> {
    if recipe.target.kind != Kind::Hipblaslt {
        bail!(UsageError(format!(
            "recipe {} is of kind `{}`; build-hipblaslt builds `kind = \"hipblaslt\"` recipes \
             (use `cargo xtask build-dkms {}` for DKMS recipes)",
            recipe.name,
            recipe.target.kind.as_str(),
            recipe.name
        )));
    }
    let gpu_targets = normalize_gpu_targets(&opts.gpu_targets)?;
    let toolchain = toolchain_for(opts)?;
    let reporter = &ws.reporter;
    if let Ok(tc) = &toolchain {
        check_release(recipe, tc, reporter);
    }
    let epoch = crate::target::source_date_epoch(&ws.root)?;
    let plan = crate::plan::plan(recipe)?;
    crate::dist::check_replaceable(&opts.out)?;
    let fetched = fetch::fetch(ws, recipe, &opts.fetch)
        .with_context(|| format!("fetching the inputs of {}", recipe.name))?;

    let lock = ws.lock_work(&recipe.name)?;
    let work = lock.dir.clone();
    let tree = work.join("tree");
    stage::apply_recipe(recipe, &fetched, &tree, Tolerance::strict(), reporter)?;
    let check = crate::verify::tree(&tree, reporter)?;
    if !check.ok {
        bail!(
            "the patched tree {} does not match its state record right after apply; run \
             `cargo xtask verify {}` to see which files differ",
            tree.display(),
            tree.display()
        );
    }

    let staging = crate::dist::Staging::begin(&opts.out)?;
    source::write(
        recipe,
        &fetched,
        &tree,
        &work,
        epoch,
        staging.dir(),
        reporter,
    )?;

    let mut kernel_verdict = None;
    let binary = match &toolchain {
        Ok(tc) => {
            let prefix = packages::install_prefix(recipe);
            let spec = cmake::BuildSpec {
                toolchain: tc,
                source: tree.join("projects/hipblaslt"),
                build: work.join("build"),
                root: work.join("root"),
                prefix: prefix.clone(),
                gpu_targets: gpu_targets.clone(),
                jobs: opts.jobs.max(1),
                source_date_epoch: epoch,
                log: work.join("build.log"),
            };
            if !spec.source.join("CMakeLists.txt").is_file() {
                bail!(
                    "the patched tree has no projects/hipblaslt/CMakeLists.txt; check that \
                     `source.paths` of {} includes projects/hipblaslt",
                    recipe.name
                );
            }
            cmake::build(&spec, reporter)?;
            let verdict = kernels::check(recipe, &spec.root, &prefix, &gpu_targets)?;
            reporter.step(format!("gfx12 kernels: {verdict}"));
            kernel_verdict = Some(verdict);
            let files = packages::tree(&spec.root, &prefix)?;
            let written = packages::write(recipe, &files, epoch as u64, staging.dir(), reporter)?;
            Ok(written)
        }
        Err(why) => {
            reporter.warn(format!(
                "binary build skipped ({why}); publishing the source artifacts only"
            ));
            Err(why.clone())
        }
    };

    let mut params = BTreeMap::new();
    params.insert("build_mode".to_owned(), opts.mode.as_str().to_owned());
    params.insert("gpu_targets".to_owned(), gpu_targets);
    match (&toolchain, &binary) {
        (Ok(tc), Ok(_)) => {
            params.insert("binary".to_owned(), "built".to_owned());
            params.insert("rocm_path".to_owned(), tc.prefix.display().to_string());
            params.insert(
                "rocm_version".to_owned(),
                tc.version.clone().unwrap_or_else(|| "unknown".to_owned()),
            );
            params.insert("compiler".to_owned(), tc.cxx.display().to_string());
            params.insert(
                "install_prefix".to_owned(),
                packages::install_prefix(recipe),
            );
            if let Some(verdict) = &kernel_verdict {
                params.insert("gfx12_expert_sched".to_owned(), verdict.clone());
            }
        }
        (_, Err(why)) | (Err(why), _) => {
            params.insert("binary".to_owned(), format!("skipped: {why}"));
        }
    }
    let mut manifest = Manifest::new(&plan, &fetched, epoch, params, &[])?;
    let dist = staging.publish(|outputs| {
        manifest.outputs = outputs;
        manifest.clone()
    })?;
    let outputs = manifest.outputs.keys().cloned().collect();
    Ok(Outcome {
        dist,
        outputs,
        binary,
    })
}

/// Warns when the toolchain's ROCm release is not the one the recipe's
/// version names (a 7.1 hipBLASLt built against a 7.2 HIP).
fn check_release(recipe: &Recipe, tc: &Toolchain, reporter: &crate::report::Reporter) {
    let want = toolchain::major_minor(&recipe.package.version);
    let have = tc.version.as_deref().and_then(toolchain::major_minor);
    match (want, have) {
        (Some(want), Some(have)) if want != have => reporter.warn(format!(
            "recipe {} is for ROCm {want} but the toolchain at {} is ROCm {have}; the library \
             will link against that ROCm",
            recipe.name,
            tc.prefix.display()
        )),
        (_, None) => reporter.warn(format!(
            "{} has no readable .info/version; the ROCm release is recorded as unknown",
            tc.prefix.display()
        )),
        _ => {}
    }
}
