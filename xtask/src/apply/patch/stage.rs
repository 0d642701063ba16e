//! Building a patched tree atomically: extract the pinned source into
//! `<dest>.staging-<pid>`, apply the series there, write the state record,
//! and only then move the tree into place. A failure leaves `dest` as it was
//! and removes the staging folder.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use super::apply::{self, SeriesError};
use super::tree::Tree;
use super::{PatchInput, Tolerance};
use crate::apply::extract::{self, Limits, Selection};
use crate::apply::state::{self, FileId, State, TreeListing};
use crate::fetch::Fetched;
use crate::input::recipe::Recipe;
use crate::input::workspace::RemoveOnDrop;
use crate::shared::report::Reporter;

/// What `apply` did.
#[derive(Debug, Clone)]
pub struct Report {
    pub(crate) dest: PathBuf,
    pub state: State,
    /// Files in the tree (the manifest's length).
    pub(crate) files: usize,
}

/// A fresh staging folder beside a tree that is to be made
/// (`<name>.staging-<pid>`), taken only when the tree may be replaced, after
/// the staging of killed runs is removed; removed again when dropped, so
/// that a refusal leaves nothing behind, unless [`StagedTree::commit`] moved it
/// into place.
pub(crate) struct StagedTree {
    pub(crate) dir: PathBuf,
    cleanup: RemoveOnDrop,
}

