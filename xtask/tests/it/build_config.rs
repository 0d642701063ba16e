//! `cargo xtask build-config` on the real `amdgpu-cwsr-off` stop-gap: the
//! modprobe.d file marked as configuration in each format as its tools
//! read it (dpkg-deb, lintian, rpm, bsdtar, pacman), a reproducible no-op
//! re-run, refusals, and `dpkg -i` / `dpkg --purge` for real as root.

use std::path::Path;
use std::process::Command;

use crate::support::cwsr_off::{build, dist, project, the_conf};
use crate::support::demo::EPOCH;
use crate::support::tools::{self, stdout};
use crate::support::{have_tool, is_root, system_lock};

const DEB: &str = "amdgpu-cwsr-off_1.0-1_all.deb";
const RPM: &str = "amdgpu-cwsr-off-1.0-1.noarch.rpm";
const ARCH: &str = "amdgpu-cwsr-off-1.0-1-any.pkg.tar.zst";
const CONF: &str = "/etc/modprobe.d/amdgpu-cwsr-off.conf";

#[test]
fn the_conf_file_says_the_option_and_its_cost() {
    let conf = the_conf();
    assert!(conf.lines().any(|l| l == "options amdgpu cwsr_enable=0"));
    for needle in ["preempted", "debugger", "update-initramfs -u", "dracut -f"] {
        assert!(conf.contains(needle), "{needle} in\n{conf}");
    }
}

#[test]
fn every_package_marks_the_modprobe_file_as_configuration() {
    let p = project();
    build(&p, &[])
        .success()
        .stdout_has("published dist/amdgpu-cwsr-off");
    let dir = dist(&p);
    let plan: serde_json::Value = serde_json::from_str(
        &p.xtask(&["plan", "amdgpu-cwsr-off", "--json"])
            .success()
            .stdout,
    )
    .unwrap();
    for name in plan["outputs"].as_array().unwrap() {
        assert!(
            dir.join(name.as_str().unwrap()).is_file(),
            "plan promised {name}"
        );
    }
    p.xtask(&["verify", "dist/amdgpu-cwsr-off"])
        .success()
        .stdout_has("exactly as published");

    if have_tool("dpkg-deb") {
        let deb = dir.join(DEB);
        let info = tools::deb_info(&deb);
        for needle in [
            "Package: amdgpu-cwsr-off",
            "Architecture: all",
            "conffiles",
            "no preemption of compute waves",
            "no GPU debugger",
            "update-initramfs -u",
        ] {
            assert!(info.contains(needle), "{needle} in\n{info}");
        }
        assert!(!info.contains("postinst"), "no maintainer scripts:\n{info}");
        let conffiles = stdout(
            Command::new("dpkg-deb")
                .arg("-I")
                .arg(&deb)
                .arg("conffiles"),
        );
        assert_eq!(conffiles, format!("{CONF}\n"));
        let contents = stdout(Command::new("dpkg-deb").arg("-c").arg(&deb));
        assert!(contents.contains(&format!(".{CONF}")), "{contents}");
    }
    if have_tool("lintian") {
        tools::lintian(&dir.join(DEB));
    }
    if have_tool("rpm") {
        let rpm = dir.join(RPM);
        let configs = stdout(Command::new("rpm").args(["-qp", "--configfiles"]).arg(&rpm));
        assert_eq!(configs, format!("{CONF}\n"));
        let flags = stdout(
            Command::new("rpm")
                .args(["-qp", "--qf", "[%{FILEFLAGS:fflags} %{FILENAMES}\n]"])
                .arg(&rpm),
        );
        assert_eq!(flags, format!("cn {CONF}\n"), "%config(noreplace)");
        let listing = stdout(Command::new("rpm").arg("-qlvp").arg(&rpm));
        assert!(
            listing.contains("-rw-r--r--") && listing.contains(CONF),
            "{listing}"
        );
        let info = stdout(Command::new("rpm").arg("-qip").arg(&rpm));
        assert!(
            info.contains("Architecture: noarch") && info.contains("no GPU debugger"),
            "{info}"
        );
        let check = stdout(Command::new("rpm").args(["-K", "--nosignature"]).arg(&rpm));
        assert!(check.contains("digests OK"), "{check}");
    }
    if have_tool("bsdtar") {
        let pkginfo = stdout(
            Command::new("bsdtar")
                .args(["-xOf"])
                .arg(dir.join(ARCH))
                .arg(".PKGINFO"),
        );
        assert!(
            pkginfo
                .lines()
                .any(|l| l == "backup = etc/modprobe.d/amdgpu-cwsr-off.conf"),
            "{pkginfo}"
        );
        assert!(pkginfo.contains("arch = any\n"), "{pkginfo}");
        let conf = stdout(
            Command::new("bsdtar")
                .args(["-xOf"])
                .arg(dir.join(ARCH))
                .arg("etc/modprobe.d/amdgpu-cwsr-off.conf"),
        );
        assert_eq!(conf, the_conf());
    }
    if have_tool("pacman") {
        let info = tools::pacman_info(&dir.join(ARCH));
        assert!(
            info.contains("amdgpu-cwsr-off") && info.contains("1.0-1"),
            "{info}"
        );
        let files = stdout(Command::new("pacman").arg("-Qlp").arg(dir.join(ARCH)));
        assert!(files.contains(CONF), "{files}");
    }
}

