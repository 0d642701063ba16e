//! What a `kind = "config"` recipe (the `amdgpu-cwsr-off` modprobe.d
//! stop-gap) brings to the build line: its assemble step puts each
//! `[config]` file at its destination, marked as configuration below
//! `/etc` (a Debian conffile, rpm `%config(noreplace)`, an Arch `backup`).

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use super::exec::Cx;
use super::{plan, Assembled, Options};
use crate::diag::UsageError;
use crate::package::{FileTree, Format, PackageMeta};
use crate::recipe::{Config, Recipe};

/// A config build's settings, resolved before anything is fetched.
pub struct Part<'r> {
    pub config: &'r Config,
    pub formats: Vec<Format>,
}

impl<'r> Part<'r> {
    pub fn new(recipe: &'r Recipe, opts: &Options) -> Result<Part<'r>> {
        let config = recipe.config.as_ref().ok_or_else(|| {
            UsageError(format!(
                "{}: build-config needs a `[config]` table with `files` (see recipes/README.md)",
                recipe.path.display()
            ))
        })?;
        let formats = opts
            .formats
            .clone()
            .unwrap_or_else(|| recipe.target.formats.clone());
        if formats.contains(&Format::Tar) {
            bail!(UsageError(format!(
                "recipe {} is a config package: build it as deb, rpm or arch (`tar` is for DKMS sources)",
                recipe.name
            )));
        }
        Ok(Part { config, formats })
    }

    pub fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("formats".to_owned(), super::formats_line(&self.formats))])
    }

    /// Each `[config]` file of the patched tree at its destination.
    pub fn assemble(&self, cx: &Cx) -> Result<Assembled> {
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
        Ok(Assembled {
            meta: meta(cx),
            machine: plan::machine(cx.recipe.target.kind),
            tree,
            scripts: BTreeMap::new(),
            pkgbuild: None,
            params: BTreeMap::new(),
        })
    }
}

fn meta(cx: &Cx) -> PackageMeta {
    let mut meta = plan::identity(cx.recipe);
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
        crate::packaging::year(cx.epoch),
        cx.recipe.package.maintainer
    )];
    meta
}
