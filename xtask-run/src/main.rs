//! `cargo xtask`'s launcher. The alias runs cargo with `--quiet`, so that
//! everyday commands print only what xtask says; but then the first build,
//! which compiles every dependency for several minutes, would be silent.
//! This launcher has no dependencies, so it compiles in about a second; it
//! builds xtask itself with cargo's progress shown when no xtask binary
//! exists yet, quietly otherwise, and then runs it with the arguments given.

use std::env;
use std::path::PathBuf;
use std::process::{exit, Command, ExitStatus};

fn main() {
    let args: Vec<_> = env::args_os().skip(1).collect();
    // The launcher lives in the profile folder cargo builds xtask into.
    let here = env::current_exe().unwrap_or_else(|e| die(&format!("locating the launcher: {e}")));
    let xtask: PathBuf = here.with_file_name(format!("xtask{}", env::consts::EXE_SUFFIX));
    let first = !xtask.is_file();
    if first {
        eprintln!(
            "rocm-patchkit: first run, building xtask (a few minutes, once; later runs start at once)"
        );
    }
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--package", "xtask", "--bin", "xtask"]);
    if !first {
        build.arg("--quiet");
    }
    if here.parent().and_then(|p| p.file_name()) == Some("release".as_ref()) {
        build.arg("--release");
    }
    let status = build
        .status()
        .unwrap_or_else(|e| die(&format!("running cargo build: {e}")));
    if !status.success() {
        exit(code(status));
    }
    let status = run(Command::new(&xtask).args(&args));
    exit(code(status));
}

/// Runs xtask in this process's place where the platform allows it, so
/// signals and the exit status are xtask's own.
#[cfg(unix)]
fn run(cmd: &mut Command) -> ExitStatus {
    use std::os::unix::process::CommandExt;
    let err = cmd.exec();
    die(&format!("running {:?}: {err}", cmd.get_program()))
}

#[cfg(not(unix))]
fn run(cmd: &mut Command) -> ExitStatus {
    cmd.status()
        .unwrap_or_else(|e| die(&format!("running {:?}: {e}", cmd.get_program())))
}

fn code(status: ExitStatus) -> i32 {
    status.code().unwrap_or(1)
}

fn die(msg: &str) -> ! {
    eprintln!("error: {msg}");
    exit(1)
}
