//! The demo recipe (`demo-hello`) in a scratch project, and `build-dkms`
//! of it for Debian 12's kernel at a fixed epoch: the setting most build
//! tests start from.

use std::path::PathBuf;
use std::process::Command;

use crate::support::{Project, Run};

pub(crate) const EPOCH: &str = "1767225600";

/// A scratch project holding the demo recipe, its module and the templates.
pub(crate) fn demo_project() -> Project {
    let p = Project::new();
    p.copy_from_repo(&[
        "recipes/demo-hello.toml",
        "patches/demo-hello",
        "examples/demo-hello",
        "templates",
    ]);
    p
}

/// `build-dkms demo-hello` for Debian 12's kernel at [`EPOCH`], `extra`
/// appended: to run in the background or with more environment.
pub(crate) fn build_command(p: &Project, extra: &[&str]) -> Command {
    let mut args = vec![
        "build-dkms",
        "demo-hello",
        "--kernel",
        "6.12.117+deb12-amd64",
    ];
    args.extend_from_slice(extra);
    let mut cmd = p.command(&args);
    cmd.env("SOURCE_DATE_EPOCH", EPOCH);
    cmd
}

pub(crate) fn build(p: &Project, extra: &[&str]) -> Run {
    Run::of(build_command(p, extra).output().expect("running xtask"))
}

pub(crate) fn dist(p: &Project) -> PathBuf {
    p.root().join("dist/demo-hello")
}
