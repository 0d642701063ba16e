//! `cargo xtask`: parses flags and dispatches; each command lives in
//! `commands/<name>.rs` with one `run`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xtask::commands;
use xtask::report::{Mode, Reporter};
use xtask::workspace::Workspace;

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
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Doctor(commands::doctor::Args),
    /// List the recipes in recipes/ with their kind, version and pin state
    List(commands::list::Args),
    /// Show what a recipe would fetch, apply and publish (no network, no writes)
    Plan(commands::plan::Args),
    Fetch(commands::fetch::Args),
    Lock(commands::lock::Args),
    Apply(commands::apply::Args),
    /// Check a patched tree against its record, a tree against a series, or a dist/ folder
    Verify(commands::verify::Args),
    /// Check whether the series still applies to a newer upstream
    Drift(commands::drift::Args),
    Build(commands::build::Args),
    BuildDkms(commands::build_dkms::Args),
    BuildConfig(commands::build_config::Args),
    BuildHipblaslt(commands::build_hipblaslt::Args),
    RewriteHipblaslt(commands::rewrite_hipblaslt::Args),
    /// Benchmarks (commands, not tests) against the reference tools
    Bench(commands::bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ws = Workspace::new(
        cli.cache_dir.clone(),
        Reporter::new(Mode::detect(cli.quiet)),
    );
    let result = match &cli.command {
        Command::Doctor(args) => commands::doctor::run(&ws, args),
        Command::List(args) => commands::list::run(&ws, args),
        Command::Plan(args) => commands::plan::run(&ws, args),
        Command::Build(args) => commands::build::run(&ws, args),
        Command::BuildDkms(args) => commands::build_dkms::run(&ws, args),
        Command::Fetch(args) => commands::fetch::run(&ws, args),
        Command::Lock(args) => commands::lock::run(&ws, args),
        Command::Apply(args) => commands::apply::run(&ws, args),
        Command::Verify(args) => commands::verify::run(&ws, args),
        Command::Drift(args) => commands::drift::run(&ws, args),
        Command::Bench(args) => commands::bench::run(&ws, args),
        Command::BuildHipblaslt(args) => commands::build_hipblaslt::run(&ws, args),
        Command::BuildConfig(args) => commands::build_config::run(&ws, args),
        Command::RewriteHipblaslt(args) => commands::rewrite_hipblaslt::run(&ws, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = xtask::diag::exit_code(&err);
            // text from outside (paths, entry names, recipe values) is in
            // the messages: printed through the one escaping function
            let safe = |text: String| xtask::report::safe(&text).into_owned();
            if let Some(invalid) = err.downcast_ref::<xtask::diag::InvalidInput>() {
                eprintln!("{}", safe(invalid.to_string()));
                let outer = err.to_string();
                if outer == invalid.to_string() {
                    eprintln!("error: the recipe is invalid (see above)");
                } else {
                    eprintln!("error: {}", safe(outer));
                }
            } else {
                eprintln!("error: {}", safe(format!("{err:#}")));
            }
            ExitCode::from(code as u8)
        }
    }
}
