//! Rewrites an installed hipBLASLt in place: every gfx12 kernel file that
//! switches expert scheduling on is replaced by the engine's rewrite
//! ([`crate::gpu::codeobj::rewrite`]) with the mode written 0, atomically, the
//! original kept and the change recorded ([`record`]) so `undo` puts every
//! byte back; comgr's cache entries that could serve the old code go
//! ([`comgr`]). Plan, then execute: a library is rewritten only when every
//! one of its kernel files was read, and its files are replaced one by one
//! in an order a killed run can resume from. One run at a time per library
//! ([`lock`]); a record is read only as [`trust`] allows; files are written
//! as [`files`] does.

pub(crate) mod comgr;
pub(crate) mod files;
pub(crate) mod lock;
pub(crate) mod record;
pub(crate) mod trust;
mod undo;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};

use crate::gpu::codeobj;
use crate::shared::report::Reporter;
use files::{Found, NEW, TMP};
use record::{Entry, FileState, Now, Record};

pub(crate) use files::ensure_writable;
pub(crate) use undo::undo;

/// How a run works.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Say what would change and change nothing.
    pub(crate) check: bool,
    /// Threads reading and rewriting kernel files.
    pub(crate) threads: usize,
    /// Rewrite gated sites too ([`codeobj::gate`]): those switch expert
    /// scheduling on only where the KFD supports it.
    pub(crate) force: bool,
}

/// What the rewrite did (or, with `check`, would do) to one library.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    /// Files rewritten by this run (or to be), with their sites.
    pub(crate) rewritten: Vec<(String, usize)>,
    /// Files an earlier run rewrote, as it left them.
    pub(crate) already: usize,
    /// gfx12 kernel files read that have no site (or no gfx12 code).
    pub(crate) untouched: usize,
    /// Files left as they are because every site of theirs is gated,
    /// with their sites (the first one's gate for the message).
    pub(crate) gated: Vec<(String, usize)>,
    pub(crate) first_gate: Option<codeobj::gate::Gate>,
    /// Files the engine could not read, and why: the library is left alone.
    pub(crate) unreadable: Vec<(String, String)>,
    /// Recorded files that changed since their rewrite (an upgrade).
    pub(crate) changed_since: Vec<String>,
    /// Bytes of the rewritten files before and after.
    pub(crate) bytes_before: u64,
    pub(crate) bytes_after: u64,
}

impl Summary {
    pub(crate) fn sites(&self) -> usize {
        self.rewritten.iter().map(|(_, s)| s).sum()
    }
}

/// What the engine says of one file.
enum Engine {
    Nothing,
    Gated(Vec<codeobj::rewrite::Site>),
    Rewrite { bytes: Vec<u8>, sites: usize },
}

fn engine(
    bytes: &[u8],
    scratch: &mut codeobj::bundle::Scratch,
    force: bool,
) -> Result<Engine, String> {
    use codeobj::rewrite::{rewrite_file_with, rewrite_ungated_with, Rewrite};
    let rewrite = if force {
        rewrite_file_with
    } else {
        rewrite_ungated_with
    };
    Ok(match rewrite(bytes, scratch)? {
        Rewrite::NoGfx12 | Rewrite::NoSites => Engine::Nothing,
        Rewrite::OnlyGated { sites } => Engine::Gated(sites),
        Rewrite::Rewritten { bytes, sites, .. } => Engine::Rewrite {
            bytes,
            sites: sites.len(),
        },
    })
}

