//! What a package format is: the [`PackageFormat`] trait, implemented once
//! per format in its own file (`format_deb.rs`, `format_rpm.rs`,
//! `format_arch.rs`, `format_tar.rs`, over the writers), with
//! the name, the file names, the grammar of names and releases, the
//! maintainer scripts of a DKMS package, the source packages and the writer
//! of the format. [`super::Format`] names one and hands over to its
//! implementation in one `match`; everything else asks the implementation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::compress::Compression;
use super::meta::{Architecture, Grammar, PackageMeta};
use super::packing::Packing;
use super::scripts::Scripts;
use super::{Artifact, Package};
use crate::shared::hash::memo::Want;

/// One package format (nfpm's `Packager`): what a recipe's
/// `target.formats` and `--formats` name, and all the build needs to
/// name, describe and write its packages.
pub trait PackageFormat: Sync {
    /// `deb`: the recipe's and the command line's word.
    fn name(&self) -> &'static str;

    /// `Debian`: the name of the format's rules in messages.
    fn label(&self) -> &'static str;

    /// The binary package's file name, asked by the plan and the writer.
    fn file_name(&self, meta: &PackageMeta, machine: Architecture) -> String;

    /// What a package name and release must look like in this format.
    fn grammar(&self) -> &'static Grammar;

    /// The file digests the format lists, taken on all cores before the
    /// writer streams the files on one.
    fn digests(&self) -> Want;

    /// The compressor and level of the payload.
    fn compression(&self) -> Compression;

    /// The scripts of `templates/scripts/` a DKMS package of this format
    /// runs to build and remove the module. Required: a DKMS package whose
    /// scripts nobody named would install without ever running `dkms`.
    fn dkms_scripts(&self) -> ScriptTemplates;

    /// The source packages published beside a binary package, as paths in
    /// the publication; none for a format without them.
    fn source_packages(&self, meta: &PackageMeta) -> Vec<String>;

    /// Writes the source packages [`PackageFormat::source_packages`]
    /// names into the publication `out_dir`.
    fn write_source_packages(&self, src: &Sources, out_dir: &Path) -> Result<Vec<Artifact>>;

    /// Writes `pkg` into `out_dir`, named [`PackageFormat::file_name`].
    fn write(&self, pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact>;

    /// Whether the format packages a DKMS source tree and nothing else
    /// (the tarball `dkms ldtarball` loads), so only a dkms build makes it.
    fn dkms_only(&self) -> bool {
        false
    }

    /// Whether the format can take the place of an upstream binary package,
    /// carrying its control members ([`PackageFormat::write_carried`]).
    fn carries_upstream(&self) -> bool {
        false
    }

    /// Writes `pkg` in the place of the upstream package `carried` came
    /// from; only a format that [`carries_upstream`](Self::carries_upstream).
    fn write_carried(
        &self,
        pkg: &Package,
        carried: &Carried,
        out_dir: &Path,
        packing: &Packing,
    ) -> Result<Artifact> {
        let _ = (pkg, carried, out_dir, packing);
        bail!("a {} package cannot carry an upstream package", self.name())
    }
}

/// The control members of an upstream package that a rewrite's package
/// carries, other than `md5sums`.
#[derive(Debug, Clone)]
pub struct Carried {
    /// `control`, as the upstream package has it.
    pub(crate) control: String,
    /// `shlibs`, `triggers`, maintainer scripts...: (name, mode, bytes).
    pub(crate) members: Vec<(String, u32, Vec<u8>)>,
}

/// Which of `templates/scripts/` (rendered as `scripts/<name>`) fill a
/// format's maintainer-script slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptTemplates {
    /// deb `postinst`, rpm `%post`, Arch `post_install`.
    pub(crate) post_install: Option<&'static str>,
    /// deb `prerm`, rpm `%preun`, Arch `pre_remove`.
    pub(crate) pre_remove: Option<&'static str>,
    /// A whole install script with its own functions (Arch's `.INSTALL`).
    pub(crate) install: Option<&'static str>,
}

impl ScriptTemplates {
    /// No scripts: a format whose packages are no installed packages.
    pub(crate) const NONE: ScriptTemplates = ScriptTemplates {
        post_install: None,
        pre_remove: None,
        install: None,
    };

    /// The template names, `postinst` for `templates/scripts/postinst.hbs`.
    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> {
        [self.post_install, self.pre_remove, self.install]
            .into_iter()
            .flatten()
    }

    /// The scripts, taken from a rendering keyed `scripts/<name>`.
    pub(crate) fn fill(&self, rendered: &BTreeMap<String, String>) -> Result<Scripts> {
        let take =
            |slot: Option<&str>| -> Result<Option<String>> {
                slot.map(|name| {
                    rendered.get(&format!("scripts/{name}")).cloned().with_context(|| {
                    format!("scripts/{name} was not rendered: restore templates/scripts/{name}.hbs")
                })
                })
                .transpose()
            };
        Ok(Scripts {
            post_install: take(self.post_install)?,
            pre_remove: take(self.pre_remove)?,
            arch_install: take(self.install)?,
        })
    }
}

/// What the source packages of every format are made from: the packaging
/// files a build rendered and the files it published beside them.
pub struct Sources<'a> {
    pub(crate) meta: &'a PackageMeta,
    /// Upstream version and packaging revision, as the recipe has them.
    pub(crate) version: &'a str,
    pub(crate) revision: &'a str,
    /// The rendered packaging files, keyed by their path (`debian/control`,
    /// `rpm/<name>.spec`, `arch/PKGBUILD`).
    pub(crate) rendered: &'a BTreeMap<String, String>,
    /// The pristine upstream archive, in the publication.
    pub(crate) orig: &'a Path,
    /// Files beside the orig archive that the spec and PKGBUILD name
    /// (a dkms recipe's `dkms.conf`): (file name, path).
    pub(crate) extra: &'a [(String, PathBuf)],
    /// The patches in series order, (file name, path), and the `series`.
    pub(crate) patches: &'a [(String, PathBuf)],
    pub(crate) series: &'a str,
    /// `SOURCE_DATE_EPOCH`.
    pub(crate) epoch: u64,
    pub(crate) packing: &'a Packing,
}

/// The last component of `path`, as a file name in a source package.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}
