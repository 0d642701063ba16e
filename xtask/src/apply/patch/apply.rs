//! Applying patches to a [`Tree`]: one patch all or nothing, a series in
//! order, and the three verdicts (applied, not applied, conflicts) of a
//! series checked against a tree without writing to it. A file whose hunks
//! do not land is compared by git blob id with the patch's `index` line, to
//! say whether the patch was written for another version of the file or is
//! already in it.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use super::hunk::{self, HunkFailure, HunkNote, Tolerance};
use super::tree::{self, Entry, Tree};
use super::PatchInput;
use crate::apply::state::{FileChange, HunkRecord, PatchRecord};
use crate::fetch::diff::{self, FilePatch};
use crate::shared::hash::sha256_hex;

/// Why one file of a patch could not be changed.
#[derive(Debug, Clone, Serialize)]
pub struct FileFailure {
    pub file: String,
    /// What was wrong when it was not the hunks (missing file, path refused).
    pub(crate) problem: Option<String>,
    /// What the file's git blob id says, when the patch carries `index` ids.
    pub(crate) blob: Option<Box<BlobNote>>,
    pub hunks: Vec<HunkFailure>,
}

impl std::fmt::Display for FileFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "file `{}`: ", self.file)?;
        if let Some(blob) = &self.blob {
            write!(f, "{blob}; ")?;
        }
        match (&self.problem, self.hunks.first()) {
            (Some(p), _) => write!(f, "{p}"),
            (None, Some(h)) => write!(f, "{h}"),
            (None, None) => write!(f, "does not apply"),
        }
    }
}

/// Why a file's hunks do not land, read from git blob ids: the patch's
/// `index <pre>..<post>` line against the blob id of the file in the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum BlobNote {
    /// The file is neither the patch's pre-image nor its post-image.
    OtherVersion {
        file: String,
        expected: String,
        found: String,
    },
    /// The file is the patch's post-image: the change is already there.
    AlreadyApplied { file: String, post: String },
}

impl std::fmt::Display for BlobNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |id: &str| format!("{}…", &id[..id.len().min(12)]);
        match self {
            BlobNote::OtherVersion {
                file,
                expected,
                found,
            } => write!(
                f,
                "this patch was written for another version of {file} (expected blob {}, \
                 the tree has {}): it needs a backport for this series, not an offset",
                short(expected),
                short(found)
            ),
            BlobNote::AlreadyApplied { file, post } => write!(
                f,
                "the change is already there: {file} is the patch's post-image (blob {}); \
                 drop the patch from this series",
                short(post)
            ),
        }
    }
}

/// The git blob id (`git hash-object`) of `data`.
pub fn blob_id(data: &[u8]) -> String {
    git2::Oid::hash_object(git2::ObjectType::Blob, data)
        .map(|oid| oid.to_string())
        .unwrap_or_default()
}

/// What the blob id of `data` says against the patch's `index` ids; `None`
/// when the patch has none, or the file is the pre-image it was written for.
fn blob_note(fp: &FilePatch, data: &[u8]) -> Option<Box<BlobNote>> {
    let (pre, post) = fp.index.as_ref()?;
    let found = blob_id(data);
    let file = short_path(fp.display_path());
    if found.starts_with(post.as_str()) && !found.starts_with(pre.as_str()) {
        Some(Box::new(BlobNote::AlreadyApplied { file, post: found }))
    } else if !found.starts_with(pre.as_str()) {
        Some(Box::new(BlobNote::OtherVersion {
            file,
            expected: pre.clone(),
            found,
        }))
    } else {
        None
    }
}

/// The last two components of a path (`amdkfd/cwsr_trap_handler.h`), as
/// people name a kernel file.
fn short_path(path: &str) -> String {
    let parts: Vec<&str> = path.rsplitn(3, '/').collect();
    match parts.as_slice() {
        [name, dir, _] | [name, dir] => format!("{dir}/{name}"),
        _ => path.to_owned(),
    }
}

/// What applying one patch changes, before it is committed to the tree.
pub(crate) struct Applied {
    pub(crate) changes: BTreeMap<String, Option<Entry>>,
    pub(crate) files: Vec<FileChange>,
    pub(crate) notes: Vec<HunkRecord>,
}

/// Works out the changes `files` make to `tree`, all or nothing.
pub(crate) fn patch(
    tree: &Tree,
    files: &[FilePatch],
    tol: Tolerance,
) -> Result<Applied, FileFailure> {
    let mut changes: BTreeMap<String, Option<Entry>> = BTreeMap::new();
    let mut before: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut notes = Vec::new();
    for fp in files {
        patch_file(tree, fp, tol, &mut changes, &mut before, &mut notes)?;
    }
    let files = changes
        .iter()
        .map(|(path, entry)| FileChange {
            path: path.clone(),
            before: before.get(path).cloned().flatten(),
            after: entry.as_ref().map(|e| sha256_hex(&e.data)),
        })
        .collect();
    Ok(Applied {
        changes,
        files,
        notes,
    })
}

