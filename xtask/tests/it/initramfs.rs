//! The initramfs follows the module: with the module listed in
//! `/etc/initramfs-tools/modules` (as early-KMS setups list amdgpu), `dpkg -i`
//! of the demo .deb leaves `lsinitramfs` showing the DKMS build, and purge
//! takes it out again (for real, root only). The dracut and mkinitcpio
//! paths of the scripts run with those tools replaced by recorders on PATH
//! (`initramfs_dracut.rs` runs the real dracut).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::demo::{build, demo_project, dist};
use crate::support::dkms::install_for;
use crate::support::initramfs::{lsinitramfs, put_back_modules, MODULES};
use crate::support::scripts::rendered;
use crate::support::tools::run;
use crate::support::{ci, have_tool, is_root, system_lock, Run};

/// Puts /etc/initramfs-tools/modules back, purges the demo and rebuilds
/// the initramfs, even when the test fails.
struct Restore {
    modules: Option<String>,
    kernel: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = Command::new("dpkg")
            .args(["--purge", "patchkit-hello-dkms"])
            .output();
        let _ = Command::new("dkms")
            .args(["remove", "-m", "patchkit-hello", "-v", "0.1.0", "--all"])
            .output();
        put_back_modules(&self.modules, &self.kernel);
    }
}

#[test]
fn dpkg_i_puts_the_dkms_module_into_the_initramfs_and_purge_takes_it_out() {
    if !is_root() {
        assert!(!ci(), "CI must run the initramfs test as root");
        return;
    }
    let tools = ["dpkg", "dkms", "update-initramfs", "lsinitramfs"];
    if !tools.iter().all(|t| have_tool(t)) {
        assert!(!ci(), "CI must have {tools:?}");
        return;
    }
    let Some(kernel) = crate::support::kernels::debian_612_headers() else {
        assert!(!ci(), "CI must install the 6.12 headers and image");
        return;
    };
    if !Path::new(&format!("/boot/initrd.img-{kernel}")).is_file() {
        assert!(!ci(), "CI must have the initramfs of {kernel}");
        return;
    }
    let _system = system_lock();
    let p = demo_project();
    build(&p, &["--formats", "deb"]).success();
    let before = std::fs::read_to_string(MODULES).ok();
    let _restore = Restore {
        modules: before.clone(),
        kernel: kernel.clone(),
    };
    let mut listed = before.unwrap_or_default();
    listed.push_str("patchkit_hello\n");
    std::fs::write(MODULES, listed).unwrap();

    let deb = dist(&p).join("patchkit-hello-dkms_0.1.0-1_all.deb");
    let install = run(Command::new("dpkg").arg("-i").arg(&deb));
    install.success();
    let status = install_for("patchkit-hello", "0.1.0", &kernel);
    assert!(status.contains("installed"), "{status}");
    if !install.stdout.contains(&format!("initrd.img-{kernel}")) {
        // The postinst built for other kernels only (the running one and
        // the newest): configure again now that DKMS has this one.
        run(Command::new("dpkg-reconfigure").arg("patchkit-hello-dkms")).success();
    }
    let listing = lsinitramfs(&kernel);
    let ours = format!("lib/modules/{kernel}/updates/dkms/patchkit_hello.ko");
    assert!(
        listing.lines().any(|l| l.contains(&ours)),
        "the initramfs of {kernel} lacks {ours}; dpkg said:\n{}\n{}",
        install.stdout,
        install.stderr
    );

    let purge = run(Command::new("dpkg").args(["--purge", "patchkit-hello-dkms"]));
    purge.success();
    assert!(
        purge.stdout.contains("regenerating"),
        "{}\n{}",
        purge.stdout,
        purge.stderr
    );
    let listing = lsinitramfs(&kernel);
    assert!(
        !listing.lines().any(|l| l.contains("patchkit_hello.ko")),
        "purge left the module in the initramfs of {kernel}"
    );
}

/// A folder with recorders named `tools`: each appends its name and
/// arguments to `calls` and prints `listing` (the image's files) when it is
/// a lister; `fail` makes the regenerators exit 1.
fn recorders(dir: &Path, tools: &[&str], listing: &str, fail: bool) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = dir.join("calls");
    for tool in tools {
        let lister = tool.starts_with("ls");
        let body = format!(
            "#!/bin/sh\necho \"{tool} $*\" >> '{}'\n{}\n",
            calls.display(),
            if lister {
                format!("printf '%s\\n' '{listing}'")
            } else if fail {
                "exit 1".to_owned()
            } else {
                "exit 0".to_owned()
            }
        );
        let path = bin.join(tool);
        std::fs::write(&path, body).unwrap();
        run(Command::new("chmod").arg("755").arg(&path));
    }
    bin
}

