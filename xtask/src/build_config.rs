//! build-config: a configuration-only package (`kind = "config"`, such as
//! the `amdgpu-cwsr-off` modprobe.d stop-gap) walked through fetch, apply
//! and package, and published into `dist/<recipe>/` atomically like every
//! build. Files below `/etc` are marked as configuration in each format.
//! Beside the packages, `config_sources` publishes the pristine source, the
//! series, the packaging files and the source packages build farms take.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::diag::UsageError;
use crate::dist::Staging;
use crate::fetch::{self, FetchOptions};
use crate::manifest::Manifest;
use crate::package::{self, FileTree, PackageMeta};
use crate::patch::{stage, Tolerance};
use crate::plan::{self, Plan};
pub use crate::publish::Outcome;
use crate::publish::{self, template_bytes, Stamp};
use crate::recipe::{Config, Format, Kind, Recipe};
use crate::workspace::Workspace;
use crate::{config_sources, packaging, target};

/// What to build.
#[derive(Debug, Clone)]
pub struct Options {
    pub recipe: String,
    /// `--formats`; the recipe's otherwise.
    pub formats: Option<Vec<Format>>,
    /// `--out`; `dist/<recipe>` otherwise.
    pub out: Option<PathBuf>,
    pub fetch: FetchOptions,
}

pub fn run(ws: &Workspace, opts: &Options) -> Result<Outcome> {
    let recipe = Recipe::load(&ws.root, &opts.recipe)?;
    let config = config_of(&recipe)?;
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
    let epoch = target::source_date_epoch(&ws.root)?;
    let epoch_u = u64::try_from(epoch).context("SOURCE_DATE_EPOCH is negative")?;
    let plan = plan::plan(&recipe)?;
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| ws.root.join("dist").join(&recipe.name));
    crate::dist::check_replaceable(&out)?;
    let reporter = &ws.reporter;

    let fetched = fetch::fetch(ws, &recipe, &opts.fetch)?;
    let mut build = BTreeMap::new();
    build.insert("formats".to_owned(), publish::formats_line(&formats));
    let templates = ws.root.join("templates");
    let manifest = Manifest::new(&plan, &fetched, epoch, build, &template_bytes(&templates)?)?;
    let lock = ws.lock_work(&recipe.name)?;
    let work = lock.dir.clone();
    let stamp = Stamp::new(work.join("published.stamp"), &manifest, &out);
    if stamp.up_to_date(&out, &manifest) {
        return Ok(Outcome::UpToDate { dir: out });
    }

    // The tree is a handful of small files: applied afresh every time.
    let tree_dir = work.join("tree");
    stage::apply_recipe(&recipe, &fetched, &tree_dir, Tolerance::strict(), reporter)?;
    let tree = file_tree(&recipe, config, &tree_dir)?;
    let meta = package_meta(&recipe, &plan, epoch)?;
    let none = package::Scripts::default();

    let staging = Staging::begin(&out)?;
    let dir = staging.dir().to_path_buf();
    let sources = config_sources::Sources {
        recipe: &recipe,
        plan: &plan,
        fetched: &fetched,
        meta: &meta,
        formats: &formats,
        templates: &templates,
        work: &work,
        epoch: epoch_u,
    };
    let written = config_sources::write(&sources, &dir, reporter)?;
    for artifact in &written.artifacts {
        publish::wrote(reporter, artifact, &dir);
    }
    let pkgbuild = Some(written.pkgbuild.as_bytes());
    for format in &formats {
        let artifact = match format {
            Format::Deb => package::deb::write(&meta, &tree, &none, epoch_u, &dir)?,
            Format::Rpm => package::rpm::write(&meta, &tree, &none, epoch_u, &dir)?,
            Format::Arch => package::arch::write(&meta, &tree, &none, pkgbuild, epoch_u, &dir)?,
            Format::Tar => unreachable!("refused above"),
        };
        publish::wrote(reporter, &artifact, &dir);
    }
    publish::finish(staging, manifest, &stamp)
}

/// The recipe's `[config]` table, or a refusal that names the right command.
fn config_of(recipe: &Recipe) -> Result<&Config> {
    publish::require_kind(recipe, Kind::Config)?;
    recipe.config.as_ref().ok_or_else(|| {
        UsageError(format!(
            "{}: build-config needs a `[config]` table with `files` (see recipes/README.md)",
            recipe.path.display()
        ))
        .into()
    })
}

/// The package content: each `[config]` file at its destination, marked as
/// configuration when it lies below `/etc`.
fn file_tree(recipe: &Recipe, config: &Config, tree_dir: &std::path::Path) -> Result<FileTree> {
    let mut tree = FileTree::new();
    for file in &config.files {
        let src = tree_dir.join(&file.source);
        if !src.is_file() {
            bail!(
                "`config.files` of {} names `{}`, which is not a file of the source tree ({}): fix the recipe or the source",
                recipe.path.display(),
                file.source,
                src.display()
            );
        }
        tree.add_file(&file.dest, &src, false)?;
        if file.is_conffile() {
            tree.mark_config(&file.dest)?;
        }
    }
    Ok(tree)
}

fn package_meta(recipe: &Recipe, plan: &Plan, epoch: i64) -> Result<PackageMeta> {
    let p = &recipe.package;
    let mut changes = vec![format!("Built by rocm-patchkit from {}.", plan.recipe_file)];
    changes.extend(
        plan.patches
            .iter()
            .map(|patch| format!("Patch {}.", patch.name)),
    );
    Ok(PackageMeta {
        name: p.name.clone(),
        source: None,
        version: p.version.clone(),
        release: p.release.clone(),
        summary: p.summary.clone(),
        description: p.description.trim().to_owned(),
        license: p.license.clone(),
        homepage: p.homepage.clone(),
        maintainer: p.maintainer.clone(),
        depends: Vec::new(),
        changes,
        copyright: vec![format!("{} {}", packaging::year(epoch), p.maintainer)],
        relations: Default::default(),
    })
}