/// `rel` of a kernel file below `kernels`, `/`-separated.
fn rel_of(kernels: &Path, file: &Path) -> String {
    file.strip_prefix(kernels)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

/// Whether `kernels` is a system library (below /usr, /opt or /lib), whose
/// package manager owns its files.
pub(crate) fn system_library(kernels: &Path) -> bool {
    ["/usr/", "/opt/", "/lib/", "/lib64/"]
        .iter()
        .any(|p| kernels.starts_with(p))
}

/// Brings the record in line with the files (a killed run): an entry whose
/// file is rewritten is done, one whose file is original is dropped (to be
/// done again), one whose file changed since is dropped and named.
fn reconcile(kernels: &Path, record: &mut Record, summary: &mut Summary) -> Result<bool> {
    let mut changed = false;
    let names: Vec<String> = record.files.keys().cloned().collect();
    for rel in names {
        let entry = record.files.get_mut(&rel).expect("listed");
        match record::now(kernels, &rel, entry)? {
            Now::Rewritten => {
                summary.already += 1;
                if entry.state != FileState::Done {
                    entry.state = FileState::Done;
                    changed = true;
                }
            }
            Now::Original => {
                record.files.remove(&rel);
                changed = true;
            }
            Now::Changed => {
                summary.changed_since.push(rel.clone());
                record.files.remove(&rel);
                changed = true;
            }
        }
    }
    Ok(changed)
}

/// One file's result from the workers.
enum Read {
    Nothing,
    Gated(Vec<codeobj::rewrite::Site>),
    Rewrite {
        sites: usize,
        before: (String, u64),
        after: (String, u64),
    },
    Unreadable(String),
    /// Its rewrite could not be staged beside it: why, whether for want
    /// of space, and the rewrite's size.
    Unwritable(String, bool, u64),
}

/// Rewrites (or with `check`, judges) every gfx12 kernel file of the kernel
/// library folder `kernels` that switches expert scheduling on.
pub(crate) fn rewrite(kernels: &Path, opts: Options, reporter: &Reporter) -> Result<Summary> {
    let _lock = lock::lock(kernels, opts.check, reporter)?;
    let mut record = Record::load(kernels)?.unwrap_or_default();
    if !opts.check {
        ensure_writable(kernels)?;
        files::clean_staging(kernels)?;
    }
    let mut summary = Summary::default();
    if reconcile(kernels, &mut record, &mut summary)? && !opts.check {
        record.save(kernels)?;
    }
    let files: Vec<PathBuf> = codeobj::kernel_files(kernels)
        .with_context(|| format!("listing the kernel files of {}", kernels.display()))?
        .into_iter()
        .filter(|f| !record.files.contains_key(&rel_of(kernels, f)))
        .collect();
    let results = read_all(kernels, &files, opts, reporter);
    let mut unwritable = Vec::new();
    for (file, read) in files.iter().zip(&results) {
        let rel = rel_of(kernels, file);
        match read {
            Read::Nothing => summary.untouched += 1,
            Read::Gated(sites) => {
                summary.gated.push((rel, sites.len()));
                if summary.first_gate.is_none() {
                    summary.first_gate = sites.first().and_then(|s| s.gate.clone());
                }
            }
            Read::Unreadable(why) => summary.unreadable.push((rel, why.clone())),
            Read::Unwritable(why, no_space, size) => {
                summary.bytes_after += size;
                unwritable.push((rel, why.clone(), *no_space));
            }
            Read::Rewrite {
                sites,
                before,
                after,
            } => {
                summary.rewritten.push((rel, *sites));
                summary.bytes_before += before.1;
                summary.bytes_after += after.1;
            }
        }
    }
    if opts.check {
        return Ok(summary);
    }
    if !summary.unreadable.is_empty() || !unwritable.is_empty() {
        files::clean_staging(kernels)?;
        summary.rewritten.clear();
        return not_staged(kernels, &summary, &unwritable).map(|()| summary);
    }
    if let Err(e) = commit(kernels, &files, &results, &mut record, reporter) {
        let _ = files::clean_staging(kernels);
        let no_space = files::is_no_space(&e);
        return Err(e.context(format!(
            "replacing the kernel files of {}{}: each file is original or rewritten, as its record \
             says, and the staged files were removed; run again to finish (or --undo)",
            kernels.display(),
            if no_space {
                " stopped, no space left on its filesystem"
            } else {
                " stopped"
            }
        )));
    }
    Ok(summary)
}

/// The failure of a library whose rewrites could not all be staged: what
/// happened (no space above all), the staged files already removed.
fn not_staged(
    kernels: &Path,
    summary: &Summary,
    unwritable: &[(String, String, bool)],
) -> Result<()> {
    let Some((rel, why, _)) = unwritable.first() else {
        return Ok(());
    };
    let no_space = unwritable.iter().any(|(_, _, n)| *n);
    let first = kernels.join(rel);
    anyhow::bail!(
        "{} left unchanged: the rewrites of {} kernel file(s) could not be written beside them \
         ({}: {why}), and the staged files were removed; {}",
        kernels.display(),
        unwritable.len(),
        first.display(),
        if no_space {
            format!(
                "no space left on the filesystem of {}: the rewrite needs about {} free for its \
                 staged files; free some and run again",
                kernels.display(),
                crate::shared::report::human_size(summary.bytes_after.max(1))
            )
        } else {
            "run again once it can write there".to_owned()
        }
    )
}

/// Reads every file on `opts.threads` threads; a file with sites gets its
/// rewrite written beside it (hidden, synced) unless `check`.
fn read_all(kernels: &Path, files: &[PathBuf], opts: Options, reporter: &Reporter) -> Vec<Read> {
    let progress = Mutex::new(reporter.progress(
        format!("reading the kernels of {}", kernels.display()),
        Some(files.len() as u64),
        false,
    ));
    let scratch = || (Vec::new(), codeobj::bundle::Scratch::default());
    let each = |(buf, scratch): &mut (Vec<u8>, codeobj::bundle::Scratch), file: &PathBuf| {
        let read = read_one(file, opts, buf, scratch);
        progress.lock().expect("no panics hold the lock").inc(1);
        read
    };
    crate::shared::par::map_until(files, opts.threads, scratch, each, |_| false)
        .into_iter()
        .map(|r| r.expect("every file read"))
        .collect()
}

/// Reads one kernel file (as doctor does: a regular file within the bound)
/// and, unless `opts.check`, stages its rewrite beside it with its owner, mode,
/// attributes and times.
fn read_one(
    file: &Path,
    opts: Options,
    buf: &mut Vec<u8>,
    scratch: &mut codeobj::bundle::Scratch,
) -> Read {
    if let Err(why) = codeobj::read_kernel_file(file, buf) {
        return Read::Unreadable(why);
    }
    let (bytes_out, sites) = match engine(buf, scratch, opts.force) {
        Ok(Engine::Nothing) => return Read::Nothing,
        Ok(Engine::Gated(sites)) => return Read::Gated(sites),
        Ok(Engine::Rewrite { bytes, sites }) => (bytes, sites),
        Err(why) => return Read::Unreadable(why),
    };
    let before = (crate::shared::hash::sha256_hex(buf), buf.len() as u64);
    let after = (
        crate::shared::hash::sha256_hex(&bytes_out),
        bytes_out.len() as u64,
    );
    if !opts.check {
        let staged = files::staging_of(file, NEW);
        if let Err(e) = files::write_synced(&staged, &bytes_out, Some(file)) {
            let _ = std::fs::remove_file(&staged);
            let no_space = files::is_no_space(&e);
            let why = match e.chain().find_map(|c| c.downcast_ref::<std::io::Error>()) {
                Some(io) => files::why_not_written(io),
                None => format!("{e:#}"),
            };
            return Read::Unwritable(why, no_space, after.1);
        }
    }
    Read::Rewrite {
        sites,
        before,
        after,
    }
}

/// Puts the staged rewrites in place, one by one: the original is kept
/// (hard link), the record says "intent", the rewrite is renamed over the
/// file, and the next record write says "done". A run killed anywhere
/// leaves each file original or rewritten and a record [`reconcile`] reads.
fn commit(
    kernels: &Path,
    files: &[PathBuf],
    results: &[Read],
    record: &mut Record,
    reporter: &Reporter,
) -> Result<()> {
    let todo: Vec<(&PathBuf, &Read)> = files
        .iter()
        .zip(results)
        .filter(|(_, r)| matches!(r, Read::Rewrite { .. }))
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    let mut progress = reporter.progress(
        format!("replacing the kernel files of {}", kernels.display()),
        Some(todo.len() as u64),
        false,
    );
    let mut previous: Option<String> = None;
    for (file, read) in todo {
        let Read::Rewrite {
            sites,
            before,
            after,
        } = read
        else {
            unreachable!("filtered")
        };
        let rel = rel_of(kernels, file);
        let original = record::original_of(&rel);
        keep_original(kernels, file, &original, before)?;
        if let Some(done) = previous.take() {
            record.files.get_mut(&done).expect("recorded").state = FileState::Done;
        }
        record.files.insert(
            rel.clone(),
            Entry {
                state: FileState::Intent,
                size_before: before.1,
                sha256_before: before.0.clone(),
                size_after: after.1,
                sha256_after: after.0.clone(),
                sites: *sites,
                original,
            },
        );
        record.save(kernels)?;
        files::rename_synced(&files::staging_of(file, NEW), file)?;
        previous = Some(rel);
        progress.inc(1);
    }
    if let Some(done) = previous {
        record.files.get_mut(&done).expect("recorded").state = FileState::Done;
    }
    record.save(kernels)
}

/// Keeps `file` at `original` (below `kernels`; a hard link, else a synced
/// copy with its attributes), unless it is kept there already.
fn keep_original(
    kernels: &Path,
    file: &Path,
    original: &str,
    before: &(String, u64),
) -> Result<()> {
    let kept = kernels.join(original);
    let found = files::digest(&kept, &[before.1])?;
    if matches!(&found, Found::File { sha256, .. } if *sha256 == before.0) {
        return Ok(());
    }
    let dir = kept.parent().expect("originals are in a folder");
    record::ensure_dir(kernels, dir)?;
    let tmp = files::staging_of(&kept, TMP);
    let _ = std::fs::remove_file(&tmp);
    let is_link = std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink());
    if is_link || std::fs::hard_link(file, &tmp).is_err() {
        let mut bytes = Vec::new();
        codeobj::read_kernel_file(file, &mut bytes)
            .map_err(|why| anyhow::anyhow!("{}: {why}", file.display()))?;
        files::write_synced(&tmp, &bytes, Some(file))?;
    }
    match files::digest(&tmp, &[before.1])? {
        Found::File { sha256, .. } if sha256 == before.0 => {}
        _ => anyhow::bail!(
            "{} changed while it was being rewritten: run again",
            file.display()
        ),
    }
    files::rename_synced(&tmp, &kept)
}
