//! `cargo xtask`: parses the flags; `run.rs` lists the commands (each in
//! `commands/<name>.rs` with one `run`), dispatches and maps the ending to
//! the exit status.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use xtask::input::workspace::Workspace;

/// rocm-patchkit: pinned upstream fixes for amdgpu/amdkfd and hipBLASLt,
/// applied to pinned sources and packaged.
///
/// Start with `doctor`: it says which known fault affects this machine and
/// which recipe fixes it. A recipe in recipes/ names a pinned upstream
/// source, an ordered patch series and the packages to build. The usual path
/// is `plan` (what would happen) -> `fetch` (download and verify into the
/// cache) -> `apply` (patched tree) -> `build-dkms` (packages in dist/).
///
/// Exit status: 0 success, 1 failure, 2 invalid recipe or arguments
/// (`doctor`: 3 when a fault affects the machine unmitigated).
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    version,
    max_term_width = 100
)]
struct Cli {
    /// Print warnings and errors only
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Content-addressed cache of verified inputs [env: PATCHKIT_CACHE_DIR]
    /// [default: target/patchkit/cache]
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: xtask::cli::run::Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ws = match Workspace::from_process(cli.cache_dir.clone(), cli.quiet) {
        Ok(ws) => ws,
        Err(err) => return xtask::cli::run::exit(Err(err.into())),
    };
    xtask::cli::run::run(&ws, &cli.command)
}
