//! `rewrite-hipblaslt --undo`: every recorded file of a library put back
//! from its kept original, byte for byte, then the record and the kept
//! originals removed (and nothing else of `.patchkit/`: a file there that is
//! not ours stays, said). Refuses, changing nothing, a record [`super::trust`]
//! does not allow, a file changed since its rewrite or an original not as
//! recorded.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::files::{self, UNDO};
use super::record::{self, Now, Record};
use super::{lock, Options};
use crate::shared::report::Reporter;

/// What `undo` did (or, with `check`, would do) to one library.
#[derive(Debug, Default)]
pub(crate) struct Undone {
    /// Files put back as they were.
    pub(crate) restored: Vec<String>,
    /// Recorded files already as they were.
    pub(crate) already: usize,
    /// Whether the library had a record at all.
    pub(crate) had_record: bool,
    /// `.patchkit/` when it stays because it holds files not ours.
    pub(crate) kept: Option<PathBuf>,
}

/// Puts every recorded file of `kernels` back, byte for byte, and removes
/// the record and the kept originals; refuses, changing nothing, when a
/// file changed since its rewrite or an original is not as recorded.
pub(crate) fn undo(kernels: &Path, opts: Options, reporter: &Reporter) -> Result<Undone> {
    let _lock = lock::lock(kernels, opts.check, reporter)?;
    let mut done = Undone::default();
    let Some(mut record) = Record::load(kernels)? else {
        return Ok(done);
    };
    done.had_record = true;
    if !opts.check {
        files::ensure_writable(kernels)?;
        files::clean_staging(kernels)?;
    }
    let restore = to_restore(kernels, &record, &mut done)?;
    if opts.check {
        done.restored = restore;
        return Ok(done);
    }
    let originals: Vec<String> = record.files.values().map(|e| e.original.clone()).collect();
    let mut progress = reporter.progress(
        format!("restoring the kernel files of {}", kernels.display()),
        Some(restore.len() as u64),
        false,
    );
    for rel in restore {
        restore_one(kernels, &rel, &record.files[&rel])?;
        record.files.remove(&rel);
        record.save(kernels)?;
        done.restored.push(rel);
        progress.inc(1);
    }
    done.kept = forget(kernels, &originals)?;
    Ok(done)
}

/// The recorded files still rewritten, whose kept originals are as
/// recorded (those already back count in `done.already`); refused, with
/// nothing changed, when some file changed since or lost its original.
fn to_restore(kernels: &Path, record: &Record, done: &mut Undone) -> Result<Vec<String>> {
    let mut refusals = Vec::new();
    let mut restore = Vec::new();
    for (rel, entry) in &record.files {
        match record::now(kernels, rel, entry)? {
            Now::Original => done.already += 1,
            Now::Rewritten if record::original_kept(kernels, entry)? => restore.push(rel.clone()),
            Now::Rewritten => refusals.push(format!(
                "{}: the kept original is missing or not as recorded",
                kernels.join(&entry.original).display()
            )),
            Now::Changed => refusals.push(format!(
                "{}: changed since the rewrite (a package upgrade or reinstall?)",
                kernels.join(rel).display()
            )),
        }
    }
    if !refusals.is_empty() {
        anyhow::bail!(
            "not undoing the rewrite of {}, nothing changed:\n  {}\n\
             a file replaced since is the package's own again: to forget the rewrite, remove {}",
            kernels.display(),
            refusals.join("\n  "),
            kernels.join(record::DIR).display()
        );
    }
    Ok(restore)
}

/// Puts the kept original of `entry` back at `rel`: hard-linked (copied,
/// with its attributes, where it cannot be) beside it, then renamed over it.
fn restore_one(kernels: &Path, rel: &str, entry: &record::Entry) -> Result<()> {
    let file = kernels.join(rel);
    let original = kernels.join(&entry.original);
    let tmp = files::staging_of(&file, UNDO);
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(&original, &tmp).is_err() {
        let mut bytes = Vec::new();
        crate::gpu::codeobj::read_kernel_file(&original, &mut bytes)
            .map_err(|why| anyhow::anyhow!("{}: {why}", original.display()))?;
        files::write_synced(&tmp, &bytes, Some(&original))?;
    }
    files::rename_synced(&tmp, &file)
}

/// Removes what the rewrite kept once every file is restored: the kept
/// originals it recorded, the record, and the folders left empty. A file
/// of someone else's in `.patchkit/` stays, and so does its folder
/// (returned).
fn forget(kernels: &Path, originals: &[String]) -> Result<Option<PathBuf>> {
    let dir = kernels.join(record::DIR);
    for original in originals {
        let path = kernels.join(original);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => {}
        }
    }
    let record = record::path(kernels);
    std::fs::remove_file(&record).with_context(|| format!("removing {}", record.display()))?;
    let mut folders: Vec<PathBuf> = originals
        .iter()
        .flat_map(|o| {
            kernels
                .join(o)
                .ancestors()
                .skip(1)
                .map(Path::to_path_buf)
                .collect::<Vec<_>>()
        })
        .filter(|d| d.starts_with(&dir))
        .collect();
    folders.sort();
    folders.dedup();
    folders.push(dir.join(record::ORIGINALS));
    folders.push(dir.clone());
    // deepest first; a folder that is not empty stays
    folders.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    folders.dedup();
    let mut kept = None;
    for folder in folders {
        match std::fs::remove_dir(&folder) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) if folder == dir => kept = Some(dir.clone()),
            Err(_) => {}
        }
    }
    files::sync_dir(kernels)?;
    Ok(kept)
}
