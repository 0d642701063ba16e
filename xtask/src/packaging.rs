//! Packaging files of a DKMS recipe: the values the templates see, and every
//! file rendered from them (`dkms.conf`, the maintainer scripts, `debian/`,
//! the RPM spec, the PKGBUILD). Pure: no I/O beyond the renderer's templates.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::package::Scripts;
use crate::plan::Plan;
use crate::recipe::{Recipe, Source};
use crate::render::{Rendered, Renderer};

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
    /// sha256 of the rendered dkms.conf (the PKGBUILD lists it as a source).
    pub dkms_conf_sha256: Option<String>,
    /// The top-level entries of the DKMS tree (what `debian/install` ships).
    pub tree_entries: Vec<String>,
}

/// The values every template of a DKMS recipe is rendered with.
pub fn values(recipe: &Recipe, plan: &Plan, inputs: &Inputs) -> Result<Value> {
    let dkms = recipe
        .dkms
        .as_ref()
        .context("a dkms recipe needs a `[dkms]` table")?;
    let p = &recipe.package;
    let pkgname = format!("{}-dkms", p.name);
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
    if let Some(sha256) = &inputs.dkms_conf_sha256 {
        sources.push(json!({ "file": "dkms.conf", "sha256": sha256 }));
    }
    Ok(json!({
        "recipe_file": plan.recipe_file,
        "name": p.name,
        "version": p.version,
        "release": p.release,
        "pkgname": pkgname,
        "deb_version": format!("{}-{}", p.version, p.release),
        "summary": p.summary,
        "description": p.description.trim(),
        "license": p.license,
        "homepage": p.homepage,
        "maintainer": p.maintainer,
        "modules": dkms.modules,
        "make": dkms.make,
        "clean": dkms.clean,
        "kernel_regex": kernel_regex,
        "dkms_tree": dkms.tree,
        "tree_dir": if dkms.tree == "." { inputs.source_dir.clone() } else { format!("{}/{}", inputs.source_dir, dkms.tree) },
        "date_rfc2822": rfc2822(inputs.epoch),
        "source_line": source_line(&recipe.source),
        "patches": patches,
        "orig_tarball": inputs.orig_tarball,
        "source_dir": inputs.source_dir,
        "sources": sources,
        "install_entries": install_entries(&dkms.tree, &inputs.tree_entries),
    }))
}

/// Every packaging file of a DKMS recipe, by its path in the output. The
/// maintainer scripts are under `scripts/`, the packager's files under
/// `debian/`, `rpm/` and `arch/`.
pub fn render(renderer: &Renderer, values: &Value) -> Result<Rendered> {
    let mut values = values.clone();
    let pkgname = values["pkgname"].as_str().unwrap_or_default().to_owned();
    let mut out = BTreeMap::new();
    for name in [
        "scripts/postinst",
        "scripts/prerm",
        "scripts/rpm-post",
        "scripts/rpm-preun",
        "dkms.conf",
    ] {
        out.insert(name.to_owned(), renderer.render(name, &values)?);
    }
    values["post_script"] = Value::from(out["scripts/rpm-post"].trim_end());
    values["preun_script"] = Value::from(out["scripts/rpm-preun"].trim_end());
    for name in renderer.names_under("debian/") {
        out.insert(name.clone(), renderer.render(&name, &values)?);
    }
    out.insert(format!("debian/{pkgname}.dkms"), out["dkms.conf"].clone());
    out.insert(
        format!("rpm/{pkgname}.spec"),
        renderer.render("rpm/spec", &values)?,
    );
    out.insert(
        "arch/PKGBUILD".to_owned(),
        renderer.render("arch/PKGBUILD", &values)?,
    );
    Ok(out)
}

/// The maintainer scripts of DKMS package `name` `version`, as build-dkms
/// renders them from `templates/scripts/`: (deb postinst/prerm, rpm
/// %post/%preun).
pub fn dkms_scripts(
    templates: &std::path::Path,
    name: &str,
    version: &str,
) -> Result<(Scripts, Scripts)> {
    let renderer = Renderer::new(templates)?;
    let values = json!({ "name": name, "pkgname": crate::package::dkms::package_name(name), "version": version });
    let pair = |post: &str, pre: &str| -> Result<Scripts> {
        Ok(Scripts {
            post_install: Some(renderer.render(&format!("scripts/{post}"), &values)?),
            pre_remove: Some(renderer.render(&format!("scripts/{pre}"), &values)?),
        })
    };
    Ok((pair("postinst", "prerm")?, pair("rpm-post", "rpm-preun")?))
}

fn source_line(source: &Source) -> String {
    match source {
        Source::Git { url, commit, .. } => format!(
            "{url} at {}",
            commit.as_deref().unwrap_or("an unpinned commit")
        ),
        Source::Tarball { url, sha256, .. } => {
            format!("{url} (sha256 {})", sha256.as_deref().unwrap_or("unpinned"))
        }
        Source::Local { path, sha256, .. } => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            match sha256 {
                Some(sha256) => format!("the local source {name} (sha256 {sha256})"),
                None => format!("the local source {name}"),
            }
        }
    }
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

/// RFC 2822 date in UTC (`Thu, 01 Jan 2026 00:00:00 +0000`), as Debian
/// changelogs want it; no time zone of the machine leaks in.
pub fn rfc2822(epoch: i64) -> String {
    let days = epoch.div_euclid(86400);
    let secs = epoch.rem_euclid(86400);
    let (y, m, d) = civil_from_days(days);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(m - 1) as usize];
    format!(
        "{weekday}, {d:02} {month} {y} {:02}:{:02}:{:02} +0000",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The calendar year (UTC) of `epoch`.
pub fn year(epoch: i64) -> i64 {
    civil_from_days(epoch.div_euclid(86400)).0
}

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z.rem_euclid(146097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc2822_in_utc() {
        assert_eq!(rfc2822(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc2822(1767225600), "Thu, 01 Jan 2026 00:00:00 +0000");
        assert_eq!(rfc2822(1709251199), "Thu, 29 Feb 2024 23:59:59 +0000");
    }
}