/// The change of one file of a patch worked out onto `changes` (what the
/// earlier files of the patch made is what it reads), with where its hunks
/// landed in `notes`.
fn patch_file(
    tree: &Tree,
    fp: &FilePatch,
    tol: Tolerance,
    changes: &mut BTreeMap<String, Option<Entry>>,
    before: &mut BTreeMap<String, Option<String>>,
    notes: &mut Vec<HunkRecord>,
) -> Result<(), FileFailure> {
    let fail = |problem: String| failure(fp, problem);
    for p in [&fp.old, &fp.new].into_iter().flatten() {
        tree::confine(p).map_err(|e| fail(format!("{e:#}")))?;
    }
    let old_entry = starting_entry(tree, fp, changes, before)?;
    if let Some(mode) = fp.new_mode.filter(|m| m & 0o170000 != 0o100000) {
        return Err(fail(format!(
            "mode {mode:o} (a symlink or submodule) is not supported; only regular files"
        )));
    }
    let empty = Vec::new();
    let old_data = old_entry.as_ref().map_or(&empty, |e| &e.data);
    let (data, file_notes) =
        hunk::apply(old_data, &fp.hunks, tol).map_err(|hunks| FileFailure {
            file: fp.display_path().to_owned(),
            problem: None,
            blob: old_entry.as_ref().and_then(|e| blob_note(fp, &e.data)),
            hunks,
        })?;
    notes.extend(file_notes.into_iter().map(|n: HunkNote| HunkRecord {
        file: fp.display_path().to_owned(),
        hunk: n.hunk,
        line: n.line,
        offset: n.offset,
        fuzz: n.fuzz,
    }));
    match &fp.new {
        None if !data.is_empty() => {
            return Err(fail(
                "the file is to be deleted but keeps content the patch does not remove".into(),
            ))
        }
        None => {}
        Some(new) => {
            let mode = fp
                .new_mode
                .map(|m| if m & 0o111 != 0 { 0o755 } else { 0o644 })
                .or(old_entry.as_ref().map(|e| e.mode))
                .unwrap_or(0o644);
            changes.insert(new.clone(), Some(Entry { data, mode }));
        }
    }
    if let Some(old) = &fp.old {
        if fp.new.as_deref() != Some(old.as_str()) && !fp.copy {
            changes.insert(old.clone(), None);
        }
    }
    Ok(())
}

/// The file a change starts from (`None` for a new file): the old file must
/// exist, and the new one must not unless it is the old one. What each file
/// held first goes into `before`.
fn starting_entry(
    tree: &Tree,
    fp: &FilePatch,
    changes: &BTreeMap<String, Option<Entry>>,
    before: &mut BTreeMap<String, Option<String>>,
) -> Result<Option<Entry>, FileFailure> {
    let mut current = |rel: &str| {
        let entry = match changes.get(rel) {
            Some(e) => Ok(e.clone()),
            None => tree.read(rel),
        }
        .map_err(|e| failure(fp, format!("{e:#}")))?;
        before
            .entry(rel.to_owned())
            .or_insert_with(|| entry.as_ref().map(|e| sha256_hex(&e.data)));
        Ok::<_, FileFailure>(entry)
    };
    let old_entry = match &fp.old {
        Some(old) => match current(old)? {
            Some(e) => Some(e),
            None => return Err(failure(fp, format!("`{old}` does not exist in the tree"))),
        },
        None => None,
    };
    if let Some(new) = &fp.new {
        let existing = current(new)?;
        if existing.is_some() && fp.old.as_deref() != Some(new.as_str()) {
            return Err(failure(fp, format!("`{new}` already exists in the tree")));
        }
    }
    Ok(old_entry)
}

/// A file of a patch refused for `problem`, before any hunk was tried.
fn failure(fp: &FilePatch, problem: String) -> FileFailure {
    FileFailure {
        file: fp.display_path().to_owned(),
        problem: Some(problem),
        blob: None,
        hunks: Vec::new(),
    }
}

/// A patch of a series that did not apply.
#[derive(Debug)]
pub(crate) struct SeriesError {
    pub(crate) patch: String,
    pub(crate) failure: FileFailure,
}

impl std::fmt::Display for SeriesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "patch {} does not apply: {}", self.patch, self.failure)
    }
}

impl std::error::Error for SeriesError {}

