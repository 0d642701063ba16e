//! What `main` does once the flags are parsed: the commands, their
//! dispatch, and the one place a command's ending becomes an exit status
//! (through [`Error::code`]) and its error is printed (through
//! [`crate::shared::report::safe`]).

use std::process::ExitCode;

use clap::Subcommand;

use crate::cli::commands;
use crate::input::workspace::Workspace;
use crate::shared::error::Error;

#[derive(Debug, Subcommand)]
pub enum Command {
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
    PublishRepo(commands::publish_repo::Args),
}

/// Runs `command`; its error, if any, is printed on stderr and mapped to
/// the exit status.
pub fn run(ws: &Workspace, command: &Command) -> ExitCode {
    exit(dispatch(ws, command))
}

/// The exit status of a command's ending (of `cargo xtask` and of the
/// installed `rocm-patchkit`), its error printed on stderr.
pub fn exit(result: Result<(), Error>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if let Some(message) = err.message() {
                eprintln!("{message}");
            }
            ExitCode::from(err.code())
        }
    }
}

/// Runs `command` to its ending (also the bench's way to run the product's
/// commands in its maintainer's loop).
pub fn dispatch(ws: &Workspace, command: &Command) -> Result<(), Error> {
    let result = match command {
        Command::Doctor(args) => return commands::doctor::run(ws, args),
        Command::List(args) => commands::list::run(ws, args),
        Command::Plan(args) => commands::plan::run(ws, args),
        Command::Build(args) => commands::build::run(ws, args),
        Command::BuildDkms(args) => commands::build_dkms::run(ws, args),
        Command::Fetch(args) => commands::fetch::run(ws, args),
        Command::Lock(args) => commands::lock::run(ws, args),
        Command::Apply(args) => commands::apply::run(ws, args),
        Command::Verify(args) => commands::verify::run(ws, args),
        Command::Drift(args) => commands::drift::run(ws, args),
        Command::BuildHipblaslt(args) => commands::build_hipblaslt::run(ws, args),
        Command::BuildConfig(args) => commands::build_config::run(ws, args),
        Command::RewriteHipblaslt(args) => commands::rewrite_hipblaslt::run(ws, args),
        Command::PublishRepo(args) => commands::publish_repo::run(ws, args),
    };
    Ok(result?)
}
