//! A small DKMS-shaped module written by the test, its package metadata,
//! and one call that builds every artifact from it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use xtask::formats::{self, names, tar::Names, Artifact, FileTree, PackageMeta};

pub(crate) const MODULE: &str = "patchkit-pkgtest";
pub(crate) const VERSION: &str = "0.1.0";
pub(crate) const EPOCH: u64 = 1_735_787_045;

/// The module's files: (relative path, text, executable).
pub(crate) fn files() -> Vec<(&'static str, String, bool)> {
    vec![
        (
            "dkms.conf",
            format!(
                "PACKAGE_NAME=\"{MODULE}\"\nPACKAGE_VERSION=\"{VERSION}\"\nBUILT_MODULE_NAME[0]=\"patchkit_hello\"\n\
                 DEST_MODULE_LOCATION[0]=\"/updates/dkms\"\nAUTOINSTALL=\"yes\"\n\
                 MAKE[0]=\"make -C ${{kernel_source_dir}} M=${{dkms_tree}}/${{PACKAGE_NAME}}/${{PACKAGE_VERSION}}/build modules\"\n\
                 CLEAN=\"true\"\n"
            ),
            false,
        ),
        ("Kbuild", "obj-m += patchkit_hello.o\n".into(), false),
        (
            "Makefile",
            "KDIR ?= /lib/modules/$(shell uname -r)/build\n\nall:\n\t$(MAKE) -C $(KDIR) M=$(CURDIR) modules\n".into(),
            false,
        ),
        (
            "patchkit_hello.c",
            "// SPDX-License-Identifier: GPL-2.0-only\n#include <linux/module.h>\n\n\
             static int __init hello_init(void) { pr_info(\"patchkit hello\\n\"); return 0; }\n\
             static void __exit hello_exit(void) { }\nmodule_init(hello_init);\nmodule_exit(hello_exit);\n\
             MODULE_LICENSE(\"GPL\");\n"
                .into(),
            false,
        ),
        (
            "scripts/check-headers.sh",
            "#!/bin/sh\nset -e\ntest -d \"$1\"\n".into(),
            true,
        ),
        (
            "amd/display/dc/dml2/dml21/src/dml2_core/a_rather_long_file_name_to_need_gnu_long_names_in_tar.h",
            "#define PATCHKIT_LONG 1\n".into(),
            false,
        ),
    ]
}

/// Writes the module below `root`. `odd` writes it the other way round:
/// reverse order, files 0600 / executables 0700 / dirs 0700, as a
/// restrictive umask would leave them.
pub(crate) fn write_module(root: &Path, odd: bool) {
    let mut files = files();
    if odd {
        files.reverse();
    }
    for (rel, text, exec) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let mode = match (odd, exec) {
            (false, false) => 0o644,
            (false, true) => 0o755,
            (true, false) => 0o600,
            (true, true) => 0o700,
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    if odd {
        for dir in ["scripts", "amd", "amd/display"] {
            std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(0o700))
                .unwrap();
        }
    }
}

pub(crate) fn meta() -> PackageMeta {
    PackageMeta {
        name: names::dkms_package(MODULE),
        source: None,
        about: xtask::formats::About {
            version: VERSION.into(),
            release: "1".into(),
            summary: "Patchkit test module for DKMS".into(),
            description: "A tiny kernel module used to test the package writers.\n\n\
                                  Text with \"quotes\", $(command substitution), `backticks` and 'single quotes'\n\
                                  must come through as plain text in every format."
                        .into(),
            license: "GPL-2.0-only".into(),
            homepage: Some("https://example.org/rocm-patchkit".into()),
            maintainer: "Patchkit Maintainers <patchkit@example.org>".into(),
        },
        depends: vec!["dkms".into()],
        changes: vec!["Initial package of the test module.".into()],
        copyright: vec!["2025 The rocm-patchkit authors".into()],
        relations: Default::default(),
    }
}

/// Every artifact from the module in `staging`, written to `out`:
/// deb, rpm, Arch, DKMS tarball, plain source tarball.
pub(crate) fn build_all(staging: &Path, out: &Path) -> Vec<Artifact> {
    let meta = meta();
    let src_dir = names::dkms_source_dir(MODULE, VERSION);
    let tree = FileTree::from_dir(staging, &src_dir).unwrap();
    let source = FileTree::from_dir(staging, "").unwrap();
    let write = |format, scripts: &formats::Scripts, pkgbuild: Option<&[u8]>| {
        let pkg = formats::Package {
            meta: &meta,
            machine: formats::Architecture::Any,
            tree: &tree,
            scripts,
            pkgbuild,
            epoch: EPOCH,
        };
        formats::write(format, &pkg, out, &Default::default()).unwrap()
    };
    vec![
        write(formats::Format::Deb, &scripts(formats::Format::Deb), None),
        write(formats::Format::Rpm, &scripts(formats::Format::Rpm), None),
        write(
            formats::Format::Arch,
            &formats::Scripts::default(),
            Some(b"pkgname=x\n"),
        ),
        formats::tarball::write_dkms(&source, MODULE, VERSION, EPOCH, out, &Default::default())
            .unwrap(),
        formats::tarball::write_tar_gz(
            &source.nested(&format!("{MODULE}-{VERSION}")).unwrap(),
            Names::Plain,
            EPOCH,
            out,
            &format!("{MODULE}-{VERSION}.tar.gz"),
            &Default::default(),
        )
        .unwrap(),
    ]
}

/// A fresh staging dir with the module and an output dir.
pub(crate) fn build_fresh() -> (tempfile::TempDir, Vec<Artifact>) {
    let dir = tempfile::Builder::new()
        .prefix("patchkit-pkg-")
        .tempdir()
        .unwrap();
    let staging = dir.path().join("staging");
    write_module(&staging, false);
    let artifacts = build_all(&staging, &dir.path().join("out"));
    (dir, artifacts)
}

pub(crate) fn path_of(artifacts: &[Artifact], suffix: &str) -> PathBuf {
    artifacts
        .iter()
        .find(|a| a.path.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no artifact ending in {suffix}"))
        .path
        .clone()
}

/// The maintainer scripts as build-dkms makes them: rendered from the
/// repository's `templates/scripts/`.
pub(crate) fn scripts(format: formats::Format) -> formats::Scripts {
    let mut all = xtask::release::packaging::dkms_files::dkms_scripts(
        &crate::support::repo_root().join("templates"),
        MODULE,
        VERSION,
    )
    .unwrap();
    all.remove(&format).unwrap()
}
