//! Rewrites an installed hipBLASLt in place: every gfx12 kernel file that
//! switches expert scheduling on is replaced by the engine's rewrite
//! ([`crate::codeobj::rewrite`]) with the mode written 0, atomically, the
//! original kept and the change recorded ([`record`]) so `undo` puts every
//! byte back; comgr's cache entries that could serve the old code go
//! ([`comgr`]). Plan, then execute: a library is rewritten only when every
//! one of its kernel files was read, and its files are replaced one by one
//! in an order a killed run can resume from.

pub mod comgr;
pub mod record;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};

use crate::codeobj;
use crate::report::Reporter;
use record::{Entry, Now, Record, State};

/// Suffixes of our files on their way somewhere (all hidden, none a kernel name).
const NEW: &str = "patchkit-new";
const UNDO: &str = "patchkit-undo";
const TMP: &str = "patchkit-tmp";

/// How a run works.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Say what would change and change nothing.
    pub check: bool,
    /// Threads reading and rewriting kernel files.
    pub threads: usize,
    /// Rewrite gated sites too ([`codeobj::gate`]): those switch expert
    /// scheduling on only where the KFD supports it.
    pub force: bool,
}

/// What the rewrite did (or, with `check`, would do) to one library.
#[derive(Debug, Default)]
pub struct Summary {
    /// Files rewritten by this run (or to be), with their sites.
    pub rewritten: Vec<(String, usize)>,
    /// Files an earlier run rewrote, as it left them.
    pub already: usize,
    /// gfx12 kernel files read that have no site (or no gfx12 code).
    pub untouched: usize,
    /// Files left as they are because every site of theirs is gated,
    /// with their sites (the first one's gate for the message).
    pub gated: Vec<(String, usize)>,
    pub first_gate: Option<codeobj::gate::Gate>,
    /// Files the engine could not read, and why: the library is left alone.
    pub unreadable: Vec<(String, String)>,
    /// Recorded files that changed since their rewrite (an upgrade).
    pub changed_since: Vec<String>,
    /// Bytes of the rewritten files before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

impl Summary {
    pub fn sites(&self) -> usize {
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

/// Whether this process may create files in `dir`.
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Refuses a folder this user cannot write, saying what root means there.
pub fn ensure_writable(kernels: &Path) -> Result<()> {
    let dir = kernels.join(record::DIR);
    if writable(kernels) && (!dir.exists() || writable(&dir)) {
        return Ok(());
    }
    anyhow::bail!(
        "{} is not writable by this user: it is a system library, so the rewrite needs root (sudo); \
         the package manager puts the original kernel files back at its next upgrade or reinstall of \
         that package (doctor then says affected again, and this command can be run again)",
        kernels.display()
    )
}

/// Whether `kernels` is a system library (below /usr, /opt or /lib), whose
/// package manager owns its files.
pub fn system_library(kernels: &Path) -> bool {
    ["/usr/", "/opt/", "/lib/", "/lib64/"]
        .iter()
        .any(|p| kernels.starts_with(p))
}

/// Removes what killed runs left on its way (`.<name>.patchkit-*` files).
fn clean_staging(kernels: &Path) -> Result<()> {
    let mut stack = vec![(kernels.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && depth < 4 {
                stack.push((path, depth + 1));
            } else if !is_dir
                && name.starts_with('.')
                && [NEW, UNDO, TMP]
                    .iter()
                    .any(|s| name.ends_with(&format!(".{s}")))
            {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
    }
    Ok(())
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
                if entry.state != State::Done {
                    entry.state = State::Done;
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
}

/// Rewrites (or with `check`, judges) every gfx12 kernel file of the kernel
/// library folder `kernels` that switches expert scheduling on.
pub fn rewrite(kernels: &Path, opts: Options, reporter: &Reporter) -> Result<Summary> {
    if !opts.check {
        ensure_writable(kernels)?;
        clean_staging(kernels)?;
    }
    let mut summary = Summary::default();
    let mut record = Record::load(kernels)?.unwrap_or_default();
    if reconcile(kernels, &mut record, &mut summary)? && !opts.check {
        record.save(kernels)?;
    }
    let files: Vec<PathBuf> = codeobj::kernel_files(kernels)
        .with_context(|| format!("listing the kernel files of {}", kernels.display()))?
        .into_iter()
        .filter(|f| !record.files.contains_key(&rel_of(kernels, f)))
        .collect();
    let results = read_all(kernels, &files, opts, reporter);
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
    if !summary.unreadable.is_empty() {
        clean_staging(kernels)?;
        summary.rewritten.clear();
        return Ok(summary);
    }
    commit(kernels, &files, &results, &mut record, reporter)?;
    Ok(summary)
}

/// Reads every file on `opts.threads` threads; a file with sites gets its
/// rewrite written beside it (hidden, synced) unless `check`.
fn read_all(kernels: &Path, files: &[PathBuf], opts: Options, reporter: &Reporter) -> Vec<Read> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Read>>> = Mutex::new((0..files.len()).map(|_| None).collect());
    let progress = Mutex::new(reporter.progress(
        format!("reading the kernels of {}", kernels.display()),
        Some(files.len() as u64),
        false,
    ));
    std::thread::scope(|s| {
        for _ in 0..opts.threads.clamp(1, files.len().max(1)) {
            s.spawn(|| {
                let mut scratch = codeobj::bundle::Scratch::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = files.get(i) else { break };
                    let read = read_one(file, opts, &mut scratch);
                    results.lock().expect("no panics hold the lock")[i] = Some(read);
                    progress.lock().expect("no panics hold the lock").inc(1);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no panics hold the lock")
        .into_iter()
        .map(|r| r.expect("every file read"))
        .collect()
}

fn read_one(file: &Path, opts: Options, scratch: &mut codeobj::bundle::Scratch) -> Read {
    use std::os::unix::fs::PermissionsExt;
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) => return Read::Unreadable(format!("cannot read: {e}")),
    };
    let (bytes_out, sites) = match engine(&bytes, scratch, opts.force) {
        Ok(Engine::Nothing) => return Read::Nothing,
        Ok(Engine::Gated(sites)) => return Read::Gated(sites),
        Ok(Engine::Rewrite { bytes, sites }) => (bytes, sites),
        Err(why) => return Read::Unreadable(why),
    };
    let before = (crate::hash::sha256_hex(&bytes), bytes.len() as u64);
    let after = (crate::hash::sha256_hex(&bytes_out), bytes_out.len() as u64);
    if !opts.check {
        let mode = std::fs::metadata(file).map_or(0o644, |m| m.permissions().mode() & 0o7777);
        let staged = record::staging_of(file, NEW);
        if let Err(e) = record::write_synced(&staged, &bytes_out, Some(mode))
            .and_then(|()| record::same_owner(&staged, file))
        {
            return Read::Unreadable(format!("{e:#}"));
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
        keep_original(file, &kernels.join(&original), &before.0)?;
        if let Some(done) = previous.take() {
            record.files.get_mut(&done).expect("recorded").state = State::Done;
        }
        record.files.insert(
            rel.clone(),
            Entry {
                state: State::Intent,
                size_before: before.1,
                sha256_before: before.0.clone(),
                size_after: after.1,
                sha256_after: after.0.clone(),
                sites: *sites,
                original,
            },
        );
        record.save(kernels)?;
        record::rename_synced(&record::staging_of(file, NEW), file)?;
        previous = Some(rel);
        progress.inc(1);
    }
    if let Some(done) = previous {
        record.files.get_mut(&done).expect("recorded").state = State::Done;
    }
    record.save(kernels)
}

/// Keeps `file` at `kept` (a hard link, else a synced copy), unless a
/// file with the same sha256 is there already.
fn keep_original(file: &Path, kept: &Path, sha256: &str) -> Result<()> {
    if let Ok(Some((sha, _))) = record::digest(kept) {
        if sha == sha256 {
            return Ok(());
        }
    }
    let dir = kept.parent().expect("originals are in a folder");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    record::same_owner(dir, file.parent().unwrap_or(Path::new("/")))?;
    let tmp = record::staging_of(kept, TMP);
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(file, &tmp).is_err() {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        record::write_synced(&tmp, &bytes, None)?;
        record::same_owner(&tmp, file)?;
    }
    match record::digest(&tmp)? {
        Some((sha, _)) if sha == sha256 => {}
        _ => anyhow::bail!(
            "{} changed while it was being rewritten: run again",
            file.display()
        ),
    }
    record::rename_synced(&tmp, kept)
}

/// What `undo` did (or, with `check`, would do) to one library.
#[derive(Debug, Default)]
pub struct Undone {
    /// Files put back as they were.
    pub restored: Vec<String>,
    /// Recorded files already as they were.
    pub already: usize,
    /// Whether the library had a record at all.
    pub had_record: bool,
}

/// Puts every recorded file of `kernels` back, byte for byte, and removes
/// the record and the kept originals; refuses, changing nothing, when a
/// file changed since its rewrite or an original is not as recorded.
pub fn undo(kernels: &Path, opts: Options, reporter: &Reporter) -> Result<Undone> {
    let mut done = Undone::default();
    let Some(mut record) = Record::load(kernels)? else {
        return Ok(done);
    };
    done.had_record = true;
    if !opts.check {
        ensure_writable(kernels)?;
        clean_staging(kernels)?;
    }
    let restore = to_restore(kernels, &record, &mut done)?;
    if opts.check {
        done.restored = restore;
        return Ok(done);
    }
    let mut progress = reporter.progress(
        format!("restoring the kernel files of {}", kernels.display()),
        Some(restore.len() as u64),
        false,
    );
    for rel in restore {
        restore_one(kernels, &rel, &record.files[&rel].original)?;
        record.files.remove(&rel);
        record.save(kernels)?;
        done.restored.push(rel);
        progress.inc(1);
    }
    forget(kernels)?;
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
            Now::Rewritten => {
                let original = kernels.join(&entry.original);
                match record::digest(&original)? {
                    Some((sha, _)) if sha == entry.sha256_before => restore.push(rel.clone()),
                    _ => refusals.push(format!(
                        "{}: the kept original is missing or not as recorded",
                        original.display()
                    )),
                }
            }
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

/// Puts the kept original (`original`, relative to `kernels`) back at
/// `rel`: hard-linked (copied where it cannot be) beside it, then renamed
/// over it.
fn restore_one(kernels: &Path, rel: &str, original: &str) -> Result<()> {
    let file = kernels.join(rel);
    let original = kernels.join(original);
    let tmp = record::staging_of(&file, UNDO);
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(&original, &tmp).is_err() {
        let bytes =
            std::fs::read(&original).with_context(|| format!("reading {}", original.display()))?;
        let mode = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(&file).map_or(0o644, |m| m.permissions().mode() & 0o7777)
        };
        record::write_synced(&tmp, &bytes, Some(mode))?;
    }
    record::rename_synced(&tmp, &file)
}

/// Removes the record folder once every file is restored: the kept
/// originals, the record, the folder.
fn forget(kernels: &Path) -> Result<()> {
    let dir = kernels.join(record::DIR);
    std::fs::remove_dir_all(dir.join("originals"))
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .with_context(|| format!("removing {}/originals", dir.display()))?;
    std::fs::remove_file(record::path(kernels))
        .with_context(|| format!("removing {}", record::path(kernels).display()))?;
    std::fs::remove_dir(&dir).with_context(|| format!("removing {}", dir.display()))?;
    record::sync_dir(kernels)
}
