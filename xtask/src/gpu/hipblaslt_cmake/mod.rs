//! hipBLASLt's part of the build line (`line::hipblaslt` runs it): the
//! ROCm toolchain and its release, GPU targets, the CMake build, the check
//! of the built gfx12 kernels, and the binary packages' metadata and tree.

pub(crate) mod cmake;
pub(crate) mod kernels;
pub(crate) mod packages;
pub(crate) mod toolchain;

use std::path::Path;

use anyhow::{bail, Result};

use crate::input::recipe::Recipe;
use crate::shared::diag::UsageError;
use toolchain::Toolchain;

/// The GPU targets built when none are given: RDNA4 (RX 9060/9070, R9700).
pub(crate) const DEFAULT_GPU_TARGETS: &str = "gfx1200;gfx1201";

/// Whether to build the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BuildMode {
    /// Build when a ROCm toolchain is found, else publish the source artifacts only
    Auto,
    /// Build, and fail at once when no ROCm toolchain is found
    Always,
    /// Publish the source artifacts only
    Never,
}

impl BuildMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BuildMode::Auto => "auto",
            BuildMode::Always => "always",
            BuildMode::Never => "never",
        }
    }
}

/// The toolchain the build will use, or why the binary build is skipped;
/// with `--build always` a missing toolchain is an error naming what is
/// missing, before anything is fetched. `env` is the machine's
/// (`ROCM_PATH`, `PATH`).
pub(crate) fn toolchain_for(
    mode: BuildMode,
    rocm: Option<&Path>,
    env: &crate::shared::settings::Environment,
) -> Result<Result<Toolchain, String>> {
    match mode {
        BuildMode::Never => Ok(Err("--build never".to_owned())),
        BuildMode::Always => match toolchain::find(rocm, env) {
            Ok(tc) => Ok(Ok(tc)),
            Err(missing) => bail!(
                "--build always needs a ROCm toolchain: {}; install ROCm, or pass --rocm PATH, \
                 or use --build auto to publish the source artifacts only",
                missing.describe()
            ),
        },
        BuildMode::Auto => Ok(toolchain::find(rocm, env).map_err(|m| m.describe())),
    }
}

/// `gfx1200;gfx1201` from `gfx1200,gfx1201` or `gfx1200;gfx1201`, each
/// target checked.
pub(crate) fn normalize_gpu_targets(list: &str) -> Result<String> {
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

/// Warns when the toolchain's ROCm release is not the one the recipe's
/// version names (a 7.1 hipBLASLt built against a 7.2 HIP).
pub(crate) fn check_release(
    recipe: &Recipe,
    tc: &Toolchain,
    reporter: &crate::shared::report::Reporter,
) {
    let want = toolchain::major_minor(&recipe.package.about.version);
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
