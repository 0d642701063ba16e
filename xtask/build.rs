//! Build script: the commit this binary is built from, for what doctor's
//! `--json` and `--report` say about the tool. `PATCHKIT_COMMIT` given by
//! the build wins; else `git describe` of the checkout being built (the
//! wheel's and the tarball's builds run in one); else nothing (the report
//! then says `unknown`). Never fails the build.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PATCHKIT_COMMIT");
    let given = std::env::var("PATCHKIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    if let Some(commit) = given.or_else(describe) {
        println!("cargo:rustc-env=PATCHKIT_COMMIT={}", commit.trim());
    }
}

/// `git describe --always --tags` of the checkout, watching the files that
/// move when a commit is made or checked out.
fn describe() -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
    };
    let head = git(&["rev-parse", "--git-path", "HEAD"])?;
    let mut watched = vec![head];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.extend(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched {
        let path = Path::new(&dir).join(path);
        if !path.exists() {
            continue;
        }
        println!("cargo:rerun-if-changed={}", path.display());
    }
    git(&["describe", "--always", "--tags", "--abbrev=12"])
}
