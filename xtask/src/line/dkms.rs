//! What a `kind = "dkms"` recipe brings to the build line: the kernel it is
//! built for, the render step (dkms.conf, maintainer scripts, `debian/`,
//! spec, PKGBUILD into `packaging/`), and the assemble step: the DKMS tree
//! below `usr/src/<name>-<version>` with its dkms.conf, and the source
//! packages build farms take (`.dsc`, `.src.rpm`, Arch `.src.tar.gz`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use super::exec::Cx;
use super::{identity, Assembled, BuildKind, Options};
use crate::formats::{self, names, FileTree, Format, PackageMeta};
use crate::input::recipe::{Dkms, Recipe};
use crate::input::workspace::Workspace;
use crate::release::render::{Rendered, Renderer};
use crate::shared::diag::UsageError;
use crate::{apply::state, input::target, release::packaging};

/// The dkms kind: packages named `<name>-dkms` from the source `<name>`,
/// rendered packaging, `dkms.conf` beside the sources of its source
/// packages.
pub(crate) struct DkmsKind;

impl BuildKind for DkmsKind {
    fn identity(&self, recipe: &Recipe, meta: &mut PackageMeta) {
        meta.name = names::dkms_package(&recipe.package.name);
        meta.source = Some(recipe.package.name.clone());
    }

    fn renders(&self) -> bool {
        true
    }

    fn extra_sources(&self, cx: &Cx) -> Result<Vec<(String, std::path::PathBuf)>> {
        Ok(vec![(
            "dkms.conf".to_owned(),
            cx.dir()?.join("packaging/dkms.conf"),
        )])
    }

    fn part<'r>(
        &self,
        _ws: &Workspace,
        recipe: &'r Recipe,
        opts: &Options,
    ) -> Result<Box<dyn super::Part + 'r>> {
        let Some(table) = recipe.kind.dkms() else {
            anyhow::bail!(UsageError(format!(
                "{}: build-dkms needs a `[dkms]` table with at least one `[[dkms.module]]` (see recipes/README.md)",
                recipe.path.display()
            )));
        };
        Ok(Box::new(Part::new(recipe, table, opts)?))
    }
}

/// A dkms build's settings, resolved before anything is fetched.
pub(crate) struct Part<'r> {
    pub(crate) dkms: &'r Dkms,
    pub(crate) kernel: String,
    pub(crate) formats: Vec<Format>,
}

impl<'r> Part<'r> {
    pub(crate) fn new(recipe: &Recipe, dkms: &'r Dkms, opts: &Options) -> Result<Part<'r>> {
        let formats = opts.formats_of(recipe);
        let kernel = target::pick_kernel(opts.kernel.as_deref(), &opts.modules_dir)?;
        target::check_kernel(recipe, &kernel)?;
        Ok(Part {
            dkms,
            kernel,
            formats,
        })
    }

    /// The DKMS tree inside the patched source.
    fn tree_root(&self, cx: &Cx) -> Result<std::path::PathBuf> {
        let tree = cx.tree()?;
        let root = if self.dkms.tree == "." {
            tree.to_path_buf()
        } else {
            tree.join(&self.dkms.tree)
        };
        anyhow::ensure!(
            root.is_dir(),
            "`dkms.tree = \"{}\"` of {} is not a folder of the patched source: fix the recipe",
            self.dkms.tree,
            cx.recipe.path.display()
        );
        Ok(root)
    }

    fn meta(&self, cx: &Cx) -> Result<PackageMeta> {
        package_meta(cx.recipe, &cx.plan, cx.epoch)
    }
}

impl super::Part for Part<'_> {
    fn formats(&self) -> &[Format] {
        &self.formats
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("kernel".to_owned(), self.kernel.clone()),
            ("formats".to_owned(), super::formats_line(&self.formats)),
        ])
    }

    /// Renders every packaging file once (dkms.conf first, its sha256 then
    /// given to the PKGBUILD) and writes all but the scripts into
    /// `packaging/`.
    fn render(&self, cx: &Cx) -> Result<Rendered> {
        let source = cx.source()?;
        let inputs = packaging::dkms_files::Inputs {
            epoch: cx.epoch,
            orig_tarball: names::orig(&cx.recipe.package.name, &cx.recipe.package.about.version),
            orig_sha256: source.orig_sha256.clone(),
            source_dir: source.top.clone(),
            patch_sha256: cx.patch_sha256()?,
            tree_entries: top_level_entries(&self.tree_root(cx)?)?,
        };
        let renderer = Renderer::new(&cx.ws.root.join("templates"))?;
        let values = packaging::dkms_files::values(cx.recipe, &cx.plan, &inputs)?;
        let mut rendered = packaging::dkms_files::render(&renderer, &values)?;
        rendered.extend(packaging::debian_docs(&self.meta(cx)?, cx.epoch_u()?)?);
        let dir = cx.dir()?.join("packaging");
        for (name, text) in rendered.iter().filter(|(n, _)| !n.starts_with("scripts/")) {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().expect("rendered files have a folder"))?;
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(rendered)
    }

    /// The DKMS tree with its dkms.conf, each format's scripts, and the
    /// source packages of the formats built.
    fn assemble(&self, cx: &Cx) -> Result<Assembled> {
        let rendered = cx.rendered()?;
        let meta = self.meta(cx)?;
        let p = &cx.recipe.package;
        let prefix = formats::names::dkms_source_dir(&p.name, &p.about.version);
        let mut tree = FileTree::from_dir(&self.tree_root(cx)?, &prefix)?;
        tree.remove(&format!("{prefix}/{}", state::DIR));
        let dkms_conf = rendered["dkms.conf"].clone().into_bytes();
        tree.add_bytes(&format!("{prefix}/dkms.conf"), dkms_conf, false)?;
        super::source_packages::write_all(&self.formats, cx, &meta)?;
        Ok(Assembled {
            machine: identity::machine(cx.recipe.kind.name()),
            tree,
            scripts: packaging::dkms_files::scripts(rendered)?,
            pkgbuild: Some(rendered["arch/PKGBUILD"].clone().into_bytes()),
            params: BTreeMap::new(),
            meta,
            carried: None,
        })
    }
}

fn top_level_entries(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// The package metadata of a dkms recipe: the plan's identity, with the
/// changelog, the copyright and the relations between module packages.
pub fn package_meta(
    recipe: &Recipe,
    plan: &crate::input::plan::Plan,
    epoch: i64,
) -> Result<PackageMeta> {
    let dkms = recipe
        .kind
        .dkms()
        .with_context(|| format!("{}: not a dkms recipe", recipe.path.display()))?;
    let mut meta = identity::identity(recipe);
    meta.changes = vec![format!(
        "Built by rocm-patchkit from {} and {}.",
        plan.recipe_file,
        packaging::source_line(&recipe.source)
    )];
    meta.changes.extend(
        plan.patches
            .iter()
            .map(|patch| format!("Patch {}.", patch.name)),
    );
    meta.depends = vec!["dkms".to_owned()];
    meta.copyright = vec![format!(
        "{} The upstream authors of {}",
        packaging::year(epoch),
        recipe.package.name
    )];
    meta.relations =
        formats::Relations::for_dkms_modules(dkms.modules.iter().map(|m| m.name.as_str()));
    Ok(meta)
}
