//! The DKMS source package built the way Debian's buildds build it: sbuild
//! (unshare mode) in the clean chroot `.ci/setup` keeps, which holds only
//! the buildd essentials, so a Build-Depends the templates forgot fails the
//! build. The build dependencies come from the Debian archive of this
//! machine's apt sources, as on a buildd: this test (slow-gated) reaches the
//! archive. Its `.deb` holds our files, is lintian-clean and installs in a
//! fresh copy of the chroot (with `dkms` from the archive).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::support::chroot::{suite, tarball, Chroot};
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
    let deb = work.join(DEB);
    assert!(deb.is_file(), "sbuild wrote no {DEB}:\n{}", built.stdout);

    // Our files, modes and bytes (the control members are dh's).
    let (ours, theirs) = (p.root().join("ours"), p.root().join("theirs"));
    for (pkg, dir) in [(dist.join(DEB), &ours), (deb.clone(), &theirs)] {
        run(Command::new("dpkg-deb").arg("-x").arg(&pkg).arg(dir)).success();
    }
    assert_same_tree(&ours, &theirs, &[]);
    lintian(&deb).assert_only(None, &[]);
    installs(&tarball, &deb);
}

/// `apt-get install` of the built package in a fresh copy of the chroot
/// (its dependencies from the archive): dpkg configures it and DKMS knows
/// the module.
fn installs(tarball: &Path, deb: &Path) {
    let chroot = Chroot::unpack(tarball);
    std::fs::copy(deb, chroot.path(&format!("tmp/{DEB}"))).unwrap();
    chroot.ok(&format!(
        "apt-get update -q && apt-get install -y -q --no-install-recommends /tmp/{DEB}"
    ));
    let status = chroot.ok("dpkg-query -W -f='${Status}' patchkit-hello-dkms && dkms status");
    assert!(status.starts_with("install ok installed"), "{status}");
    assert!(status.contains("patchkit-hello/0.1.0"), "{status}");
}