/// Applies `patches` in order and commits each to `tree`; stops at the first
/// that does not apply.
pub fn series(tree: &mut Tree, patches: &[PatchInput], tol: Tolerance) -> Result<Vec<PatchRecord>> {
    let mut records = Vec::new();
    for input in patches {
        let files = input.parse()?;
        let tol = tol.with_fuzz_at_least(input.fuzz);
        let applied = patch(tree, &files, tol).map_err(|failure| SeriesError {
            patch: input.name.clone(),
            failure,
        })?;
        check_produces(tree, input, &files, &applied)?;
        tree.commit(applied.changes)?;
        records.push(PatchRecord {
            name: input.name.clone(),
            sha256: input.sha256.clone(),
            files: applied.files,
            hunks: applied.notes,
        });
    }
    Ok(records)
}

/// The recipe's `produces` against what the patch left: every pinned file
/// must have its pinned git blob id. A mismatch names the file, both ids
/// and the hunks that changed that file (with where each landed).
pub(crate) fn check_produces(
    tree: &Tree,
    input: &PatchInput,
    files: &[FilePatch],
    applied: &Applied,
) -> Result<()> {
    for (path, pinned) in &input.produces {
        let entry = match applied.changes.get(path) {
            Some(e) => e.clone(),
            None => tree.read(path)?,
        };
        let found = entry.as_ref().map(|e| blob_id(&e.data));
        if found.as_deref() == Some(pinned.as_str()) {
            continue;
        }
        let hunks: Vec<String> = files
            .iter()
            .filter(|fp| fp.new.as_deref() == Some(path.as_str()))
            .flat_map(|fp| fp.hunks.iter().enumerate())
            .map(|(i, h)| {
                let line = applied
                    .notes
                    .iter()
                    .find(|n| n.file == *path && n.hunk == i + 1)
                    .map_or(String::new(), |n| format!(", landed at line {}", n.line));
                format!("hunk {} `{}`{line}", i + 1, h.header.trim_end())
            })
            .collect();
        let what = match &found {
            Some(id) => format!("came out as blob {id}"),
            None => "is not in the tree".to_owned(),
        };
        anyhow::bail!(
            "patch {}: `{path}` {what}, not the blob {pinned} the recipe's `produces` pins; \
             the patch's {} of that file: {}. The fetched diff is not the pinned fix (a changed \
             hunk), or the tree is not the one it was pinned for; nothing was applied",
            input.name,
            if hunks.len() == 1 { "hunk" } else { "hunks" },
            if hunks.is_empty() {
                "none (it does not change the file)".to_owned()
            } else {
                hunks.join("; ")
            }
        );
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PatchState {
    /// The tree already carries the patch (it reverse-applies cleanly).
    Applied,
    /// The patch applies to the tree.
    NotApplied,
    /// Neither: upstream moved the code under the patch.
    Conflicts,
}

impl PatchState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PatchState::Applied => "applied",
            PatchState::NotApplied => "not applied",
            PatchState::Conflicts => "conflicts",
        }
    }
}

/// The verdict on one patch of a series, with the hunks that failed.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub(crate) patch: String,
    pub verdict: PatchState,
    /// Forward failures, when the verdict is `conflicts`.
    pub failures: Vec<FileFailure>,
    /// Hunks that would land away from their stated line (or with fuzz),
    /// when the verdict is `not applied`.
    pub(crate) placements: Vec<HunkRecord>,
}

/// Checks each patch of a series against the tree at `root` without writing:
/// a patch that applies is taken as applied for the ones after it.
pub fn check(root: &std::path::Path, patches: &[PatchInput], tol: Tolerance) -> Result<Vec<Check>> {
    let mut tree = Tree::dry(root);
    let mut checks = Vec::new();
    for input in patches {
        let files = input.parse()?;
        let tol = tol.with_fuzz_at_least(input.fuzz);
        let (verdict, failures, placements) = match patch(&tree, &files, tol) {
            Ok(applied) => {
                tree.commit(applied.changes)?;
                (PatchState::NotApplied, Vec::new(), applied.notes)
            }
            Err(forward) => {
                let reversed: Vec<FilePatch> = files.iter().rev().map(|f| f.reversed()).collect();
                match patch(&tree, &reversed, tol) {
                    Ok(_) => (PatchState::Applied, Vec::new(), Vec::new()),
                    Err(_) => (PatchState::Conflicts, vec![forward], Vec::new()),
                }
            }
        };
        checks.push(Check {
            patch: input.name.clone(),
            verdict,
            failures,
            placements,
        });
    }
    Ok(checks)
}

/// Parses a patch, naming it in the error.
pub(super) fn parse_named(name: &str, bytes: &[u8]) -> Result<Vec<FilePatch>> {
    use anyhow::Context;
    diff::parse(bytes).with_context(|| format!("parsing patch {name}"))
}
