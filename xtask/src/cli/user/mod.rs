//! `rocm-patchkit`, the user's command: what runs without a checkout, for
//! the person whose training job dies, installed from a wheel or a tarball.
//! `doctor` and `rewrite-hipblaslt` (their `Args` are the commands' own),
//! `verify` of a published folder or a patched tree, and `completions`.
//! The knowledge files are the ones built in, or `--knowledge DIR`. The
//! maintainers' commands (recipes, fetch, builds) stay `cargo xtask`'s.

pub mod docs;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cli::commands;
use crate::input::invocation::Invocation;
use crate::input::knowledge::Source;
use crate::input::workspace::Workspace;
use crate::shared::error::Error;

/// rocm-patchkit: is this machine hit by a known AMD GPU fault (the RDNA4
/// expert-scheduling fault of hipBLASLt and the amdkfd trap handler), and
/// the fix.
///
/// Start with `doctor`: it reads the machine and every hipBLASLt a program
/// can load (a venv's PyTorch wheel included), says which known fault
/// affects it and the next command. `rewrite-hipblaslt` fixes a hipBLASLt's
/// kernels in place, now, without a reboot. Packages of the kernel fix are
/// built in a rocm-patchkit checkout (`cargo xtask`).
///
/// Exit status: 0 success, 1 failure, 2 invalid arguments or input
/// (`doctor`: 3 when a fault affects the machine unmitigated).
#[derive(Debug, Parser)]
#[command(
    name = "rocm-patchkit",
    bin_name = "rocm-patchkit",
    version,
    max_term_width = 100
)]
pub(crate) struct Cli {
    /// Print warnings and errors only
    #[arg(long, short, global = true)]
    pub(crate) quiet: bool,
    /// Read the knowledge files (faults.toml, knobs.toml) from this folder
    /// (or its knowledge/) instead of the ones built in: newer facts without
    /// a new binary
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) knowledge: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    Doctor(commands::doctor::Args),
    #[command(after_long_help = commands::rewrite_hipblaslt::examples(crate::input::invocation::INSTALLED))]
    RewriteHipblaslt(commands::rewrite_hipblaslt::Args),
    Verify(VerifyArgs),
    Completions(CompletionsArgs),
}

/// Check a published folder against SHA256SUMS and its manifest, or a
/// patched tree against its state record
///
/// A dist/<recipe>/ folder (it has SHA256SUMS), as a release or a CI job
/// published it: every file is checked against SHA256SUMS and
/// manifest.json. A tree with a state record in TREE/.patchkit/: every patch
/// is reported applied, not applied or changed after apply. Exit status 0
/// only when everything agrees. (Checking a tree against a recipe's series
/// is `cargo xtask verify --recipe` in a checkout.)
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The published folder or the patched tree to check
    pub(crate) tree: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

/// Print the shell completion script for bash, zsh or fish
///
/// The wheel and the tarball install them already (share/bash-completion,
/// share/zsh/site-functions, share/fish/vendor_completions.d); for another
/// place: `rocm-patchkit completions bash > ~/.local/share/bash-completion/completions/rocm-patchkit`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell
    #[arg(value_enum)]
    pub(crate) shell: docs::Shell,
}

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let exe = std::env::current_exe().ok();
    let mut ws = match Workspace::from_process(None, cli.quiet) {
        Ok(ws) => ws,
        Err(err) => return crate::cli::run::exit(Err(err.into())),
    };
    ws.invocation = Invocation::installed(std::env::args_os().next(), exe.as_deref());
    ws.knowledge = match &cli.knowledge {
        Some(dir) => Source::Dir(dir.clone()),
        None => Source::BuiltIn,
    };
    crate::cli::run::exit(dispatch(&ws, &cli.command))
}

fn dispatch(ws: &Workspace, command: &Command) -> Result<(), Error> {
    match command {
        Command::Doctor(args) => commands::doctor::run(ws, args),
        Command::RewriteHipblaslt(args) => Ok(commands::rewrite_hipblaslt::run(ws, args)?),
        Command::Verify(args) => {
            let args = commands::verify::Args {
                tree: args.tree.clone(),
                recipe: None,
                json: args.json,
                series: commands::SeriesArgs {
                    offline: true,
                    fuzz: 0,
                },
            };
            Ok(commands::verify::run(ws, &args)?)
        }
        Command::Completions(args) => {
            crate::shared::report::out(&docs::completion(args.shell));
            Ok(())
        }
    }
}
