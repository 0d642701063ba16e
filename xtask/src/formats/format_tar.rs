//! The DKMS source tarball (`tar`): what `dkms ldtarball` loads, written by
//! [`super::tarball::write_dkms`] from the DKMS source a dkms build puts at
//! `usr/src/<module>-<version>`. No maintainer scripts (dkms itself loads
//! it) and no source package (it is one).

use std::path::Path;

use anyhow::Result;

use super::compress::Compression;
use super::format::{PackageFormat, ScriptTemplates, Sources};
use super::meta::{Architecture, Grammar, PackageMeta};
use super::packing::Packing;
use super::{format_rpm, names, tarball, Artifact, Package};
use crate::shared::hash::memo::Want;

/// The `<module>-<version>-source-only.dkms.tar.gz`.
pub(crate) struct DkmsTarball;

impl PackageFormat for DkmsTarball {
    fn name(&self) -> &'static str {
        "tar"
    }

    fn label(&self) -> &'static str {
        "DKMS tarball"
    }

    /// `<module>-<version>-source-only.dkms.tar.gz`, the name
    /// `dkms mktarball --source-only` gives; the module is the meta's source.
    fn file_name(&self, meta: &PackageMeta, _machine: Architecture) -> String {
        names::dkms_tarball(names::source_name(meta), &meta.about.version)
    }

    /// rpm's: the most lenient of the package managers that install the
    /// module the tarball holds.
    fn grammar(&self) -> &'static Grammar {
        &format_rpm::GRAMMAR
    }

    fn digests(&self) -> Want {
        Want::default()
    }

    fn compression(&self) -> Compression {
        Compression::TARBALL
    }

    /// None: the tarball is no installed package; `dkms ldtarball` loads it.
    fn dkms_scripts(&self) -> ScriptTemplates {
        ScriptTemplates::NONE
    }

    fn source_packages(&self, _meta: &PackageMeta) -> Vec<String> {
        Vec::new()
    }

    fn write_source_packages(&self, _src: &Sources, _out_dir: &Path) -> Result<Vec<Artifact>> {
        Ok(Vec::new())
    }

    /// The tree must hold the DKMS source at `usr/src/<module>-<version>`
    /// with its `dkms.conf`.
    fn write(&self, pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
        let module = names::source_name(pkg.meta);
        let version = &pkg.meta.about.version;
        let source = pkg.tree.subtree(&names::dkms_source_dir(module, version))?;
        tarball::write_dkms(&source, module, version, pkg.epoch, out_dir, packing)
    }

    fn dkms_only(&self) -> bool {
        true
    }
}
