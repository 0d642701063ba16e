//! The DKMS source package built the way Debian's buildds build it: sbuild
//! (unshare mode) in the clean chroot `.ci/setup` keeps, which holds only
//! the buildd essentials, so a Build-Depends the templates forgot fails the
//! build. The build dependencies come, as on a buildd, from an apt
//! repository, but a local one: the `.debs` `.ci/setup` downloaded (the
//! closure of sbuild's core dependencies, our templates' Build-Depends and
//! `dkms`, resolved against the chroot's own packages), served on 127.0.0.1
//! as sbuild's extra repository while the chroot's own sources are removed
//! before sbuild's first `apt-get update`; every fetch in sbuild's log is
//! checked to be from 127.0.0.1. Its `.deb` holds our files, is
//! lintian-clean and installs in a fresh copy of the chroot whose one apt
//! source is the same local repository.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::support::chroot::{assert_fetched_only_locally, suite, tarball, Chroot, LocalArchive};
use crate::support::rebuild::assert_same_tree;
use crate::support::tools::{lintian, run};
use crate::support::{demo, have_tools, slow_tests_enabled};

const DSC: &str = "patchkit-hello_0.1.0-1.dsc";
const DEB: &str = "patchkit-hello-dkms_0.1.0-1_all.deb";

#[test]
fn sbuild_builds_the_dkms_source_package_in_a_clean_chroot() {
    if !slow_tests_enabled("sbuild in a clean chroot")
        || !have_tools(&["sbuild", "lintian", "unshare"])
    {
        return;
    }
    let Some(tarball) = tarball() else { return };
    let Some(archive) = LocalArchive::start() else {
        return;
    };
    let p = demo::demo_project();
    demo::build(&p, &["--formats", "deb"]).success();
    let dist = demo::dist(&p);
    let work = p.root().join("sbuild");
    std::fs::create_dir_all(&work).unwrap();
    for entry in std::fs::read_dir(dist.join("source")).unwrap().flatten() {
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), work.join(entry.file_name())).unwrap();
        }
    }
    let started = Instant::now();
    let built = run(Command::new("sbuild")
        .arg("--chroot-mode=unshare")
        .arg(format!("--chroot={}", tarball.display()))
        .arg(format!("--dist={}", suite()))
        .args([
            "--arch-all",
            "--no-run-lintian",
            "--no-run-piuparts",
            "--no-run-autopkgtest",
        ])
        .args(["--no-apt-upgrade", "--no-apt-distupgrade", "--nolog"])
        .arg(format!("--extra-repository={}", archive.source))
        // Run before sbuild writes its extra repository and updates.
        .arg("--chroot-setup-commands=rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*")
        .arg(DSC)
        .current_dir(&work)
        .env("LC_ALL", "C.UTF-8"));
    eprintln!(
        "sbuild of {DSC} in a clean {} chroot: {:.0} s",
        suite(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        built.code, 0,
        "sbuild failed (a Build-Depends missing?):\n{}{}",
        built.stdout, built.stderr
    );
    assert!(
        built.stdout.contains("Status: successful"),
        "{}",
        built.stdout
    );
    assert_fetched_only_locally(&built.stdout);
    let deb = work.join(DEB);
    assert!(deb.is_file(), "sbuild wrote no {DEB}:\n{}", built.stdout);

    // Our files, modes and bytes (the control members are dh's).
    let (ours, theirs) = (p.root().join("ours"), p.root().join("theirs"));
    for (pkg, dir) in [(dist.join(DEB), &ours), (deb.clone(), &theirs)] {
        run(Command::new("dpkg-deb").arg("-x").arg(&pkg).arg(dir)).success();
    }
    assert_same_tree(&ours, &theirs, &[]);
    lintian(&deb).assert_only(None, &[]);
    installs(&tarball, &archive, &deb);
}

/// `apt-get install` of the built package in a fresh copy of the chroot
/// (its dependencies from the local repository only): dpkg configures it
/// and DKMS knows the module.
fn installs(tarball: &Path, archive: &LocalArchive, deb: &Path) {
    let chroot = Chroot::unpack(tarball);
    chroot.local_only(archive);
    std::fs::copy(deb, chroot.path(&format!("tmp/{DEB}"))).unwrap();
    let said = chroot.ok(&format!(
        "apt-get update && apt-get install -y --no-install-recommends /tmp/{DEB}"
    ));
    assert_fetched_only_locally(&said);
    let status = chroot.ok("dpkg-query -W -f='${Status}' patchkit-hello-dkms && dkms status");
    assert!(status.starts_with("install ok installed"), "{status}");
    assert!(status.contains("patchkit-hello/0.1.0"), "{status}");
}