impl StagedTree {
    pub(crate) fn for_tree(dest: &Path, name: &str) -> Result<StagedTree> {
        check_replaceable(dest)?;
        let parent = dest.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        crate::input::workspace::remove_stale_of(parent, name)?;
        let dir = parent.join(format!("{name}.staging-{}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("removing the stale {}", dir.display()))?;
        }
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(StagedTree {
            cleanup: RemoveOnDrop(Some(dir.clone())),
            dir,
        })
    }

    /// Moves the staged tree into place at `dest`, replacing what was there.
    pub(crate) fn commit(mut self, dest: &Path) -> Result<()> {
        swap_into_place(&self.dir, dest)?;
        self.cleanup.0 = None;
        Ok(())
    }
}

/// Where the tree an apply starts from comes from.
#[derive(Clone, Copy)]
enum Start<'a> {
    /// Extracted from `fetched.source`, writing at most these limits.
    Extract(Limits),
    /// A hard-link copy of the kept pristine tree.
    Pristine(&'a super::pristine::Pristine),
}

/// Extracts `fetched.source` (writing at most `limits`), applies
/// `fetched.patches` and moves the result to `dest` (replacing what was
/// there only after everything succeeded).
pub fn apply_recipe(
    recipe: &Recipe,
    fetched: &Fetched,
    dest: &Path,
    limits: Limits,
    tol: Tolerance,
    reporter: &Reporter,
) -> Result<Report> {
    apply(recipe, fetched, Start::Extract(limits), dest, tol, reporter)
}

/// [`apply_recipe`] starting from a hard-link copy of the kept `pristine`
/// tree of `fetched.source` instead of extracting it again.
pub(crate) fn apply_recipe_from(
    recipe: &Recipe,
    fetched: &Fetched,
    pristine: &super::pristine::Pristine,
    dest: &Path,
    tol: Tolerance,
    reporter: &Reporter,
) -> Result<Report> {
    let start = Start::Pristine(pristine);
    apply(recipe, fetched, start, dest, tol, reporter)
}

fn apply(
    recipe: &Recipe,
    fetched: &Fetched,
    start: Start,
    dest: &Path,
    tol: Tolerance,
    reporter: &Reporter,
) -> Result<Report> {
    let patches: Vec<PatchInput> = super::placed(recipe, &fetched.patches)?;
    let dest =
        std::path::absolute(dest).with_context(|| format!("resolving {}", dest.display()))?;
    let name = dest
        .file_name()
        .with_context(|| format!("{} names no folder", dest.display()))?
        .to_string_lossy()
        .into_owned();
    let staged = StagedTree::for_tree(&dest, &name)?;
    let staging = staged.dir.clone();

    let selection = Selection::of(&recipe.source);
    let mut manifest = fill(recipe, fetched, start, &staging, reporter)?;
    let mut tree = Tree::writing(&staging);
    let records = apply::series(&mut tree, &patches, tol).map_err(|e| {
        match e.downcast_ref::<SeriesError>() {
            Some(series) => anyhow!(
                "{series}\nnothing was written to {}; run `cargo xtask drift {} --against <source>` \
                 to see every hunk that no longer matches",
                dest.display(),
                recipe.name
            ),
            None => e.context(format!("applying the series of {}", recipe.name)),
        }
    })?;
    report(&records, reporter);
    update_manifest(&staging, &mut manifest, &records)?;
    let state = State {
        format: state::FORMAT,
        manifest_sha256: crate::shared::hash::sha256_hex(
            state::manifest_to_text(&manifest).as_bytes(),
        ),
        record: state::Record::Patches(records),
        recipe: state::RecipeRef {
            name: recipe.name.clone(),
            version: recipe.package.about.version.clone(),
        },
        source: extract::source_pin(&fetched.source, &selection),
        tolerance: state::ToleranceRecord { fuzz: tol.fuzz },
        tool: state::ToolRef::current(),
    };
    state::write(&staging, &state, &manifest)?;
    staged.commit(&dest)?;
    Ok(Report {
        dest,
        files: manifest.len(),
        state,
    })
}

/// Fills the empty `staging` folder with the pristine source: a hard-link
/// copy of the pristine tree, or extracted from `fetched.source`.
fn fill(
    recipe: &Recipe,
    fetched: &Fetched,
    start: Start,
    staging: &Path,
    reporter: &Reporter,
) -> Result<TreeListing> {
    let limits = match start {
        Start::Extract(limits) => limits,
        Start::Pristine(pristine) => {
            reporter.step(format!(
                "apply: linking {} into {}",
                pristine.dir.display(),
                staging.display()
            ));
            super::pristine::link_copy(&pristine.dir, staging)?;
            return Ok(pristine.manifest.clone());
        }
    };
    reporter.step(format!(
        "apply: extracting {} into {}",
        recipe.name,
        staging.display()
    ));
    extract::extract(
        &fetched.source,
        &Selection::of(&recipe.source),
        staging,
        limits,
        reporter,
    )
    .with_context(|| format!("extracting {}", recipe.source_origin()))
}

/// Reports each patch applied, and each hunk that did not land as written.
fn report(records: &[state::PatchRecord], reporter: &Reporter) {
    for record in records {
        reporter.step(format!(
            "apply: {} ({} files)",
            record.name,
            record.files.len()
        ));
        for h in &record.hunks {
            let at = format!(
                "{}: {} hunk #{} at line {} (offset {:+})",
                record.name, h.file, h.hunk, h.line, h.offset
            );
            if h.fuzz == 0 {
                reporter.step(format!("apply: {at}"));
            } else {
                reporter.warn(format!(
                    "{at} with fuzz {}: refresh the patch so it needs none",
                    h.fuzz
                ));
            }
        }
    }
}

/// Replaces the manifest entries of every file the series touched.
fn update_manifest(
    tree: &Path,
    manifest: &mut TreeListing,
    records: &[state::PatchRecord],
) -> Result<()> {
    let mut last = std::collections::BTreeMap::new();
    for record in records {
        for file in &record.files {
            last.insert(file.path.clone(), file.after.clone());
        }
    }
    for (path, after) in last {
        match after {
            None => {
                manifest.remove(&path);
            }
            Some(sha256) => {
                let full = tree.join(&path);
                let meta = std::fs::symlink_metadata(&full)
                    .with_context(|| format!("reading {}", full.display()))?;
                let mode = super::tree::mode_of(&meta);
                manifest.insert(
                    path,
                    FileId {
                        mode: 0o100000 | mode,
                        sha256,
                        size: meta.len(),
                    },
                );
            }
        }
    }
    Ok(())
}

/// Refuses a destination that holds anything but a tree of ours or
/// nothing: replacing it would delete the user's files. A tree of ours has
/// a state record this tool wrote (of any format: a tree of an older
/// version is replaced too), not merely a file at `.patchkit/state.json`.
pub(crate) fn check_replaceable(dest: &Path) -> Result<()> {
    replaceable(dest, false)
}

/// [`check_replaceable`] for a folder the user named (`apply --into`):
/// the record must also name the tree it is in, its listing's every path
/// present, so that a record copied into a folder of one's own (or another
/// tool's `.patchkit/`) never lets apply delete that folder.
pub(crate) fn check_into(dest: &Path) -> Result<()> {
    replaceable(dest, true)
}

fn replaceable(dest: &Path, names_tree: bool) -> Result<()> {
    let meta = match std::fs::symlink_metadata(dest) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dest.display())),
    };
    let why = if !meta.is_dir() {
        "is not a folder".to_owned()
    } else if std::fs::read_dir(dest)
        .with_context(|| format!("listing {}", dest.display()))?
        .next()
        .is_none()
    {
        return Ok(());
    } else {
        match ours(dest, names_tree) {
            Ok(()) => return Ok(()),
            Err(why) => format!("holds files that are not a tree applied by rocm-patchkit ({why})"),
        }
    };
    Err(crate::shared::diag::UsageError(format!(
        "{} {why}; apply replaces the whole folder, so it only replaces an empty folder or a tree \
         it made (with {}): give `--into` a new or empty folder, or move the files away first",
        dest.display(),
        state::state_path(Path::new("")).display()
    ))
    .into())
}

