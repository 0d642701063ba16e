//! The published `dist/<recipe>/` folders a repository is made from: each
//! checked against its `SHA256SUMS` and `manifest.json` before anything of
//! it is read, then sorted by kind (binary packages per format, Debian
//! source packages, source rpms). Reads only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::release::manifest::Manifest;
use crate::shared::diag::UsageError;

/// One verified dist folder and what it holds.
#[derive(Debug)]
pub(crate) struct Input {
    /// What the repository's manifest records of it.
    pub(crate) record: InputRecord,
    /// Binary packages: `.deb`, `.rpm` (not `.src.rpm`), `.pkg.tar.zst`.
    pub(crate) debs: Vec<PathBuf>,
    pub(crate) rpms: Vec<PathBuf>,
    pub(crate) arch: Vec<PathBuf>,
    /// Debian source packages (`source/*.dsc`) and source rpms.
    pub(crate) dscs: Vec<PathBuf>,
    pub(crate) srpms: Vec<PathBuf>,
}

/// A dist folder as the repository's manifest names it: by what it is, not
/// where it was, so the same inputs give the same manifest anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct InputRecord {
    pub(crate) recipe: String,
    pub(crate) package: String,
    pub(crate) version: String,
    pub(crate) release: String,
    pub(crate) source_date_epoch: i64,
    /// The build's no-op key, from its manifest.
    pub(crate) inputs_digest: String,
    /// sha256 of its `SHA256SUMS`, which names every file it published.
    pub(crate) sums_sha256: String,
}

/// Reads and checks the dist folder `dir`.
pub(crate) fn read(dir: &Path) -> Result<Input> {
    let shown = crate::shared::diag::display_path(dir);
    if !dir.join(crate::release::dist::SUMS).is_file() {
        bail!(UsageError(format!(
            "{} is not a published dist folder (no {}): give publish-repo the dist/<recipe>/ \
             folders that `cargo xtask build-dkms`, `build-config` or `build` publish",
            shown.display(),
            crate::release::dist::SUMS
        )));
    }
    let problems = crate::release::dist::verify(dir)?;
    if !problems.is_empty() {
        let shown_problems: Vec<_> = problems.iter().take(5).map(String::as_str).collect();
        bail!(
            "{} does not match its {} and {} ({} problems: {}{}): it changed after it was \
             published; build it again, or see every problem with `cargo xtask verify {}`",
            shown.display(),
            crate::release::dist::SUMS,
            crate::release::dist::MANIFEST,
            problems.len(),
            shown_problems.join("; "),
            if problems.len() > 5 { "; ..." } else { "" },
            shown.display()
        );
    }
    let Some(manifest) = Manifest::read(dir) else {
        bail!(UsageError(format!(
            "{}/{} is not the manifest of a rocm-patchkit build: give publish-repo the \
             dist/<recipe>/ folders the build commands publish",
            shown.display(),
            crate::release::dist::MANIFEST
        )));
    };
    let input = sort(dir, &manifest)?;
    if input.debs.is_empty()
        && input.rpms.is_empty()
        && input.arch.is_empty()
        && input.dscs.is_empty()
    {
        bail!(UsageError(format!(
            "{} holds no package (.deb, .rpm, .pkg.tar.zst) and no source/*.dsc: nothing to publish",
            shown.display()
        )));
    }
    Ok(input)
}

fn sort(dir: &Path, manifest: &Manifest) -> Result<Input> {
    let (sums_sha256, _) =
        crate::shared::hash::sha256_file_sized(&dir.join(crate::release::dist::SUMS))?;
    let mut input = Input {
        record: InputRecord {
            recipe: manifest.recipe.clone(),
            package: manifest.package.name.clone(),
            version: manifest.package.version.clone(),
            release: manifest.package.release.clone(),
            source_date_epoch: manifest.source_date_epoch,
            inputs_digest: manifest.inputs_digest.clone(),
            sums_sha256,
        },
        debs: Vec::new(),
        rpms: Vec::new(),
        arch: Vec::new(),
        dscs: Vec::new(),
        srpms: Vec::new(),
    };
    for name in manifest.outputs.keys() {
        let path = dir.join(name);
        let top = !name.contains('/');
        if top && name.ends_with(".src.rpm") {
            input.srpms.push(path);
        } else if top && name.ends_with(".rpm") {
            input.rpms.push(path);
        } else if top && name.ends_with(".deb") {
            input.debs.push(path);
        } else if top && name.contains(".pkg.tar.") {
            input.arch.push(path);
        } else if name.starts_with("source/") && name.ends_with(".dsc") {
            input.dscs.push(path);
        }
    }
    Ok(input)
}

/// Files of the same name from several inputs: once when their bytes are
/// the same, an error naming both when they differ (a repository cannot
/// serve two files under one name).
pub(crate) fn unique_by_name<'a>(
    files: impl IntoIterator<Item = &'a PathBuf>,
) -> Result<Vec<PathBuf>> {
    let mut seen: BTreeMap<String, (PathBuf, String)> = BTreeMap::new();
    for path in files {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let sha = crate::shared::hash::sha256_file(path)?;
        match seen.get(&name) {
            Some((first, first_sha)) if *first_sha != sha => bail!(UsageError(format!(
                "{} and {} are both named {name} but differ: a repository serves one file per \
                 name; rebuild one of them with another version or release",
                first.display(),
                path.display()
            ))),
            Some(_) => {}
            None => {
                seen.insert(name, (path.clone(), sha));
            }
        }
    }
    Ok(seen.into_values().map(|(path, _)| path).collect())
}
