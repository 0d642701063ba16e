//! The record of an in-place rewrite, kept in the kernel library folder
//! (`.patchkit/inplace.json`) beside the originals (`.patchkit/originals/`):
//! per kernel file its sizes, sha256 before and after, sites and state.
//! Written whole to a temporary file, synced and renamed, so a reader sees
//! the old record or the new one; `reconcile` makes it agree with the files.
//! Read only as [`super::trust`] allows: a record that is not one this tool
//! wrote is refused whole, and nothing it names is read.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::files::{self, digest, Found};
use super::trust;
pub(crate) use super::trust::{original_of, DIR, FILE, ORIGINALS};

/// Bump when the record's meaning changes.
const FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FileState {
    /// The original is kept and the rewritten file may or may not have
    /// replaced it yet (a run killed at the rename): the file's sha256 says.
    Intent,
    /// The rewritten file is in place.
    Done,
}

/// One kernel file rewritten in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub(crate) state: FileState,
    pub(crate) size_before: u64,
    pub(crate) sha256_before: String,
    pub(crate) size_after: u64,
    pub(crate) sha256_after: String,
    /// `s_setreg_imm32_b32 hwreg(26, 0, 2), 2` instructions whose 2 became 0.
    pub(crate) sites: usize,
    /// The original, relative to the kernel library folder.
    pub(crate) original: String,
}

/// Every kernel file of one library rewritten in place, by path relative to
/// the library folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Record {
    pub(crate) format: u32,
    /// The program that wrote it (`rocm-patchkit 0.1.0`).
    pub(crate) tool: String,
    pub(crate) files: BTreeMap<String, Entry>,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            format: FORMAT,
            tool: format!("rocm-patchkit {}", env!("CARGO_PKG_VERSION")),
            files: BTreeMap::new(),
        }
    }
}

/// The record's path for the kernel library folder `kernels`.
pub(crate) fn path(kernels: &Path) -> PathBuf {
    kernels.join(DIR).join(FILE)
}

impl Record {
    /// The record of `kernels`, `None` when there is none; refused whole
    /// (an error naming it, nothing it names read) unless [`trust`] allows it.
    pub(crate) fn load(kernels: &Path) -> Result<Option<Record>> {
        match std::fs::symlink_metadata(kernels.join(DIR)) {
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                return Ok(None)
            }
            _ => {}
        }
        let library_uid = std::fs::metadata(kernels)
            .with_context(|| format!("reading {}", kernels.display()))?
            .uid();
        let dir = kernels.join(DIR);
        if !trust::our_dir(&dir, library_uid)? {
            return Ok(None);
        }
        trust::our_dir(&dir.join(ORIGINALS), library_uid)?;
        let path = path(kernels);
        let Some(bytes) = trust::read_record(&path, library_uid)? else {
            return Ok(None);
        };
        let record: Record = serde_json::from_slice(&bytes).map_err(|e| {
            trust::refusal(
                &path,
                &format!("it is not a rewrite record of this version ({e})"),
            )
        })?;
        if record.format != FORMAT {
            return Err(trust::refusal(
                &path,
                &format!(
                    "it has format {}, this program reads format {FORMAT}",
                    record.format
                ),
            ));
        }
        trust::check_entries(
            kernels,
            &path,
            record
                .files
                .iter()
                .map(|(k, e)| (k.as_str(), e.original.as_str())),
        )?;
        Ok(Some(record))
    }

    /// Writes the record for `kernels`: a temporary file synced, renamed over
    /// the record, then the folder synced. `.patchkit/` is made when missing
    /// and refused when it is not ours.
    pub(crate) fn save(&self, kernels: &Path) -> Result<()> {
        let path = path(kernels);
        ensure_dir(kernels, &kernels.join(DIR))?;
        let mut text = serde_json::to_string_pretty(self).context("serialising the record")?;
        text.push('\n');
        let tmp = files::staging_of(&path, files::TMP);
        files::write_synced(&tmp, text.as_bytes(), None)?;
        files::same_owner(&tmp, kernels)?;
        files::rename_synced(&tmp, &path)
    }
}

