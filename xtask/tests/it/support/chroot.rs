//! The clean Debian chroot of the repository and build-farm tests:
//! `.ci/setup` makes it once with mmdebstrap (the buildd variant of this
//! machine's suite, from its own apt sources) and keeps it as
//! `$PATCHKIT_CHROOT_DIR/<suite>-buildd.tar`; a test unpacks its own copy
//! and runs commands in it as root, in a mount namespace of their own
//! (`/proc` mounted there, nothing left mounted on the machine).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::tools::run;
use crate::support::{ci, is_root, Run};

/// The suite of this machine's apt sources (`bookworm`).
pub fn suite() -> String {
    let sources = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources")
        .expect("reading /etc/apt/sources.list.d/debian.sources");
    sources
        .lines()
        .find_map(|l| l.strip_prefix("Suites:"))
        .and_then(|s| s.split_whitespace().next())
        .expect("a Suites line in /etc/apt/sources.list.d/debian.sources")
        .to_owned()
}

/// The kept chroot tarball, when this run can use it: root and the
/// tarball (in CI both must be there).
pub fn tarball() -> Option<PathBuf> {
    let dir = std::env::var_os("PATCHKIT_CHROOT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocm-patchkit/chroot"));
    let tarball = dir.join(format!("{}-buildd.tar", suite()));
    if !is_root() {
        assert!(!ci(), "the chroot tests run as root in CI");
        eprintln!("skipping: the chroot tests need root");
        return None;
    }
    if !tarball.is_file() {
        assert!(
            !ci(),
            "{} is missing and CI=true: .ci/setup makes it",
            tarball.display()
        );
        eprintln!(
            "skipping: no {} (bash .ci/setup makes it)",
            tarball.display()
        );
        return None;
    }
    Some(tarball)
}

/// An unpacked copy of the chroot, removed when dropped.
pub struct Chroot {
    dir: tempfile::TempDir,
}

impl Chroot {
    pub fn unpack(tarball: &Path) -> Chroot {
        let dir = tempfile::Builder::new()
            .prefix("pk-chroot-")
            .tempdir()
            .unwrap();
        run(Command::new("tar")
            .arg("-xf")
            .arg(tarball)
            .arg("-C")
            .arg(dir.path()))
        .success();
        Chroot { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `path` inside the chroot (`etc/apt/...`), on the machine.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel.trim_start_matches('/'))
    }

    /// Removes the chroot's own apt sources: nothing but 127.0.0.1 is reached.
    pub fn offline(&self) -> &Chroot {
        for entry in std::fs::read_dir(self.path("etc/apt/sources.list.d"))
            .unwrap()
            .flatten()
        {
            std::fs::remove_file(entry.path()).unwrap();
        }
        let _ = std::fs::remove_file(self.path("etc/apt/sources.list"));
        self
    }

    /// `sh -c script` as root inside the chroot, whatever its exit status.
    pub fn sh(&self, script: &str) -> Run {
        let inner = format!(
            "mount -t proc proc /proc && {{ mount -t devpts devpts /dev/pts 2>/dev/null || true; }} && {script}"
        );
        run(Command::new("unshare")
            .args(["--mount", "--fork", "chroot"])
            .arg(self.root())
            .args(["/bin/sh", "-c", &inner])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("LC_ALL", "C.UTF-8")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .env("HOME", "/root"))
    }

    /// [`Chroot::sh`], which must succeed: its stdout and stderr.
    #[track_caller]
    pub fn ok(&self, script: &str) -> String {
        let out = self.sh(script);
        assert_eq!(out.code, 0, "{script}:\n{}{}", out.stdout, out.stderr);
        out.stdout + &out.stderr
    }
}

impl Drop for Chroot {
    fn drop(&mut self) {
        // Nothing stays mounted (the mounts lived in the command's own
        // namespace); removing the tree is all.
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}
