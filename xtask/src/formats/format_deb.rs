//! The Debian format (`deb`): binary packages written by [`super::deb`]
//! (or, in the place of an upstream package, by [`super::deb_carried`]),
//! with the `3.0 (quilt)` source package of [`super::dsc`], Debian policy's
//! grammar of names and revisions, and dh_dkms's maintainer scripts.

use std::path::Path;

use anyhow::Result;

use super::compress::Compression;
use super::format::{Carried, PackageFormat, ScriptTemplates, Sources};
use super::meta::{Architecture, Grammar, PackageMeta};
use super::packing::Packing;
use super::tree::FileTree;
use super::{deb, deb_carried, dsc, names, Artifact, Package};
use crate::shared::hash::memo::Want;

/// The `.deb`.
pub(crate) struct Deb;

/// Debian policy: package names of lower-case letters, digits and `+-.`.
static GRAMMAR: Grammar = Grammar {
    name_rule: "lower-case letters, digits and `+-.`, at least 2 characters, starting alphanumeric",
    name_ok,
    release_rule: "letters, digits and `.+~`, starting with a digit",
    release_ok,
};

fn name_ok(name: &str) -> bool {
    let Some(first) = name.chars().next() else {
        return false;
    };
    name.len() >= 2
        && (first.is_ascii_lowercase() || first.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

fn release_ok(r: &str) -> bool {
    r.starts_with(|c: char| c.is_ascii_digit())
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~".contains(c))
}

impl PackageFormat for Deb {
    fn name(&self) -> &'static str {
        "deb"
    }

    fn label(&self) -> &'static str {
        "Debian"
    }

    /// `<name>_<version>-<release>_<arch>.deb`
    fn file_name(&self, meta: &PackageMeta, machine: Architecture) -> String {
        let full = meta.full_version();
        format!("{}_{full}_{}.deb", meta.name, machine.deb())
    }

    fn grammar(&self) -> &'static Grammar {
        &GRAMMAR
    }

    fn digests(&self) -> Want {
        Want::MD5
    }

    fn compression(&self) -> Compression {
        Compression::DEB
    }

    /// What dh_dkms generates: `postinst` and `prerm`.
    fn dkms_scripts(&self) -> ScriptTemplates {
        ScriptTemplates {
            post_install: Some("postinst"),
            pre_remove: Some("prerm"),
            install: None,
        }
    }

    /// `source/<src>_<version>-<release>.dsc` and `.debian.tar.xz`.
    fn source_packages(&self, meta: &PackageMeta) -> Vec<String> {
        let (src, v, r) = (
            names::source_name(meta),
            &meta.about.version,
            &meta.about.release,
        );
        vec![
            format!("source/{}", names::dsc(src, v, r)),
            format!("source/{}", names::debian_tar(src, v, r)),
        ]
    }

    /// `debian/` as rendered, with the series in `debian/patches/`, beside
    /// the orig tarball in `source/`.
    fn write_source_packages(&self, src: &Sources, out_dir: &Path) -> Result<Vec<Artifact>> {
        let mut debian = FileTree::new();
        for (name, text) in src.rendered {
            if let Some(rel) = name.strip_prefix("debian/") {
                debian.add_bytes(rel, text.clone().into_bytes(), rel == "rules")?;
            }
        }
        if !src.patches.is_empty() {
            for (name, path) in src.patches {
                debian.add_file(&format!("patches/{name}"), path, false)?;
            }
            debian.add_bytes("patches/series", src.series.as_bytes().to_vec(), false)?;
        }
        dsc::write(
            &dsc::DebianSource {
                version: src.version,
                revision: src.revision,
                debian: &debian,
                orig: src.orig,
            },
            src.epoch,
            &out_dir.join("source"),
            src.packing,
        )
    }

    fn write(&self, pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
        deb::write(pkg, out_dir, packing)
    }

    fn carries_upstream(&self) -> bool {
        true
    }

    fn write_carried(
        &self,
        pkg: &Package,
        carried: &Carried,
        out_dir: &Path,
        packing: &Packing,
    ) -> Result<Artifact> {
        deb_carried::write(pkg, carried, out_dir, packing)
    }
}
