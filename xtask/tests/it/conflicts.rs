//! One amdgpu DKMS package at a time: two of ours for different series
//! (and AMD's `amdgpu-dkms`) conflict, in each format's own terms, read back
//! with dpkg-deb, rpm and pacman; and dpkg itself, in a scratch admin
//! folder, refuses a second series beside the first.

use std::path::Path;
use std::process::Command;

use xtask::formats::{self, names, FileTree, PackageMeta, Relations};

use crate::support::package::{meta, write_module, EPOCH};
use crate::support::tools::{pacman_info, run};
use crate::support::{ci, have_tool};

fn amdgpu_meta(name: &str, version: &str) -> PackageMeta {
    let base = meta();
    PackageMeta {
        name: names::dkms_package(name),
        about: xtask::formats::About {
            version: version.to_owned(),
            ..base.about.clone()
        },
        relations: Relations::for_dkms_modules(["amdgpu"]),
        ..base
    }
}

fn tree(staging: &Path, name: &str, version: &str) -> FileTree {
    FileTree::from_dir(staging, &names::dkms_source_dir(name, version)).unwrap()
}

#[test]
fn only_amdgpu_packages_carry_the_relations() {
    assert!(Relations::for_dkms_modules(["patchkit_hello"]).is_empty());
    let r = Relations::for_dkms_modules(["amdgpu"]);
    assert!(r.conflicts.iter().any(|c| c == "amdgpu-dkms"));
    assert!(r.conflicts.iter().any(|c| r.provides.contains(c)));
}

#[test]
fn each_format_declares_the_conflicts_in_its_own_terms() {
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    write_module(&staging, false);
    let out = dir.path().join("out");
    let m = amdgpu_meta("amdgpu-expert-sched-6.14", "6.14.11.1");
    let t = tree(&staging, "amdgpu-expert-sched-6.14", "6.14.11.1");
    let none = formats::Scripts::default();
    let write = |format| {
        let pkg = formats::Package {
            meta: &m,
            machine: formats::Architecture::Any,
            tree: &t,
            scripts: &none,
            pkgbuild: None,
            epoch: EPOCH,
        };
        formats::write(format, &pkg, &out, &Default::default())
            .unwrap()
            .path
    };
    let deb = write(formats::Format::Deb);
    let rpm = write(formats::Format::Rpm);
    let arch = write(formats::Format::Arch);

    if have_tool("dpkg-deb") {
        let field = |f: &str| run(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(f)).stdout;
        assert_eq!(
            field("Conflicts").trim(),
            "amdgpu-dkms, amdgpu-patchkit-dkms"
        );
        assert_eq!(field("Replaces").trim(), "amdgpu-patchkit-dkms");
        assert_eq!(field("Provides").trim(), "amdgpu-patchkit-dkms");
    } else {
        assert!(!ci(), "CI must have dpkg-deb");
    }
    if have_tool("rpm") {
        let q = |flag: &str| {
            run(Command::new("rpm").args(["-qp", flag]).arg(&rpm))
                .success()
                .stdout
                .clone()
        };
        let conflicts = q("--conflicts");
        assert_eq!(
            conflicts.lines().collect::<Vec<_>>(),
            ["amdgpu-dkms", "amdgpu-patchkit-dkms"]
        );
        let provides = q("--provides");
        assert!(
            provides.lines().any(|l| l.trim() == "amdgpu-patchkit-dkms"),
            "{provides}"
        );
        assert!(
            provides
                .lines()
                .any(|l| l.trim() == "amdgpu-expert-sched-6.14-dkms = 6.14.11.1-1"),
            "{provides}"
        );
    } else {
        assert!(!ci(), "CI must have rpm");
    }
    if have_tool("pacman") {
        let info = pacman_info(&arch);
        let line = |key: &str| {
            info.lines()
                .find(|l| l.starts_with(key))
                .unwrap_or_else(|| panic!("{key} in {info}"))
                .split_once(':')
                .unwrap()
                .1
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(line("Conflicts With"), "amdgpu-dkms amdgpu-patchkit-dkms");
        assert_eq!(line("Provides"), "amdgpu-patchkit-dkms");
    } else {
        assert!(!ci(), "CI must have pacman");
    }
}

#[test]
fn dpkg_keeps_one_series_installed_at_a_time() {
    if !have_tool("dpkg") {
        assert!(!ci(), "CI must have dpkg");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    write_module(&staging, false);
    let out = dir.path().join("out");
    let none = formats::Scripts::default();
    let debs: Vec<_> = [
        ("amdgpu-expert-sched-6.12", "6.12.63.1"),
        ("amdgpu-expert-sched-6.14", "6.14.11.1"),
    ]
    .iter()
    .map(|(name, version)| {
        let pkg = formats::Package {
            meta: &amdgpu_meta(name, version),
            machine: formats::Architecture::Any,
            tree: &tree(&staging, name, version),
            scripts: &none,
            pkgbuild: None,
            epoch: EPOCH,
        };
        formats::write(formats::Format::Deb, &pkg, &out, &Default::default())
            .unwrap()
            .path
    })
    .collect();
    // A scratch dpkg database and install root: nothing of this machine's.
    let root = dir.path().join("root");
    let admin = root.join("var/lib/dpkg");
    for sub in ["updates", "info", "triggers"] {
        std::fs::create_dir_all(admin.join(sub)).unwrap();
    }
    std::fs::write(admin.join("status"), "").unwrap();
    let dpkg = |args: &[&str], deb: Option<&Path>| {
        let mut c = Command::new("dpkg");
        c.arg(format!("--admindir={}", admin.display()))
            .arg(format!("--instdir={}", root.display()))
            .args([
                "--force-not-root",
                "--force-bad-path",
                "--force-depends",
                "--log=/dev/null",
            ])
            .args(args);
        if let Some(deb) = deb {
            c.arg(deb);
        }
        run(&mut c)
    };
    dpkg(&["-i"], Some(&debs[0])).success();
    // dpkg alone refuses the second while the first is installed (apt,
    // seeing Replaces on the virtual name, removes the first for it).
    let second = dpkg(&["-i"], Some(&debs[1]));
    assert_ne!(second.code, 0, "dpkg installed both:\n{}", second.stdout);
    assert!(
        second
            .stderr
            .contains("amdgpu-expert-sched-6.12-dkms provides amdgpu-patchkit-dkms")
            && second.stderr.contains("conflicting packages"),
        "{}",
        second.stderr
    );
    dpkg(&["-r", "amdgpu-expert-sched-6.12-dkms"], None).success();
    dpkg(&["-i"], Some(&debs[1])).success();
    let status = dpkg(&["-l"], None).stdout;
    let installed: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("ii "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(installed, ["amdgpu-expert-sched-6.14-dkms"], "{status}");
    assert!(!root
        .join("usr/src/amdgpu-expert-sched-6.12-6.12.63.1")
        .exists());
    assert!(root
        .join("usr/src/amdgpu-expert-sched-6.14-6.14.11.1/dkms.conf")
        .is_file());
}
