//! What the package benchmark feeds every packager: read from the scratch
//! project after `build-dkms` built it, so that ours, the reference tools
//! and nfpm package the very tree, `dkms.conf`, scripts, spec and PKGBUILD
//! that build-dkms rendered from `templates/`. Nothing here is written by
//! hand; the only rendering call is the maintainer scripts' (one place).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use xtask::formats::{self, names, Architecture, FileTree, Format, Package, PackageMeta, Scripts};
use xtask::input::recipe::Recipe;
use xtask::{apply::state, release::packaging};

/// SOURCE_DATE_EPOCH of every build and package of the benchmark.
pub(crate) const EPOCH: u64 = 1_735_787_045;

/// One DKMS recipe as build-dkms published it in a project.
#[derive(Debug)]
pub(crate) struct Inputs {
    pub(crate) root: PathBuf,
    pub(crate) recipe: Recipe,
    pub(crate) meta: PackageMeta,
    /// `<name>-<version>`: the folder below `/usr/src`.
    pub(crate) prefix: String,
    /// The patched source tree of the work folder (its top).
    pub(crate) patched: PathBuf,
    /// The DKMS tree inside it (`dkms.tree`).
    pub(crate) tree_root: PathBuf,
    /// `dist/<recipe>/`: the packages and `packaging/` build-dkms wrote.
    pub(crate) dist: PathBuf,
    pub(crate) dkms_conf: String,
    /// The maintainer scripts of each format (deb postinst/prerm, rpm
    /// %post/%preun, Arch install, none for the DKMS tarball).
    pub(crate) scripts: BTreeMap<Format, Scripts>,
    pub(crate) pkgbuild: Vec<u8>,
}

impl Inputs {
    /// Reads recipe `name` of the project at `root` and what build-dkms
    /// published for it; fails, naming the file, when a build is missing.
    pub(crate) fn read(root: &Path, name: &str) -> Result<Inputs> {
        let recipe = Recipe::load(root, name)?;
        let dkms = recipe
            .kind
            .dkms()
            .with_context(|| format!("{}: not a dkms recipe", recipe.path.display()))?;
        let plan = xtask::line::plan::plan(&recipe)?;
        let meta = xtask::line::dkms::package_meta(&recipe, &plan, EPOCH as i64)?;
        let p = &recipe.package;
        let prefix = formats::names::dkms_source_dir(&p.name, &p.about.version);
        let patched = root
            .join("target/patchkit/work")
            .join(&recipe.name)
            .join("tree");
        let tree_root = if dkms.tree == "." {
            patched.clone()
        } else {
            patched.join(&dkms.tree)
        };
        let dist = root.join("dist").join(&recipe.name);
        let packaging_dir = dist.join("packaging");
        let read = |rel: &str| -> Result<Vec<u8>> {
            let path = packaging_dir.join(rel);
            std::fs::read(&path).with_context(|| {
                format!(
                    "reading {} (written by build-dkms {})",
                    path.display(),
                    recipe.name
                )
            })
        };
        let dkms_conf = String::from_utf8(read("dkms.conf")?).context("dkms.conf is not UTF-8")?;
        let pkgbuild = read("arch/PKGBUILD")?;
        let scripts = packaging::dkms_files::dkms_scripts(
            &root.join("templates"),
            &p.name,
            &p.about.version,
        )?;
        Ok(Inputs {
            root: root.to_path_buf(),
            meta,
            prefix,
            patched,
            tree_root,
            dist,
            dkms_conf,
            scripts,
            pkgbuild,
            recipe,
        })
    }

    /// The DKMS tree as build-dkms packages it: `<prefix>/...` without the
    /// applied-patch record, with the rendered `dkms.conf`.
    pub(crate) fn dkms_tree(&self) -> Result<FileTree> {
        let mut tree = FileTree::from_dir(&self.tree_root, &self.prefix)?;
        tree.remove(&format!("{}/{}", self.prefix, state::DIR));
        tree.add_bytes(
            &format!("{}/dkms.conf", self.prefix),
            self.dkms_conf.clone().into_bytes(),
            false,
        )?;
        Ok(tree)
    }

    /// The rendered spec build-dkms published (`packaging/rpm/<pkg>.spec`).
    pub(crate) fn spec(&self) -> PathBuf {
        self.dist
            .join("packaging/rpm")
            .join(format!("{}.spec", self.meta.name))
    }

    /// The maintainer scripts of `format`'s package.
    pub(crate) fn scripts_of(&self, format: Format) -> Result<&Scripts> {
        self.scripts
            .get(&format)
            .with_context(|| format!("no maintainer scripts for {}", format.as_str()))
    }

    /// Our package of `format` in `dist/<recipe>/`, as build-dkms named it.
    pub(crate) fn published(&self, format: Format) -> PathBuf {
        let name = names::file_name(format, &self.meta, Architecture::Any);
        self.dist.join(name)
    }

    /// Our writer of `format`, in this process, into `out`: the calls
    /// build-dkms makes, with its inputs.
    pub(crate) fn write_ours(&self, format: Format, out: &Path) -> Result<formats::Artifact> {
        let tree = self.dkms_tree()?;
        let scripts = self.scripts_of(format)?;
        let pkg = Package {
            meta: &self.meta,
            machine: Architecture::Any,
            tree: &tree,
            scripts,
            pkgbuild: Some(&self.pkgbuild),
            epoch: EPOCH,
        };
        // As a cold build writes it: no chunk cache, the .deb's default.
        formats::write(format, &pkg, out, &formats::Packing::default())
    }
}
