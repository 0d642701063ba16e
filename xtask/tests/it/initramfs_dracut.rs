//! The dracut branch of the packages' initramfs snippet, for real (root
//! only): a module kbuild compiles for the installed 6.12 kernel goes into
//! `/lib/modules/<kver>/updates/`, listed for dracut in
//! `/etc/dracut.conf.d/`, and the snippet the .rpm `%post` carries runs with
//! update-initramfs hidden from PATH, so Debian's real dracut rebuilds the
//! image and `lsinitrd` finds the module in it. On Debian dracut writes the
//! image the snippet names, `/boot/initrd.img-<kver>` (the one
//! update-initramfs makes), since dracut's own `/boot/initramfs-<kver>.img`
//! is not there. The image, the modules index and the config are put back
//! afterwards, the image byte for byte.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::scripts::rendered;
use crate::support::tools::run;
use crate::support::{ci, have_tool, is_root, system_lock};

const MODULE: &str = "patchkit_dracut";
const CONF: &str = "/etc/dracut.conf.d/zz-rocm-patchkit-test.conf";

/// A module of our own, compiled by kbuild against `kernel`'s headers.
fn compile_module(dir: &Path, kernel: &str) -> PathBuf {
    std::fs::write(
        dir.join(format!("{MODULE}.c")),
        "// SPDX-License-Identifier: GPL-2.0\n\
         #include <linux/module.h>\n\
         static int __init patchkit_dracut_init(void) { return 0; }\n\
         static void __exit patchkit_dracut_exit(void) { }\n\
         module_init(patchkit_dracut_init);\n\
         module_exit(patchkit_dracut_exit);\n\
         MODULE_LICENSE(\"GPL\");\n\
         MODULE_DESCRIPTION(\"rocm-patchkit test: a module dracut must carry\");\n",
    )
    .unwrap();
    std::fs::write(dir.join("Kbuild"), format!("obj-m := {MODULE}.o\n")).unwrap();
    run(Command::new("make")
        .arg("-C")
        .arg(Path::new("/lib/modules").join(kernel).join("build"))
        .arg(format!("M={}", dir.display()))
        .arg("modules"))
    .success();
    dir.join(format!("{MODULE}.ko"))
}

/// A folder of symlinks to every command on `path` but update-initramfs.
fn path_without_update_initramfs(dir: &Path, path: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for folder in std::env::split_paths(path) {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let link = bin.join(&name);
            if name == "update-initramfs" || link.symlink_metadata().is_ok() {
                continue;
            }
            std::os::unix::fs::symlink(entry.path(), &link).unwrap();
        }
    }
    assert!(bin.join("dracut").exists() && !bin.join("update-initramfs").exists());
    bin
}

/// Puts the machine back on drop: the image from `backup` (bytes and
/// mode), the module out, the kernel's `modules.*` index files as they
/// were, the test's dracut config gone.
struct Restore {
    image: PathBuf,
    backup: PathBuf,
    installed: PathBuf,
    /// `updates/`, when the test made it.
    made: Option<PathBuf>,
    index: Vec<(PathBuf, Vec<u8>)>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::copy(&self.backup, &self.image);
        let _ = std::fs::remove_file(&self.installed);
        if let Some(made) = &self.made {
            let _ = std::fs::remove_dir(made);
        }
        let _ = std::fs::remove_file(CONF);
        for (path, bytes) in &self.index {
            let _ = std::fs::write(path, bytes);
        }
    }
}

/// The `modules.*` files of `kernel` (depmod's index), with their bytes.
fn module_index(kernel: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new("/lib/modules").join(kernel);
    let mut index: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("modules."))
        })
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    index.sort();
    index
}

fn lsinitrd(image: &Path) -> String {
    run(Command::new("lsinitrd").arg(image))
        .success()
        .stdout
        .clone()
}

#[test]
fn the_rpm_post_dracut_branch_runs_real_dracut_and_the_image_carries_the_module() {
    if !is_root() {
        assert!(!ci(), "CI must run the dracut test as root");
        return;
    }
    let tools = ["dracut", "lsinitrd", "depmod", "make", "gcc"];
    if !tools.iter().all(|t| have_tool(t)) {
        assert!(
            !ci(),
            "CI must have {tools:?} (.ci/setup installs dracut-core)"
        );
        return;
    }
    let Some(kernel) = crate::support::kernels::debian_612_headers() else {
        assert!(!ci(), "CI must install the 6.12 headers and image");
        return;
    };
    let image = PathBuf::from(format!("/boot/initrd.img-{kernel}"));
    if !image.is_file() {
        assert!(!ci(), "CI must have the initramfs of {kernel}");
        return;
    }
    let _system = system_lock();
    let dracut_name = PathBuf::from(format!("/boot/initramfs-{kernel}.img"));
    assert!(!dracut_name.exists(), "{} is there", dracut_name.display());
    assert!(
        !Path::new(CONF).exists(),
        "{CONF} is there: not ours to replace"
    );

    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("initrd.img");
    std::fs::copy(&image, &backup).unwrap();
    let before = xtask::shared::hash::sha256_file(&image).unwrap();
    let build = dir.path().join("module");
    std::fs::create_dir_all(&build).unwrap();
    let ko = compile_module(&build, &kernel);
    let installed = Path::new("/lib/modules")
        .join(&kernel)
        .join(format!("updates/{MODULE}.ko"));
    let updates = installed.parent().unwrap();
    let restore = Restore {
        image: image.clone(),
        backup,
        installed: installed.clone(),
        made: (!updates.exists()).then(|| updates.to_path_buf()),
        index: module_index(&kernel),
    };
    std::fs::create_dir_all(updates).unwrap();
    std::fs::copy(&ko, &installed).unwrap();
    run(Command::new("depmod").arg(&kernel)).success();
    std::fs::write(CONF, format!("add_drivers+=\" {MODULE} \"\n")).unwrap();
    let carried = format!("/lib/modules/{kernel}/updates/{MODULE}.ko");
    assert!(
        !lsinitrd(&image).lines().any(|l| l.ends_with(&carried)),
        "{} carries {MODULE} before dracut ran",
        image.display()
    );

    // The snippet the .rpm %post sources, run as %post runs it for a kernel.
    let snippet = rendered("scripts/initramfs");
    assert!(rendered("scripts/rpm-post").contains(&snippet));
    let bin = path_without_update_initramfs(dir.path(), &std::env::var("PATH").unwrap());
    let run = run(Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{snippet}\npatchkit_initramfs '{kernel}' '{MODULE}'"
        ))
        .env("PATH", &bin));
    run.success();
    assert!(
        run.stdout
            .contains(&format!("regenerating {} with dracut", image.display())),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        !run.stderr.contains("dracut failed"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        !dracut_name.exists(),
        "dracut wrote {}",
        dracut_name.display()
    );
    let listing = lsinitrd(&image);
    assert!(
        listing.lines().any(|l| l.ends_with(&carried)),
        "{} lacks {carried} after dracut; lsinitrd says:\n{listing}\ndracut said:\n{}",
        image.display(),
        run.stderr
    );
    assert_ne!(xtask::shared::hash::sha256_file(&image).unwrap(), before);

    let restore_index = restore.index.clone();
    let made_updates = restore.made.clone();
    drop(restore);
    assert_eq!(xtask::shared::hash::sha256_file(&image).unwrap(), before);
    assert!(!installed.exists());
    assert_eq!(updates.exists(), made_updates.is_none());
    assert!(!Path::new(CONF).exists());
    assert!(
        module_index(&kernel) == restore_index,
        "the modules.* index differs"
    );
}