/// The folder `dir` of ours below `kernels` (`.patchkit/`, `originals/`
/// and its subfolders), made when missing (owned like the library), refused
/// when it is anything else (a symlink above all).
pub(crate) fn ensure_dir(kernels: &Path, dir: &Path) -> Result<PathBuf> {
    let library_uid = std::fs::metadata(kernels)
        .with_context(|| format!("reading {}", kernels.display()))?
        .uid();
    let rel = dir.strip_prefix(kernels).unwrap_or(dir);
    let mut at = kernels.to_path_buf();
    for part in rel.components() {
        at.push(part);
        if trust::our_dir(&at, library_uid)? {
            continue;
        }
        match std::fs::create_dir(&at) {
            Ok(()) => files::same_owner(&at, kernels)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", at.display())),
        }
        trust::our_dir(&at, library_uid)?;
    }
    Ok(at)
}

/// What a recorded file is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Now {
    /// As the rewrite left it.
    Rewritten,
    /// As it was before the rewrite.
    Original,
    /// Neither (a package upgrade, a reinstall, an edit), gone, or not a
    /// regular file.
    Changed,
}

/// Compares a file with its entry (hashed only when of a recorded size).
pub(crate) fn now(kernels: &Path, rel: &str, entry: &Entry) -> Result<Now> {
    let found = digest(&kernels.join(rel), &[entry.size_after, entry.size_before])?;
    Ok(match found {
        Found::File { sha256, size }
            if size == entry.size_after && sha256 == entry.sha256_after =>
        {
            Now::Rewritten
        }
        Found::File { sha256, size }
            if size == entry.size_before && sha256 == entry.sha256_before =>
        {
            Now::Original
        }
        _ => Now::Changed,
    })
}

/// Whether the kept original of `entry` is there as recorded.
pub(crate) fn original_kept(kernels: &Path, entry: &Entry) -> Result<bool> {
    let found = digest(&kernels.join(&entry.original), &[entry.size_before])?;
    Ok(matches!(found, Found::File { sha256, .. } if sha256 == entry.sha256_before))
}

/// What the record of a kernel library says about it, for doctor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// No record (or an empty one).
    None,
    /// Every recorded file is as the rewrite left it.
    Rewritten { files: usize, sites: usize },
    /// A record whose files are not all as the rewrite left it: these.
    Stale { changed: Vec<String> },
    /// A record (or a folder of ours) refused, and why: nothing it names
    /// was read.
    Refused { why: String },
}

/// Reads the record of `kernels` and checks every file it names by sha256.
pub(crate) fn status(kernels: &Path) -> Status {
    let record = match Record::load(kernels) {
        Ok(Some(r)) if !r.files.is_empty() => r,
        Ok(_) => return Status::None,
        Err(e) => {
            return Status::Refused {
                why: format!("{e:#}"),
            }
        }
    };
    let mut changed = Vec::new();
    let mut sites = 0;
    for (rel, entry) in &record.files {
        sites += entry.sites;
        if !matches!(now(kernels, rel, entry), Ok(Now::Rewritten)) {
            changed.push(rel.clone());
        }
    }
    if changed.is_empty() {
        Status::Rewritten {
            files: record.files.len(),
            sites,
        }
    } else {
        Status::Stale { changed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_record_is_none_and_a_forged_one_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(status(&dir.path().join("missing")), Status::None);
        assert_eq!(status(dir.path()), Status::None);
        let mut record = Record::default();
        record.save(dir.path()).unwrap();
        assert_eq!(status(dir.path()), Status::None);
        record.files.insert(
            "../outside.co".to_owned(),
            Entry {
                state: FileState::Done,
                size_before: 1,
                sha256_before: "a".repeat(64),
                size_after: 1,
                sha256_after: "b".repeat(64),
                sites: 1,
                original: original_of("../outside.co"),
            },
        );
        record.save(dir.path()).unwrap();
        match status(dir.path()) {
            Status::Refused { why } => {
                assert!(
                    why.contains("inplace.json") && why.contains("`..`"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