/// Whether `dest` holds a state record of this tool (and, with
/// `names_tree`, a listing whose every path is there); else why not.
fn ours(dest: &Path, names_tree: bool) -> std::result::Result<(), String> {
    let path = state::state_path(dest);
    let text = std::fs::read(&path).map_err(|_| format!("no readable {}", path.display()))?;
    let record: serde_json::Value =
        serde_json::from_slice(&text).map_err(|_| format!("{} is not JSON", path.display()))?;
    let tool = record.pointer("/tool/name").and_then(|n| n.as_str());
    if tool != Some(state::ToolRef::current().name.as_str())
        || !record.get("format").is_some_and(|f| f.is_u64())
    {
        return Err(format!("{} is not a state record", path.display()));
    }
    if !names_tree {
        return Ok(());
    }
    let listing = dest.join(state::DIR).join(state::MANIFEST_FILE);
    let bytes = std::fs::read(&listing).map_err(|_| format!("no {}", listing.display()))?;
    if record.get("manifest_sha256").and_then(|s| s.as_str())
        != Some(crate::shared::hash::sha256_hex(&bytes).as_str())
    {
        return Err(format!(
            "{} is not the listing its record gives",
            listing.display()
        ));
    }
    let manifest = state::manifest_from_text(&String::from_utf8_lossy(&bytes))
        .map_err(|e| format!("{}: {e}", listing.display()))?;
    let missing = manifest.keys().find(|rel| {
        rel.starts_with('/')
            || rel.split('/').any(|c| c == "..")
            || std::fs::symlink_metadata(dest.join(rel)).is_err()
    });
    match missing {
        Some(rel) => Err(format!(
            "its record lists `{}`, which is not there: the record is another tree's",
            rel.escape_debug()
        )),
        None => Ok(()),
    }
}

/// Moves `staging` to `dest`; an existing `dest` is moved aside first and
/// removed only once the new tree is in place.
fn swap_into_place(staging: &Path, dest: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dest).is_err() {
        return std::fs::rename(staging, dest)
            .with_context(|| format!("moving {} to {}", staging.display(), dest.display()));
    }
    let mut old = dest.as_os_str().to_owned();
    old.push(format!(".old-{}", std::process::id()));
    let old = PathBuf::from(old);
    std::fs::rename(dest, &old)
        .with_context(|| format!("moving the previous {} aside", dest.display()))?;
    if let Err(e) = std::fs::rename(staging, dest) {
        let _ = std::fs::rename(&old, dest);
        return Err(e)
            .with_context(|| format!("moving {} to {}", staging.display(), dest.display()));
    }
    std::fs::remove_dir_all(&old)
        .with_context(|| format!("removing the previous tree {}", old.display()))
}
