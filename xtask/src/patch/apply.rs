//! Applying patches to a [`Tree`]: one patch all or nothing, a series in
//! order, and the three verdicts (applied, not applied, conflicts) of a
//! series checked against a tree without writing to it.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use super::hunk::{self, HunkFailure, HunkNote, Tolerance};
use super::parse::{self, FilePatch};
use super::tree::{self, Entry, Tree};
use super::PatchInput;
use crate::state::{sha256_hex, FileChange, HunkRecord, PatchRecord};

/// Why one file of a patch could not be changed.
#[derive(Debug, Clone, Serialize)]
pub struct FileFailure {
    pub file: String,
    /// What was wrong when it was not the hunks (missing file, path refused).
    pub problem: Option<String>,
    pub hunks: Vec<HunkFailure>,
}

impl std::fmt::Display for FileFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "file `{}`: ", self.file)?;
        match (&self.problem, self.hunks.first()) {
            (Some(p), _) => write!(f, "{p}"),
            (None, Some(h)) => write!(f, "{h}"),
            (None, None) => write!(f, "does not apply"),
        }
    }
}

/// What applying one patch changes, before it is committed to the tree.
pub struct Applied {
    pub changes: BTreeMap<String, Option<Entry>>,
    pub files: Vec<FileChange>,
    pub notes: Vec<HunkRecord>,
}

/// Works out the changes `files` make to `tree`, all or nothing.
pub fn patch(tree: &Tree, files: &[FilePatch], tol: Tolerance) -> Result<Applied, FileFailure> {
    let mut changes: BTreeMap<String, Option<Entry>> = BTreeMap::new();
    let mut before: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut notes = Vec::new();
    for fp in files {
        let read = |changes: &BTreeMap<String, Option<Entry>>, rel: &str| match changes.get(rel) {
            Some(e) => Ok(e.clone()),
            None => tree.read(rel),
        };
        let fail = |problem: String| FileFailure {
            file: fp.display_path().to_owned(),
            problem: Some(problem),
            hunks: Vec::new(),
        };
        for p in [&fp.old, &fp.new].into_iter().flatten() {
            tree::confine(p).map_err(|e| fail(format!("{e:#}")))?;
        }
        let mut current = |changes: &BTreeMap<String, Option<Entry>>, rel: &str| {
            let entry = read(changes, rel).map_err(|e| fail(format!("{e:#}")))?;
            before
                .entry(rel.to_owned())
                .or_insert_with(|| entry.as_ref().map(|e| sha256_hex(&e.data)));
            Ok::<_, FileFailure>(entry)
        };
        let old_entry = match &fp.old {
            Some(old) => match current(&changes, old)? {
                Some(e) => Some(e),
                None => return Err(fail(format!("`{old}` does not exist in the tree"))),
            },
            None => None,
        };
        if let Some(new) = &fp.new {
            let existing = current(&changes, new)?;
            if existing.is_some() && fp.old.as_deref() != Some(new.as_str()) {
                return Err(fail(format!("`{new}` already exists in the tree")));
            }
        }
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
                hunks,
            })?;
        notes.extend(file_notes.into_iter().map(|n: HunkNote| HunkRecord {
            file: fp.display_path().to_owned(),
            hunk: n.hunk,
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

/// A patch of a series that did not apply.
#[derive(Debug)]
pub struct SeriesError {
    pub patch: String,
    pub failure: FileFailure,
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
        let applied = patch(tree, &files, tol).map_err(|failure| SeriesError {
            patch: input.name.clone(),
            failure,
        })?;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The tree already carries the patch (it reverse-applies cleanly).
    Applied,
    /// The patch applies to the tree.
    NotApplied,
    /// Neither: upstream moved the code under the patch.
    Conflicts,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Applied => "applied",
            Verdict::NotApplied => "not applied",
            Verdict::Conflicts => "conflicts",
        }
    }
}

/// The verdict on one patch of a series, with the hunks that failed.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub patch: String,
    pub verdict: Verdict,
    /// Forward failures, when the verdict is `conflicts`.
    pub failures: Vec<FileFailure>,
}

/// Checks each patch of a series against the tree at `root` without writing:
/// a patch that applies is taken as applied for the ones after it.
pub fn check(root: &std::path::Path, patches: &[PatchInput], tol: Tolerance) -> Result<Vec<Check>> {
    let mut tree = Tree::dry(root);
    let mut checks = Vec::new();
    for input in patches {
        let files = input.parse()?;
        let (verdict, failures) = match patch(&tree, &files, tol) {
            Ok(applied) => {
                tree.commit(applied.changes)?;
                (Verdict::NotApplied, Vec::new())
            }
            Err(forward) => {
                let reversed: Vec<FilePatch> = files.iter().rev().map(|f| f.reversed()).collect();
                match patch(&tree, &reversed, tol) {
                    Ok(_) => (Verdict::Applied, Vec::new()),
                    Err(_) => (Verdict::Conflicts, vec![forward]),
                }
            }
        };
        checks.push(Check {
            patch: input.name.clone(),
            verdict,
            failures,
        });
    }
    Ok(checks)
}

/// Parses a patch, naming it in the error.
pub(super) fn parse_named(name: &str, bytes: &[u8]) -> Result<Vec<FilePatch>> {
    use anyhow::Context;
    parse::parse(bytes).with_context(|| format!("parsing patch {name}"))
}
