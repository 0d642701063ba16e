//! Packaging files of a DKMS recipe: the values the templates see, and every
//! file rendered from them (`dkms.conf`, the maintainer scripts, `debian/`,
//! the RPM spec, the PKGBUILD and its .SRCINFO). Pure: no I/O beyond the
//! renderer's templates.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::formats::{names, Format, Scripts};
use crate::input::plan::Plan;
use crate::input::recipe::Recipe;
use crate::release::render::{Rendered, Renderer};

/// What the rendered files need to know beyond the recipe.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// `SOURCE_DATE_EPOCH`: every date in every file.
    pub epoch: i64,
    /// The pristine upstream archive published beside the packages, its
    /// sha256, and the folder it unpacks into.
    pub orig_tarball: String,
    pub orig_sha256: String,
    pub source_dir: String,
    /// sha256 of each patch, in series order.
    pub patch_sha256: Vec<String>,
    /// The top-level entries of the DKMS tree (what `debian/install` ships).
    pub tree_entries: Vec<String>,
}

/// The values every template of a DKMS recipe is rendered with.
pub fn values(recipe: &Recipe, plan: &Plan, inputs: &Inputs) -> Result<Value> {
    let dkms = recipe
        .kind
        .dkms()
        .context("a dkms recipe needs a `[dkms]` table")?;
    let p = &recipe.package;
    let pkgname = crate::formats::names::dkms_package(&p.name);
    let kernel_regex = match (&recipe.target.kernel_regex, &recipe.target.kernel) {
        (Some(regex), _) => regex.clone(),
        (None, Some(range)) => range.to_regex(),
        (None, None) => ".*".to_owned(),
    };
    let patches: Vec<&str> = recipe
        .patches
        .iter()
        .map(|patch| patch.name.as_str())
        .collect();
    let mut sources = vec![json!({ "file": inputs.orig_tarball, "sha256": inputs.orig_sha256 })];
    for (name, sha256) in patches.iter().zip(&inputs.patch_sha256) {
        sources.push(json!({ "file": name, "sha256": sha256 }));
    }
    let relations =
        crate::formats::Relations::for_dkms_modules(dkms.modules.iter().map(|m| m.name.as_str()));
    Ok(json!({
        "recipe_file": plan.recipe_file,
        "provides": relations.provides,
        "conflicts": relations.conflicts,
        "replaces": relations.replaces,
        "name": p.name,
        "version": p.about.version,
        "release": p.about.release,
        "pkgname": pkgname,
        "deb_version": format!("{}-{}", p.about.version, p.about.release),
        "summary": p.about.summary,
        "description": p.about.description.trim(),
        "license": p.about.license,
        "homepage": p.about.homepage,
        "maintainer": p.about.maintainer,
        "modules": dkms.modules,
        "make": dkms.make,
        "clean": dkms.clean,
        "kernel_regex": kernel_regex,
        "dkms_tree": dkms.tree,
        "tree_dir": if dkms.tree == "." { inputs.source_dir.clone() } else { format!("{}/{}", inputs.source_dir, dkms.tree) },
        "patches": patches,
        "orig_tarball": inputs.orig_tarball,
        "source_dir": inputs.source_dir,
        "sources": sources,
        "install_entries": install_entries(&dkms.tree, &inputs.tree_entries),
    }))
}

/// Every packaging file of a DKMS recipe, by its path in the output. The
/// maintainer scripts are under `scripts/`, the packager's files under
/// `debian/`, `rpm/` and `arch/`. Each template is rendered once:
/// `dkms.conf` first, so that the PKGBUILD lists it with its sha256.
pub fn render(renderer: &Renderer, values: &Value) -> Result<Rendered> {
    let mut values = values.clone();
    let pkgname = values["pkgname"].as_str().unwrap_or_default().to_owned();
    let mut out = BTreeMap::new();
    let dkms_conf = renderer.render(names::DKMS_CONF, &values)?;
    if let Some(sources) = values["sources"].as_array_mut() {
        let sha256 = crate::shared::hash::sha256_hex(dkms_conf.as_bytes());
        sources.push(json!({ "file": names::DKMS_CONF, "sha256": sha256 }));
    }
    out.insert(names::DKMS_CONF.to_owned(), dkms_conf);
    for name in script_templates() {
        out.insert(name.clone(), renderer.render(&name, &values)?);
    }
    out.insert(
        names::arch_install(&pkgname),
        out["scripts/arch-install"].clone(),
    );
    values["post_script"] = Value::from(out["scripts/rpm-post"].trim_end());
    values["preun_script"] = Value::from(out["scripts/rpm-preun"].trim_end());
    for name in renderer.names_under("debian/") {
        out.insert(name.clone(), renderer.render(&name, &values)?);
    }
    out.insert(names::debian_dkms(&pkgname), out[names::DKMS_CONF].clone());
    out.insert(names::spec(&pkgname), renderer.render("rpm/spec", &values)?);
    out.insert(
        names::PKGBUILD.to_owned(),
        renderer.render("arch/PKGBUILD", &values)?,
    );
    out.insert(
        names::SRCINFO.to_owned(),
        crate::formats::srcinfo::from_pkgbuild(&out[names::PKGBUILD])?,
    );
    Ok(out)
}

/// `scripts/initramfs` and the maintainer scripts every format names.
fn script_templates() -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::from(["scripts/initramfs".to_owned()]);
    for format in Format::ALL {
        names.extend(
            format
                .get()
                .dkms_scripts()
                .names()
                .map(|name| format!("scripts/{name}")),
        );
    }
    names
}

/// The maintainer scripts of each format's DKMS package, from a rendering
/// holding `scripts/`: every format has its entry (none for the tarball,
/// which `dkms ldtarball` loads), since every format names its scripts.
pub(crate) fn scripts(rendered: &Rendered) -> Result<BTreeMap<Format, Scripts>> {
    Format::ALL
        .iter()
        .map(|format| Ok((*format, format.get().dkms_scripts().fill(rendered)?)))
        .collect()
}

/// The maintainer scripts of DKMS package `name` `version` in each format,
/// as build-dkms renders them from `templates/scripts/`.
pub fn dkms_scripts(
    templates: &std::path::Path,
    name: &str,
    version: &str,
) -> Result<BTreeMap<Format, Scripts>> {
    let renderer = Renderer::new(templates)?;
    let values = json!({ "name": name, "pkgname": crate::formats::names::dkms_package(name), "version": version });
    let mut rendered = Rendered::new();
    for name in script_templates() {
        rendered.insert(name.clone(), renderer.render(&name, &values)?);
    }
    scripts(&rendered)
}

/// `debian/install` lines: the DKMS tree's top-level entries, below the
/// tree folder of the patched source.
fn install_entries(tree: &str, entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| !matches!(e.as_str(), "debian" | ".pc" | ".patchkit" | "dkms.conf"))
        .map(|e| {
            if tree == "." {
                e.clone()
            } else {
                format!("{tree}/{e}")
            }
        })
        .collect()
}
