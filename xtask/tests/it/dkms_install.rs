//! The demo packages installed for real: `dpkg -i`, DKMS builds the module
//! for the Debian headers' kernel (named with `-k`, never `uname -r`),
//! `modinfo` shows our version, purge removes it; `dkms ldtarball` loads
//! the DKMS tarball. Needs root; CI runs it.

use std::path::Path;
use std::process::Command;

use crate::support::demo::{build, demo_project, dist};
use crate::support::dkms::{built_module, install_for};
use crate::support::tools::run;
use crate::support::{have_tool, is_root, system_lock};

/// The newest kernel release with headers, as build-dkms picks it.
fn headers_kernel() -> Option<String> {
    xtask::input::target::pick_kernel(None, Path::new("/lib/modules"))
        .ok()
        .filter(|k| Path::new("/lib/modules").join(k).join("build").is_dir())
}

fn can_change_the_system() -> bool {
    if !is_root() {
        assert!(
            !crate::support::ci(),
            "CI must run the dkms install tests as root"
        );
        eprintln!("skipping: changing the system needs root");
        return false;
    }
    ["dpkg", "dkms", "modinfo"].iter().all(|t| have_tool(t))
}

/// Purges the package and whatever DKMS holds of it, even when a test fails.
struct Cleanup(&'static str, &'static str, &'static str);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", self.0]).output();
        let _ = Command::new("dkms")
            .args(["remove", "-m", self.1, "-v", self.2, "--all"])
            .output();
        let _ =
            std::fs::remove_dir_all(Path::new("/usr/src").join(format!("{}-{}", self.1, self.2)));
    }
}

#[test]
fn the_demo_deb_installs_builds_for_the_headers_kernel_and_purges() {
    if !can_change_the_system() {
        return;
    }
    let Some(kernel) = headers_kernel() else {
        assert!(!crate::support::ci(), "CI must install kernel headers");
        return;
    };
    let _system = system_lock();
    let p = demo_project();
    build(&p, &["--formats", "deb"]).success();
    let _cleanup = Cleanup("patchkit-hello-dkms", "patchkit-hello", "0.1.0");
    run(Command::new("dpkg")
        .arg("-i")
        .arg(dist(&p).join("patchkit-hello-dkms_0.1.0-1_all.deb")))
    .success();
    assert!(Path::new("/usr/src/patchkit-hello-0.1.0/dkms.conf").is_file());
    let status = install_for("patchkit-hello", "0.1.0", &kernel);
    assert!(
        status.contains(&format!("patchkit-hello/0.1.0, {kernel}")) && status.contains("installed"),
        "{status}"
    );
    let module = built_module(&kernel, "patchkit_hello");
    let version = run(Command::new("modinfo").args(["-F", "version"]).arg(&module));
    assert_eq!(version.success().stdout.trim(), "0.1.0-patchkit");
    run(Command::new("dpkg").args(["--purge", "patchkit-hello-dkms"])).success();
    let after = run(Command::new("dkms").args(["status", "-m", "patchkit-hello"])).stdout;
    assert!(
        after.trim().is_empty(),
        "dkms still knows the module after purge: {after}"
    );
    assert!(!Path::new("/usr/src/patchkit-hello-0.1.0").exists());
    assert!(!module.exists(), "{} left behind", module.display());
}

#[test]
fn dkms_ldtarball_loads_the_demo_tarball() {
    if !can_change_the_system() {
        return;
    }
    let _system = system_lock();
    let p = demo_project();
    build(&p, &["--formats", "tar"]).success();
    let _cleanup = Cleanup("patchkit-hello-dkms", "patchkit-hello", "0.1.0");
    run(Command::new("dkms")
        .arg("ldtarball")
        .arg(dist(&p).join("patchkit-hello-0.1.0-source-only.dkms.tar.gz")))
    .success();
    let status =
        run(Command::new("dkms").args(["status", "-m", "patchkit-hello", "-v", "0.1.0"])).stdout;
    assert!(
        status.contains("patchkit-hello/0.1.0") && status.contains("added"),
        "{status}"
    );
    assert!(Path::new("/usr/src/patchkit-hello-0.1.0/patchkit_hello.c").is_file());
}
