//! The Arch Linux format (`arch`): `.pkg.tar.zst` packages written by
//! [`super::arch`], the `.src.tar.gz` that `makepkg --source` makes, the
//! makepkg grammar of names and `pkgrel`, and the install script that
//! regenerates the initramfs.

use std::path::Path;

use anyhow::Result;

use super::compress::Compression;
use super::format::{file_name, PackageFormat, ScriptTemplates, Sources};
use super::meta::{Architecture, Grammar, PackageMeta};
use super::packing::Packing;
use super::tree::FileTree;
use super::{arch, names, tar, tarball, Artifact, Package};
use crate::shared::hash::memo::Want;

/// The `.pkg.tar.zst`.
pub(crate) struct Arch;

/// makepkg's `pkgname` and `pkgrel`.
static GRAMMAR: Grammar = Grammar {
    name_rule: "lower-case letters, digits and `@._+-`, not starting with `-` or `.`",
    name_ok,
    release_rule: "digits, optionally `.digits` (pkgrel)",
    release_ok,
};

fn name_ok(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|first| first != '-' && first != '.')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "@._+-".contains(c))
}

fn release_ok(r: &str) -> bool {
    let mut parts = r.split('.');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && parts.clone().count() <= 1 && parts.all(|p| digits(Some(p)))
}

impl PackageFormat for Arch {
    fn name(&self) -> &'static str {
        "arch"
    }

    fn label(&self) -> &'static str {
        "Arch"
    }

    /// `<name>-<version>-<release>-<arch>.pkg.tar.zst`
    fn file_name(&self, meta: &PackageMeta, machine: Architecture) -> String {
        let full = meta.full_version();
        format!("{}-{full}-{}.pkg.tar.zst", meta.name, machine.arch())
    }

    fn grammar(&self) -> &'static Grammar {
        &GRAMMAR
    }

    fn digests(&self) -> Want {
        Want::BOTH
    }

    fn compression(&self) -> Compression {
        Compression::ARCH
    }

    /// A whole `.INSTALL`, used as it is.
    fn dkms_scripts(&self) -> ScriptTemplates {
        ScriptTemplates {
            post_install: None,
            pre_remove: None,
            install: Some("arch-install"),
        }
    }

    /// `<name>-<version>-<release>.src.tar.gz`
    fn source_packages(&self, meta: &PackageMeta) -> Vec<String> {
        vec![names::arch_source(meta)]
    }

    /// `<pkgname>/` with the PKGBUILD, its .SRCINFO and every local source
    /// the PKGBUILD names, so makepkg builds offline from the files beside it.
    fn write_source_packages(&self, src: &Sources, out_dir: &Path) -> Result<Vec<Artifact>> {
        let top = &src.meta.name;
        let mut tree = FileTree::new();
        tree.add_dir(top)?;
        for (name, text) in src.rendered {
            if let Some(name) = name.strip_prefix("arch/") {
                tree.add_bytes(&format!("{top}/{name}"), text.clone().into_bytes(), false)?;
            }
        }
        anyhow::ensure!(
            tree.get(&format!("{top}/PKGBUILD")).is_some(),
            "arch/PKGBUILD was not rendered: restore templates/arch/PKGBUILD.hbs"
        );
        tree.add_file(&format!("{top}/{}", file_name(src.orig)), src.orig, false)?;
        for (name, path) in src.extra.iter().chain(src.patches) {
            tree.add_file(&format!("{top}/{name}"), path, false)?;
        }
        let written = tarball::write_tar_gz(
            &tree,
            tar::Names::Plain,
            src.epoch,
            out_dir,
            &names::arch_source(src.meta),
            src.packing,
        )?;
        Ok(vec![written])
    }

    fn write(&self, pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
        arch::write(pkg, out_dir, packing)
    }
}
