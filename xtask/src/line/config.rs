//! What a `kind = "config"` recipe (the `amdgpu-cwsr-off` modprobe.d
//! stop-gap) brings to the build line: its render step (`debian/`, spec,
//! PKGBUILD from `templates/config/` into `packaging/`) and its assemble
//! step, which puts each `[config]` file at its destination, marked as
//! configuration below `/etc` (a Debian conffile, rpm `%config(noreplace)`,
//! an Arch `backup`), and writes the source packages of the formats built.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use super::exec::Cx;
use super::{identity, Assembled, BuildKind, Options};
use crate::formats::{names, FileTree, Format, PackageMeta};
use crate::input::recipe::{Config, Recipe};
use crate::input::workspace::Workspace;
use crate::release::packaging::config_files as packaging_config;
use crate::release::render::{Rendered, Renderer};
use crate::shared::diag::UsageError;

/// The config kind: rendered packaging, and source packages.
pub(crate) struct ConfigKind;

impl BuildKind for ConfigKind {
    fn renders(&self) -> bool {
        true
    }

    fn part<'r>(
        &self,
        _ws: &Workspace,
        recipe: &'r Recipe,
        opts: &Options,
    ) -> Result<Box<dyn super::Part + 'r>> {
        let config = recipe
            .kind
            .config()
            .with_context(|| format!("{}: not a config recipe", recipe.path.display()))?;
        Ok(Box::new(Part::new(recipe, config, opts)?))
    }
}

/// A config build's settings, resolved before anything is fetched.
pub(crate) struct Part<'r> {
    pub(crate) config: &'r Config,
    pub(crate) formats: Vec<Format>,
}

impl<'r> Part<'r> {
    pub(crate) fn new(recipe: &Recipe, config: &'r Config, opts: &Options) -> Result<Part<'r>> {
        let formats = opts.formats_of(recipe);
        if !recipe.kind.name().accepts(&formats) {
            bail!(UsageError(format!(
                "recipe {} is a config package: build it as deb, rpm or arch (`tar` is for DKMS sources)",
                recipe.name
            )));
        }
        Ok(Part { config, formats })
    }
}

impl super::Part for Part<'_> {
    fn formats(&self) -> &[Format] {
        &self.formats
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("formats".to_owned(), super::formats_line(&self.formats))])
    }

    /// Renders the packaging files once and writes them into `packaging/`.
    fn render(&self, cx: &Cx) -> Result<Rendered> {
        let source = cx.source()?;
        let p = &cx.recipe.package;
        let inputs = packaging_config::Inputs {
            orig_tarball: names::orig(&p.name, &p.about.version),
            orig_sha256: source.orig_sha256.clone(),
            source_dir: source.top.clone(),
            patch_sha256: cx.patch_sha256()?,
        };
        let renderer = Renderer::new(&cx.ws.root.join("templates"))?;
        let values = packaging_config::values(cx.recipe, &cx.plan, &inputs)?;
        let mut rendered = packaging_config::render(&renderer, &values)?;
        rendered.extend(crate::release::packaging::debian_docs(
            &meta(cx),
            cx.epoch_u()?,
        )?);
        let dir = cx.dir()?.join("packaging");
        for (name, text) in &rendered {
            let path = dir.join(name);
            let parent = path.parent().expect("rendered files have a folder");
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(rendered)
    }

    /// Each `[config]` file of the patched tree at its destination, and the
    /// source packages of the formats built.
    fn assemble(&self, cx: &Cx) -> Result<Assembled> {
        let tree_dir = cx.tree()?;
        let mut tree = FileTree::new();
        for file in &self.config.files {
            let src = tree_dir.join(&file.source);
            if !src.is_file() {
                bail!(
                    "`config.files` of {} names `{}`, which is not a file of the source tree ({}): fix the recipe or the source",
                    cx.recipe.path.display(),
                    file.source,
                    src.display()
                );
            }
            tree.add_file(&file.dest, &src, false)?;
            if file.is_conffile() {
                tree.mark_config(&file.dest)?;
            }
        }
        let meta = meta(cx);
        super::source_packages::write_all(&self.formats, cx, &meta)?;
        Ok(Assembled {
            machine: identity::machine(cx.recipe.kind.name()),
            tree,
            scripts: BTreeMap::new(),
            pkgbuild: Some(cx.rendered()?["arch/PKGBUILD"].clone().into_bytes()),
            params: BTreeMap::new(),
            meta,
            carried: None,
        })
    }
}

fn meta(cx: &Cx) -> PackageMeta {
    let mut meta = identity::identity(cx.recipe);
    meta.changes = vec![format!(
        "Built by rocm-patchkit from {}.",
        cx.plan.recipe_file
    )];
    meta.changes.extend(
        cx.plan
            .patches
            .iter()
            .map(|patch| format!("Patch {}.", patch.name)),
    );
    meta.copyright = vec![format!(
        "{} {}",
        crate::release::packaging::year(cx.epoch),
        cx.recipe.package.about.maintainer
    )];
    meta
}
