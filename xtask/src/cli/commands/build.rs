//! `cargo xtask build <recipe>`: any recipe through the one build line,
//! whatever its kind; `build-dkms`, `build-config` and `build-hipblaslt`
//! are the same line with the kind fixed.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::formats::Format;
use crate::gpu::hipblaslt_cmake::BuildMode;
use crate::input::recipe::{KindName, Recipe};
use crate::input::workspace::Workspace;
use crate::line::{self, hipblaslt::Settings, Options};
use crate::shared::diag::UsageError;

/// Build any recipe into dist/<recipe>/, by its kind
///
/// Runs the steps `cargo xtask plan <recipe>` lists, in that order: fetch,
/// ensure-applied (a patched tree is reused only when its whole state
/// record, tolerance included, is this build's), verify, publish-source
/// (pristine source, patches, series), render (dkms), assemble (what the
/// kind makes: the DKMS tree and source packages, the config files, the
/// CMake-built hipBLASLt), one package step per format, publish (manifest,
/// SHA256SUMS, the folder swapped in at once). A re-run with nothing
/// changed does nothing.
///
/// The kind-specific flags apply to their kind only: --kernel to dkms,
/// --rocm, --gpu-targets, --build and --jobs to hipblaslt.
///
/// A rewrite recipe (`kind = "rewrite"`) takes an upstream binary package
/// pinned by sha256 (`[source] deb`, through apt, `url` or `local`),
/// rewrites its gfx12 kernel files so that they never switch expert
/// scheduling on (ensure-applied; the sites go into the state record and
/// the manifest; verify reads every kernel file again), and packages the
/// .deb that takes the package's place (`<version>+patchkit<release>`).
///
/// Examples:
///   cargo xtask build demo-hello --kernel 6.12.117+deb12-amd64
///   cargo xtask build amdgpu-cwsr-off --formats deb
///   cargo xtask build hipblaslt-rocm-7.1-expert-sched-off --rocm /opt/rocm --build always
///   cargo xtask build hipblaslt-debian-7.1.1-expert-sched-off
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    pub(crate) recipe: String,
    /// dkms: the kernel release to build for [default: the newest with headers]
    #[arg(long, value_name = "RELEASE")]
    pub(crate) kernel: Option<String>,
    /// Package formats, comma-separated [default: the recipe's `target.formats`]
    #[arg(long, value_delimiter = ',', value_parser = |text: &str| super::parse_format(text, None), value_name = super::formats_value_name(None))]
    pub(crate) formats: Option<Vec<Format>>,
    /// hipblaslt: the ROCm prefix [default: $ROCM_PATH, else /opt/rocm]
    #[arg(long, value_name = "PATH")]
    pub(crate) rocm: Option<PathBuf>,
    /// hipblaslt: GPU targets, separated by `;` or `,` [default: gfx1200;gfx1201]
    #[arg(long, value_name = "LIST")]
    pub(crate) gpu_targets: Option<String>,
    /// hipblaslt: whether to build the library [default: auto]
    #[arg(long, value_enum, value_name = "WHEN")]
    pub(crate) build: Option<BuildMode>,
    /// hipblaslt: parallel compile jobs [default: the number of CPUs]
    #[arg(long, short, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    #[command(flatten)]
    pub(crate) publish: super::PublishArgs,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let recipe = Recipe::load(&ws.root, &args.recipe)?;
    check_flags(&recipe, args)?;
    let defaults = Settings::default();
    let opts = Options {
        kernel: args.kernel.clone(),
        formats: args.formats.clone(),
        hipblaslt: Settings {
            rocm: args.rocm.clone(),
            gpu_targets: args.gpu_targets.clone().unwrap_or(defaults.gpu_targets),
            mode: args.build.unwrap_or(defaults.mode),
            jobs: args.jobs.unwrap_or(defaults.jobs),
        },
        ..args.publish.options(&args.recipe, None)
    };
    crate::shared::report::out(&line::run(ws, &opts)?.to_text());
    Ok(())
}

/// Refuses a flag that the recipe's kind does not take.
fn check_flags(recipe: &Recipe, args: &Args) -> Result<()> {
    let kind = recipe.kind.name();
    let given = [
        ("--kernel", args.kernel.is_some()),
        ("--rocm", args.rocm.is_some()),
        ("--gpu-targets", args.gpu_targets.is_some()),
        ("--build", args.build.is_some()),
        ("--jobs", args.jobs.is_some()),
    ];
    for (flag, set) in given {
        if set && !kind.build_flags().contains(&flag) {
            let takers: Vec<String> = KindName::ALL
                .iter()
                .filter(|(_, k)| k.build_flags().contains(&flag))
                .map(|(word, _)| format!("`kind = \"{word}\"`"))
                .collect();
            bail!(UsageError(format!(
                "{flag} is for {} recipes; recipe {} is `kind = \"{}\"`: drop {flag}",
                takers.join(" or "),
                recipe.name,
                kind.as_str()
            )));
        }
    }
    Ok(())
}
