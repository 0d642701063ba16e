//! Verification of a patched tree against its state record ([`tree`]): patch
//! by patch applied, not applied or changed after it was applied, and every
//! file changed that no patch touched; or, for a tree without a record,
//! which patches of a series it already carries ([`tree_against_series`]).
//! Reads only; `dist/` verification belongs beside these.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::apply::patch::scan::scan;
use crate::apply::patch::{self, PatchInput, Tolerance};
use crate::apply::state::{self, TreeListing};
use crate::shared::hash::memo::Memo;
use crate::shared::report::Reporter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PatchStatus {
    /// Every file the patch touched holds its recorded hash.
    Applied,
    /// Every file the patch touched is back to its hash before the patch.
    NotApplied,
    /// Some file the patch touched holds neither.
    ChangedAfterApply,
}

impl PatchStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PatchStatus::Applied => "applied",
            PatchStatus::NotApplied => "not applied",
            PatchStatus::ChangedAfterApply => "changed after apply",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PatchResult {
    pub(crate) patch: String,
    pub(crate) status: PatchStatus,
    /// Files that do not hold the hash the record gives for them.
    pub(crate) files: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Change {
    Added,
    Removed,
    Modified,
}

/// A file that differs from the record although no patch touched it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ExtraChange {
    pub(crate) path: String,
    pub(crate) change: Change,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TreeReport {
    pub(crate) tree: PathBuf,
    pub(crate) recipe: state::RecipeRef,
    pub(crate) source: state::SourcePin,
    pub(crate) patches: Vec<PatchResult>,
    pub(crate) extra: Vec<ExtraChange>,
    /// True only when the tree is exactly as recorded.
    pub(crate) ok: bool,
}

/// Checks `root` against its `.patchkit/` record, hashing every file once
/// (the digests `memo` holds are not taken again).
pub(crate) fn tree(root: &Path, memo: &Memo, reporter: &Reporter) -> Result<TreeReport> {
    let Some((record, manifest)) = state::read(root)? else {
        bail!(
            "{} has no state record ({}); pass `--recipe <recipe>` to check which patches it carries",
            root.display(),
            state::state_path(root).display()
        );
    };
    let current = scan(root, memo, reporter)?;
    let sha = |m: &TreeListing, p: &str| m.get(p).map(|id| id.sha256.clone());
    let mut touched = BTreeSet::new();
    let mut patches = Vec::new();
    for p in record.patches() {
        let (mut reverted, mut changed) = (Vec::new(), Vec::new());
        for f in &p.files {
            touched.insert(f.path.clone());
            let now = sha(&current, &f.path);
            if now == sha(&manifest, &f.path) {
                continue;
            }
            if now == f.before {
                reverted.push(f.path.clone());
            } else {
                changed.push(f.path.clone());
            }
        }
        let status = if reverted.is_empty() && changed.is_empty() {
            PatchStatus::Applied
        } else if changed.is_empty() && reverted.len() == p.files.len() {
            PatchStatus::NotApplied
        } else {
            PatchStatus::ChangedAfterApply
        };
        let mut files = changed;
        files.extend(reverted);
        files.sort();
        patches.push(PatchResult {
            patch: p.name.clone(),
            status,
            files,
        });
    }
    let mut extra = Vec::new();
    let paths: BTreeSet<&String> = manifest.keys().chain(current.keys()).collect();
    for path in paths {
        if touched.contains(path.as_str()) {
            continue;
        }
        let change = match (manifest.get(path), current.get(path)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(_), Some(_)) => Change::Modified,
            (Some(_), None) => Change::Removed,
            (None, _) => Change::Added,
        };
        extra.push(ExtraChange {
            path: path.clone(),
            change,
        });
    }
    let ok = extra.is_empty() && patches.iter().all(|p| p.status == PatchStatus::Applied);
    Ok(TreeReport {
        tree: root.to_path_buf(),
        recipe: record.recipe,
        source: record.source,
        patches,
        extra,
        ok,
    })
}

/// For a tree without a record (a user's kernel source): whether it already
/// carries each patch of `series`, would take it, or conflicts.
pub(crate) fn tree_against_series(
    root: &Path,
    series: &[PatchInput],
    tol: Tolerance,
) -> Result<Vec<patch::Check>> {
    if !root.is_dir() {
        bail!("{} is not a folder", root.display());
    }
    patch::apply::check(root, series, tol)
}
