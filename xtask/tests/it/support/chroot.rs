//! The clean Debian chroot of the repository and build-farm tests:
//! `.ci/setup` makes it once with mmdebstrap (the buildd variant of this
//! machine's suite, from its own apt sources) and keeps it as
//! `$PATCHKIT_CHROOT_DIR/<suite>-buildd.tar`; a test unpacks its own copy
//! and runs commands in it as root, in a mount namespace of their own
//! (`/proc` mounted there, nothing left mounted on the machine).
//!
//! The packages a test installs there that the chroot lacks (sbuild's core
//! dependencies, our templates' Build-Depends, `dkms`) come from
//! `$PATCHKIT_CHROOT_DIR/<suite>-debs/`, a flat repository `.ci/setup`
//! downloads once (its "local apt repository of the chroot tests" block),
//! served on 127.0.0.1 by [`LocalArchive`] while the chroot's own sources
//! are removed: no test reaches beyond 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::repos::Served;
use crate::support::tools::run;
use crate::support::{ci, is_root, Run};

/// The suite of this machine's apt sources (`bookworm`).
pub(crate) fn suite() -> String {
    let sources = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources")
        .expect("reading /etc/apt/sources.list.d/debian.sources");
    sources
        .lines()
        .find_map(|l| l.strip_prefix("Suites:"))
        .and_then(|s| s.split_whitespace().next())
        .expect("a Suites line in /etc/apt/sources.list.d/debian.sources")
        .to_owned()
}

fn chroot_dir() -> PathBuf {
    std::env::var_os("PATCHKIT_CHROOT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocm-patchkit/chroot"))
}

/// The kept chroot tarball, when this run can use it: root and the
/// tarball (in CI both must be there).
pub(crate) fn tarball() -> Option<PathBuf> {
    let tarball = chroot_dir().join(format!("{}-buildd.tar", suite()));
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

/// The local repository of the packages the chroot lacks, served on
/// 127.0.0.1 until dropped (`[trusted=yes]`: its `.debs` are the ones apt
/// verified against the archive's signed indexes in `.ci/setup`).
pub(crate) struct LocalArchive {
    _served: Served,
    /// The one-line apt source of the repository.
    pub(crate) source: String,
}

impl LocalArchive {
    /// Serves `$PATCHKIT_CHROOT_DIR/<suite>-debs/` when `.ci/setup` made it
    /// (in CI it must have).
    pub(crate) fn start() -> Option<LocalArchive> {
        let debs = chroot_dir().join(format!("{}-debs", suite()));
        if !debs.join("DEPENDS").is_file() || !debs.join("Packages").is_file() {
            assert!(
                !ci(),
                "{} is missing or incomplete and CI=true: the \"local apt repository of \
                 the chroot tests\" block of .ci/setup makes it",
                debs.display()
            );
            eprintln!("skipping: no {} (bash .ci/setup makes it)", debs.display());
            return None;
        }
        let served = Served::start(&debs, Served::pick_port());
        let source = format!("deb [trusted=yes] {}/ ./", served.url());
        Some(LocalArchive {
            _served: served,
            source,
        })
    }
}

/// Asserts that every fetch apt reported in `log` (`Get:`, `Hit:`, `Ign:`,
/// `Err:` lines) was from 127.0.0.1 or a local file (sbuild's own archive
/// of its dummy package is a `copy:/` one), and that there was one from
/// 127.0.0.1.
#[track_caller]
pub(crate) fn assert_fetched_only_locally(log: &str) {
    let fetches: Vec<&str> = log
        .lines()
        .filter(|l| {
            let first = l.split_whitespace().next().unwrap_or("");
            ["Get:", "Hit:", "Ign:", "Err:"]
                .iter()
                .any(|p| first.starts_with(p))
        })
        .collect();
    let local = |line: &&str| {
        let uri = line.split_whitespace().nth(1).unwrap_or("");
        ["http://127.0.0.1:", "file:/", "copy:/", "/"]
            .iter()
            .any(|p| uri.starts_with(p))
    };
    if let Some(line) = fetches.iter().find(|l| !local(l)) {
        panic!("apt fetched from beyond 127.0.0.1: {line}\n{log}");
    }
    assert!(
        fetches.iter().any(|l| l.contains(" http://127.0.0.1:")),
        "apt fetched nothing from 127.0.0.1:\n{log}"
    );
}

/// An unpacked copy of the chroot, removed when dropped.
pub(crate) struct Chroot {
    dir: tempfile::TempDir,
}

impl Chroot {
    pub(crate) fn unpack(tarball: &Path) -> Chroot {
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

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `path` inside the chroot (`etc/apt/...`), on the machine.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel.trim_start_matches('/'))
    }

    /// Removes the chroot's own apt sources: nothing but 127.0.0.1 is reached.
    pub(crate) fn offline(&self) -> &Chroot {
        for entry in std::fs::read_dir(self.path("etc/apt/sources.list.d"))
            .unwrap()
            .flatten()
        {
            std::fs::remove_file(entry.path()).unwrap();
        }
        let _ = std::fs::remove_file(self.path("etc/apt/sources.list"));
        self
    }

    /// [`Chroot::offline`], with `archive` as its one apt source.
    pub(crate) fn local_only(&self, archive: &LocalArchive) -> &Chroot {
        self.offline();
        std::fs::write(
            self.path("etc/apt/sources.list.d/local.list"),
            format!("{}\n", archive.source),
        )
        .unwrap();
        self
    }

    /// `sh -c script` as root inside the chroot, whatever its exit status.
    pub(crate) fn sh(&self, script: &str) -> Run {
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
    pub(crate) fn ok(&self, script: &str) -> String {
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