/// Runs `body` after sourcing `script` in `sh`, with only `bin` on PATH.
fn run_with(script: &str, bin: &Path, body: &str) -> Run {
    let shell = which("sh");
    run(Command::new(shell)
        .arg("-c")
        .arg(format!("{script}\n{body}"))
        .env("PATH", bin))
}

fn which(tool: &str) -> PathBuf {
    PathBuf::from(
        run(Command::new("sh").args(["-c", &format!("command -v {tool}")]))
            .stdout
            .trim(),
    )
}

/// An image file that exists for the dracut path: any kernel's initrd
/// under /boot (dracut's own name is tried first, then Debian's).
fn a_boot_image() -> Option<String> {
    std::fs::read_dir("/boot")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find_map(|n| n.strip_prefix("initrd.img-").map(str::to_owned))
}

#[test]
fn the_dracut_path_regenerates_only_an_image_that_carries_the_module() {
    let Some(kernel) = a_boot_image() else {
        assert!(!ci(), "CI must have a kernel's initramfs under /boot");
        return;
    };
    let snippet = rendered("scripts/initramfs");
    let dir = tempfile::tempdir().unwrap();
    let image = format!("/boot/initrd.img-{kernel}");
    let carried = format!("usr/lib/modules/{kernel}/updates/dkms/amdgpu.ko.xz");
    let bin = recorders(dir.path(), &["dracut", "lsinitrd"], &carried, false);
    let run = run_with(
        &snippet,
        &bin,
        &format!("patchkit_initramfs '{kernel}' 'amdgpu'"),
    );
    run.success();
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            format!("lsinitrd {image}"),
            format!("dracut -f --kver {kernel} {image}")
        ],
        "{}",
        run.stdout
    );

    let other = tempfile::tempdir().unwrap();
    let bin = recorders(
        other.path(),
        &["dracut", "lsinitrd"],
        "usr/lib/modules/x/kernel/fs/ext4.ko",
        false,
    );
    run_with(
        &snippet,
        &bin,
        &format!("patchkit_initramfs '{kernel}' 'amdgpu'"),
    )
    .success();
    let calls = std::fs::read_to_string(other.path().join("calls")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [format!("lsinitrd {image}")]
    );

    // A failing dracut is said, and the scriptlet goes on.
    let failing = tempfile::tempdir().unwrap();
    let bin = recorders(failing.path(), &["dracut", "lsinitrd"], &carried, true);
    let run = run_with(
        &snippet,
        &bin,
        &format!("set -e; patchkit_initramfs '{kernel}' 'amdgpu'; echo went-on"),
    );
    run.success();
    assert!(run.stdout.contains("went-on"), "{}", run.stdout);
    assert!(run.stderr.contains("dracut failed for"), "{}", run.stderr);

    // No tool at all: a message, nothing else.
    let empty = tempfile::tempdir().unwrap();
    let run = run_with(
        &snippet,
        empty.path(),
        &format!("patchkit_initramfs '{kernel}' 'amdgpu'"),
    );
    run.success();
    assert!(
        run.stderr.contains("neither update-initramfs nor dracut"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_arch_install_script_runs_mkinitcpio_after_building() {
    let script = rendered("scripts/arch-install");
    let dir = tempfile::tempdir().unwrap();
    let bin = recorders(dir.path(), &["mkinitcpio", "dkms"], "", false);
    // post_remove: the dkms hook removed the module; the image follows.
    run_with(&script, &bin, "post_remove").success();
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert_eq!(calls.lines().collect::<Vec<_>>(), ["mkinitcpio -P"]);
    // post_upgrade builds for the kernels with headers, then regenerates.
    std::fs::remove_file(dir.path().join("calls")).unwrap();
    run_with(&script, &bin, "post_upgrade").success();
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"dkms add -m amdgpu-debian -v 6.12.0.1")
    );
    assert_eq!(lines.last(), Some(&"mkinitcpio -P"));
    // A failing mkinitcpio is said and does not fail pacman.
    let failing = tempfile::tempdir().unwrap();
    let bin = recorders(failing.path(), &["mkinitcpio"], "", true);
    let run = run_with(&script, &bin, "post_remove");
    run.success();
    assert!(
        run.stderr.contains("mkinitcpio -P failed"),
        "{}",
        run.stderr
    );
}
