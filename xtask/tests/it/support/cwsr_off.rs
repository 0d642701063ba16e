//! The `amdgpu-cwsr-off` config recipe (the stop-gap) in a scratch project,
//! and `build-config` of it at the demo's fixed epoch.

use std::path::PathBuf;

use crate::support::demo::EPOCH;
use crate::support::{Project, Run};

pub(crate) fn project() -> Project {
    let p = Project::new();
    p.copy_from_repo(&[
        "recipes/amdgpu-cwsr-off.toml",
        "examples/amdgpu-cwsr-off",
        "templates",
    ]);
    p
}

pub(crate) fn build(p: &Project, extra: &[&str]) -> Run {
    let mut args = vec!["build-config", "amdgpu-cwsr-off"];
    args.extend_from_slice(extra);
    p.xtask_with(&args, &[("SOURCE_DATE_EPOCH", EPOCH)])
}

pub(crate) fn dist(p: &Project) -> PathBuf {
    p.root().join("dist/amdgpu-cwsr-off")
}

pub(crate) fn the_conf() -> String {
    std::fs::read_to_string(
        crate::support::repo_root().join("examples/amdgpu-cwsr-off/amdgpu-cwsr-off.conf"),
    )
    .unwrap()
}
