//! Packaging files of a config recipe (`kind = "config"`): the values the
//! `templates/config/` templates see, and every file rendered from them
//! (`debian/`, the rpm spec, the PKGBUILD and its .SRCINFO) under the same
//! paths a DKMS recipe's files take. Pure: no I/O beyond the renderer's
//! templates.

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::formats::names;
use crate::input::plan::Plan;
use crate::input::recipe::Recipe;
use crate::release::render::{Rendered, Renderer};

/// The folder of `templates/` that holds a config recipe's templates.
pub(crate) const TEMPLATES: &str = "config/";

/// What the rendered files need to know beyond the recipe.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The pristine archive published beside the packages
    /// (`<name>_<version>.orig.tar.gz`), its sha256, and the folder it
    /// unpacks into.
    pub orig_tarball: String,
    pub orig_sha256: String,
    pub source_dir: String,
    /// sha256 of each patch, in series order.
    pub patch_sha256: Vec<String>,
}

/// The values every template under `templates/config/` is rendered with.
pub fn values(recipe: &Recipe, plan: &Plan, inputs: &Inputs) -> Result<Value> {
    let config = recipe
        .kind
        .config()
        .context("a config recipe needs a `[config]` table")?;
    let p = &recipe.package;
    // The recipe checked each `source` and `dest` for the shell lines of
    // debian/rules, the spec and the PKGBUILD when it was loaded.
    let files: Vec<Value> = config
        .files
        .iter()
        .map(|file| {
            json!({
                "source": file.source,
                "dest": file.dest,
                "config": file.is_conffile(),
            })
        })
        .collect();
    let backup: Vec<&str> = config
        .files
        .iter()
        .filter(|f| f.is_conffile())
        .map(|f| f.dest.trim_start_matches('/'))
        .collect();
    let patches: Vec<&str> = recipe.patches.iter().map(|p| p.name.as_str()).collect();
    anyhow::ensure!(
        patches.len() == inputs.patch_sha256.len(),
        "{} names {} patches but {} were fetched",
        recipe.path.display(),
        patches.len(),
        inputs.patch_sha256.len()
    );
    let mut sources = vec![json!({ "file": inputs.orig_tarball, "sha256": inputs.orig_sha256 })];
    for (name, sha256) in patches.iter().zip(&inputs.patch_sha256) {
        sources.push(json!({ "file": name, "sha256": sha256 }));
    }
    Ok(json!({
        "recipe_file": plan.recipe_file,
        "name": p.name,
        "version": p.about.version,
        "release": p.about.release,
        "summary": p.about.summary,
        "description": p.about.description.trim(),
        "license": p.about.license,
        "homepage": p.about.homepage,
        "maintainer": p.about.maintainer,
        "section": crate::formats::Architecture::Any.section().0,
        "orig_tarball": inputs.orig_tarball,
        "source_dir": inputs.source_dir,
        "patches": patches,
        "sources": sources,
        "files": files,
        "backup": backup,
    }))
}

/// Every packaging file of a config recipe, by its path in the output:
/// `debian/...`, `rpm/<name>.spec`, `arch/PKGBUILD` and `arch/.SRCINFO`.
/// `debian/changelog` and `debian/copyright` are not templates: they come
/// from [`crate::release::packaging::debian_docs`], the texts the `.deb` carries.
pub fn render(renderer: &Renderer, values: &Value) -> Result<Rendered> {
    let name = values["name"].as_str().unwrap_or_default().to_owned();
    let mut out = Rendered::new();
    let debian = format!("{TEMPLATES}debian/");
    for template in renderer.names_under(&debian) {
        let path = template
            .strip_prefix(TEMPLATES)
            .expect("names_under keeps the prefix");
        out.insert(path.to_owned(), renderer.render(&template, values)?);
    }
    anyhow::ensure!(
        out.contains_key("debian/control") && out.contains_key("debian/rules"),
        "templates/{debian} has no control.hbs or rules.hbs: restore them from git"
    );
    out.insert(
        names::spec(&name),
        renderer.render(&format!("{TEMPLATES}rpm/spec"), values)?,
    );
    let pkgbuild = renderer.render(&format!("{TEMPLATES}arch/PKGBUILD"), values)?;
    out.insert(
        names::SRCINFO.to_owned(),
        crate::formats::srcinfo::from_pkgbuild(&pkgbuild)?,
    );
    out.insert(names::PKGBUILD.to_owned(), pkgbuild);
    Ok(out)
}