#[test]
fn a_rerun_is_a_no_op_and_another_checkout_builds_the_same_bytes() {
    let first = project();
    build(&first, &[]).success();
    build(&first, &[])
        .success()
        .stdout_has("dist/amdgpu-cwsr-off is up to date: nothing to do");
    let second = project();
    build(&second, &[]).success();
    let (a, b) = (
        crate::support::snapshot(&dist(&first)),
        crate::support::snapshot(&dist(&second)),
    );
    assert_eq!(a.len(), b.len());
    for ((name, x), (other, y)) in a.iter().zip(&b) {
        assert_eq!(name, other);
        assert!(x == y, "{name} differs between the two builds");
    }
}

#[test]
fn formats_limit_the_packages_and_tar_is_refused() {
    let p = project();
    build(&p, &["--formats", "rpm"]).success();
    assert!(dist(&p).join(RPM).is_file());
    assert!(!dist(&p).join(DEB).exists());
    build(&p, &["--formats", "tar"])
        .fails_with(2)
        .stderr_has("is not one of deb, rpm, arch");
}

#[test]
fn the_build_command_must_match_the_kind() {
    let p = project();
    p.copy_from_repo(&["recipes/demo-hello.toml", "patches/demo-hello"]);
    p.xtask_with(
        &["build-config", "demo-hello"],
        &[("SOURCE_DATE_EPOCH", EPOCH)],
    )
    .fails_with(2)
    .stderr_has("build it with `cargo xtask build-dkms`");
    p.xtask_with(
        &[
            "build-dkms",
            "amdgpu-cwsr-off",
            "--kernel",
            "6.12.117+deb12-amd64",
        ],
        &[("SOURCE_DATE_EPOCH", EPOCH)],
    )
    .fails_with(2)
    .stderr_has("build it with `cargo xtask build-config`");
}

#[test]
fn a_destination_outside_the_configuration_folders_is_refused_with_its_place() {
    let p = project();
    let text = std::fs::read_to_string(p.root().join("recipes/amdgpu-cwsr-off.toml")).unwrap();
    let text = text.replace(
        "dest = \"/etc/modprobe.d/amdgpu-cwsr-off.conf\"",
        "dest = \"/usr/bin/amdgpu-cwsr-off\"",
    ) + "\n[dkms]\ntree = \".\"\n";
    p.recipe("amdgpu-cwsr-off", &text);
    let run = p.xtask(&["plan", "amdgpu-cwsr-off"]);
    run.fails_with(2)
        .stderr_has("`config.files[0].dest`: `/usr/bin/amdgpu-cwsr-off` must be an absolute file path below `/etc` or `/usr/lib/modprobe.d`")
        .stderr_has("`[dkms]` applies to `kind = \"dkms\"` recipes only");
    let line = text
        .lines()
        .position(|l| l.contains("/usr/bin/amdgpu-cwsr-off"))
        .unwrap()
        + 1;
    run.stderr_has(&format!("amdgpu-cwsr-off.toml:{line}:"));
}

/// `dpkg <args>`, waiting while another process (another test binary on a
/// shared machine, an apt run) holds dpkg's lock.
fn dpkg(args: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    loop {
        let out = Command::new("dpkg").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return;
        }
        assert!(
            stderr.contains("lock") && std::time::Instant::now() < deadline,
            "dpkg {args:?}: {stderr}"
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// Purges the package when the test ends, however it ends.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = Command::new("dpkg")
            .args(["--purge", "amdgpu-cwsr-off"])
            .output();
    }
}

#[test]
fn the_deb_installs_the_modprobe_file_and_purge_removes_it() {
    if !is_root() {
        assert!(
            !crate::support::ci(),
            "CI must run the install tests as root"
        );
        eprintln!("skipping: dpkg -i needs root");
        return;
    }
    if !have_tool("dpkg") {
        return;
    }
    let p = project();
    build(&p, &["--formats", "deb"]).success();
    let _lock = system_lock();
    let installed_before = Command::new("dpkg-query")
        .args(["-W", "amdgpu-cwsr-off"])
        .output()
        .is_ok_and(|o| o.status.success());
    if Path::new(CONF).exists() && !installed_before {
        panic!("{CONF} exists and belongs to no package of ours: refusing to touch it");
    }
    let _purge = Purge;
    dpkg(&["-i", &dist(&p).join(DEB).display().to_string()]);
    assert_eq!(std::fs::read_to_string(CONF).unwrap(), the_conf());
    let conffiles =
        stdout(Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "amdgpu-cwsr-off"]));
    assert!(conffiles.contains(CONF), "{conffiles}");
    dpkg(&["--purge", "amdgpu-cwsr-off"]);
    assert!(!Path::new(CONF).exists(), "purge left {CONF}");
}
