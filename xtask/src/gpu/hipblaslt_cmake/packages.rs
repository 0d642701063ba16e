//! The binary packages of a patched hipBLASLt: the staging root's install
//! prefix as `.deb`, `.rpm` and Arch packages, under a name and a prefix
//! of their own so that they install beside the distribution's or AMD's
//! `hipblaslt` without touching it.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::formats::{FileTree, PackageMeta};
use crate::input::recipe::Recipe;

/// Where every patchkit build of hipBLASLt installs: never below
/// `/opt/rocm` (AMD's packages) or `/usr` (the distribution's).
pub(crate) const PREFIX_ROOT: &str = "/opt/rocm-patchkit";

/// `/opt/rocm-patchkit/hipblaslt-<version>`: one prefix per version, so
/// builds for several ROCm releases can sit side by side.
pub(crate) fn install_prefix(recipe: &Recipe) -> String {
    format!("{PREFIX_ROOT}/hipblaslt-{}", recipe.package.about.version)
}

/// The package metadata of a recipe's binary packages.
pub(crate) fn meta(recipe: &Recipe) -> PackageMeta {
    let p = &recipe.package;
    let patches: Vec<&str> = recipe.patches.iter().map(|x| x.name.as_str()).collect();
    PackageMeta {
        name: p.name.clone(),
        source: None,
        about: crate::formats::About {
            version: p.about.version.clone(),
            release: p.about.release.clone(),
            summary: p.about.summary.clone(),
            description: format!(
                "{}\n\nInstalled in {} so that it never replaces the hipblaslt of the \
                         distribution or of AMD's packages; programs use it only when pointed \
                         at it (LD_LIBRARY_PATH={0}/lib).",
                p.about.description.trim(),
                install_prefix(recipe)
            ),
            license: p.about.license.clone(),
            homepage: Some(
                p.about
                    .homepage
                    .clone()
                    .unwrap_or_else(|| "https://github.com/ROCm/rocm-libraries".to_owned()),
            ),
            maintainer: p.about.maintainer.clone(),
        },
        depends: Vec::new(),
        changes: vec![format!(
            "Built by rocm-patchkit from recipe {} with {}.",
            recipe.name,
            if patches.is_empty() {
                "no patches".to_owned()
            } else {
                patches.join(", ")
            }
        )],
        copyright: vec!["Advanced Micro Devices, Inc.".to_owned()],
        relations: Default::default(),
    }
}

/// The installed files below `prefix` in the staging `root`, refusing a
/// root where the install wrote anywhere else (those files would be lost).
pub(crate) fn tree(root: &Path, prefix: &str) -> Result<FileTree> {
    let rel = prefix.trim_matches('/');
    let mut dir = root.to_path_buf();
    let mut shown = String::new();
    for part in rel.split('/') {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let name = entry?.file_name();
            if name.to_str() != Some(part) {
                bail!(
                    "the install wrote {shown}/{} outside the prefix {prefix}; the packages hold \
                     only the prefix, so fix the install rules (see the build log)",
                    name.to_string_lossy()
                );
            }
        }
        dir.push(part);
        shown.push('/');
        shown.push_str(part);
    }
    if !dir.is_dir() {
        bail!(
            "the install put nothing into {prefix} (looked in {}); see the build log",
            dir.display()
        );
    }
    FileTree::from_dir(&dir, rel)
}
