//! DKMS on this machine: a module installed for a named kernel, and the
//! module file it built.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::tools::run;

/// `dkms status` for one module and kernel, after installing it for that
/// kernel when the package's own postinst did not (it builds for the
/// running kernel, which need not have headers).
pub(crate) fn install_for(module: &str, version: &str, kernel: &str) -> String {
    if !status(module, version, kernel).contains("installed") {
        run(Command::new("dkms").args(["install", "-m", module, "-v", version, "-k", kernel]))
            .success();
    }
    status(module, version, kernel)
}

/// `dkms status` for one module and kernel.
pub(crate) fn status(module: &str, version: &str, kernel: &str) -> String {
    run(Command::new("dkms").args(["status", "-m", module, "-v", version, "-k", kernel])).stdout
}

/// The built module under `/lib/modules/<kernel>/updates/dkms/`, compressed or not.
pub(crate) fn built_module(kernel: &str, name: &str) -> PathBuf {
    let dir = Path::new("/lib/modules").join(kernel).join("updates/dkms");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{name}.ko")))
        })
        .unwrap_or_else(|| panic!("no {name}.ko* in {}", dir.display()))
}
