//! Extraction: materialises a fetched source (an archive, a git commit's
//! tree, a local folder) into a staging folder, limited to the paths the
//! recipe names, refusing every entry that could land outside the tree
//! (absolute paths, `..`, device files, links out of the tree, writes
//! through a symlink), stopping at a limit of bytes and files (archive
//! bombs), and lists what it wrote as a [`Manifest`].

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use globset::{Glob, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};

use crate::fetch::FetchedSource;
use crate::recipe::Source;
use crate::report::Reporter;
use crate::state::{FileId, Manifest};

/// Which part of a source ends up in the tree.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Leading path components dropped from archive entries.
    pub strip: u32,
    /// Globs (archives, folders): an entry is kept when it or a folder above
    /// it matches one. Empty keeps everything.
    pub include: Vec<String>,
    /// Paths (git): files or folders of the commit's tree. Empty keeps everything.
    pub paths: Vec<String>,
}

impl Selection {
    pub fn of(source: &Source) -> Selection {
        match source {
            Source::Git { paths, .. } => Selection {
                paths: paths.clone(),
                ..Selection::default()
            },
            Source::Tarball { strip, include, .. } | Source::Local { strip, include, .. } => {
                Selection {
                    strip: *strip,
                    include: include.clone(),
                    paths: Vec::new(),
                }
            }
        }
    }
}

/// Extracts `source` into the existing, empty folder `dest`.
pub fn extract(
    source: &FetchedSource,
    sel: &Selection,
    dest: &Path,
    reporter: &Reporter,
) -> Result<Manifest> {
    match source {
        FetchedSource::Archive { path, .. } => archive(path, sel, dest, reporter),
        FetchedSource::Dir { path } if path.is_file() => archive(path, sel, dest, reporter),
        FetchedSource::Dir { path } => dir(path, sel, dest),
        FetchedSource::Git { repo, commit } => git(repo, commit, &sel.paths, dest, reporter),
    }
}

/// Environment variable that raises the limit of bytes one extraction writes.
pub const MAX_BYTES_ENV: &str = "PATCHKIT_EXTRACT_MAX_BYTES";
/// Environment variable that raises the limit of entries one extraction writes.
pub const MAX_FILES_ENV: &str = "PATCHKIT_EXTRACT_MAX_FILES";

/// How much one extraction may write: the whole Linux source is about
/// 1.5 GiB in 90 000 files, so the defaults (3 GiB, a million files) leave
/// room and stop a bomb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub bytes: u64,
    pub files: u64,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        bytes: 3 << 30,
        files: 1_000_000,
    };

    /// The defaults, raised (or lowered) by `PATCHKIT_EXTRACT_MAX_BYTES`
    /// (a number with an optional K, M or G suffix) and
    /// `PATCHKIT_EXTRACT_MAX_FILES`.
    pub fn from_env() -> Result<Limits> {
        let read = |var: &str, default: u64| -> Result<u64> {
            match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => parse_size(v.trim()).with_context(|| {
                    format!("{var}={v:?} is not a number (such as 4096, 512M or 16G)")
                }),
                _ => Ok(default),
            }
        };
        Ok(Limits {
            bytes: read(MAX_BYTES_ENV, Limits::DEFAULT.bytes)?,
            files: read(MAX_FILES_ENV, Limits::DEFAULT.files)?,
        })
    }
}

fn parse_size(text: &str) -> Result<u64> {
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let n: u64 = digits.parse()?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| anyhow::anyhow!("too large"))
}

/// Writes entries below `dest`, refusing anything that could leave it.
struct Sink {
    dest: PathBuf,
    manifest: Manifest,
    symlinks: HashSet<String>,
    dirs: HashSet<PathBuf>,
    limits: Limits,
    bytes: u64,
    entries: u64,
}

/// The limit was reached: not a path problem, so reported on its own.
#[derive(Debug)]
struct OverLimit(String);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OverLimit {}

impl Sink {
    fn new(dest: &Path) -> Result<Sink> {
        Ok(Sink {
            dest: dest.to_path_buf(),
            manifest: Manifest::new(),
            symlinks: HashSet::new(),
            dirs: HashSet::new(),
            limits: Limits::from_env()?,
            bytes: 0,
            entries: 0,
        })
    }

    /// Counts one more entry against the file limit.
    fn count(&mut self) -> Result<()> {
        self.entries += 1;
        if self.entries > self.limits.files {
            return Err(OverLimit(format!(
                "the source holds more than {} files, the limit of one extraction: it may be an \
                 archive bomb; if this many files are expected, raise the limit with \
                 {MAX_FILES_ENV}=<count>",
                self.limits.files
            ))
            .into());
        }
        Ok(())
    }

    fn over_bytes(&self) -> anyhow::Error {
        OverLimit(format!(
            "the source expands to more than {} bytes, the limit of one extraction: it may be an \
             archive bomb; if it is expected, raise the limit with {MAX_BYTES_ENV}=<bytes> \
             (such as 16G)",
            self.limits.bytes
        ))
        .into()
    }

    /// Refuses a path whose parent folders or itself are symlinks written earlier.
    fn through_symlink(&self, rel: &str) -> Result<()> {
        let mut end = 0;
        while end < rel.len() {
            end = rel[end..].find('/').map_or(rel.len(), |i| end + i);
            if self.symlinks.contains(&rel[..end]) {
                bail!(
                    "`{rel}` would be written through the symlink `{}`",
                    &rel[..end]
                );
            }
            end += 1;
        }
        Ok(())
    }

    fn parent(&mut self, rel: &str) -> Result<PathBuf> {
        self.through_symlink(rel)?;
        let path = self.dest.join(rel);
        if let Some(parent) = path.parent() {
            if !self.dirs.contains(parent) {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
                self.dirs.insert(parent.to_path_buf());
            }
        }
        Ok(path)
    }

    fn dir(&mut self, rel: &str) -> Result<()> {
        self.count()?;
        let path = self.parent(rel)?;
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        self.dirs.insert(path);
        Ok(())
    }

    fn file(&mut self, rel: &str, exec: bool, data: impl Read) -> Result<()> {
        self.count()?;
        let path = self.parent(rel)?;
        if path.symlink_metadata().is_ok() {
            std::fs::remove_file(&path).with_context(|| format!("replacing {}", path.display()))?;
        }
        let mut out =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let room = self.limits.bytes.saturating_sub(self.bytes);
        let mut data = data.take(room.saturating_add(1));
        let (sha256, size) = copy_hashing(&mut data, &mut out)
            .with_context(|| format!("writing {}", path.display()))?;
        if size > room {
            return Err(self.over_bytes());
        }
        self.bytes += size;
        let mode = if exec { 0o755 } else { 0o644 };
        use std::os::unix::fs::PermissionsExt;
        out.set_permissions(std::fs::Permissions::from_mode(mode))?;
        self.manifest.insert(
            rel.to_owned(),
            FileId {
                mode: 0o100000 | mode,
                sha256,
                size,
            },
        );
        Ok(())
    }

    fn symlink(&mut self, rel: &str, target: &[u8]) -> Result<()> {
        self.count()?;
        let target = std::str::from_utf8(target)
            .map_err(|_| anyhow::anyhow!("symlink `{rel}` has a target that is not UTF-8"))?;
        if target.starts_with('/') {
            bail!("symlink `{rel}` points to the absolute path `{target}`, outside the tree");
        }
        let mut depth = rel.split('/').count() as isize - 1;
        for part in target.split('/') {
            match part {
                "" | "." => {}
                ".." => depth -= 1,
                _ => depth += 1,
            }
            if depth < 0 {
                bail!("symlink `{rel}` points to `{target}`, outside the tree");
            }
        }
        let path = self.parent(rel)?;
        if path.symlink_metadata().is_ok() {
            std::fs::remove_file(&path).with_context(|| format!("replacing {}", path.display()))?;
        }
        std::os::unix::fs::symlink(target, &path)
            .with_context(|| format!("creating symlink {}", path.display()))?;
        self.symlinks.insert(rel.to_owned());
        self.manifest.insert(
            rel.to_owned(),
            FileId {
                mode: 0o120000,
                sha256: hex::encode(Sha256::digest(target.as_bytes())),
                size: target.len() as u64,
            },
        );
        Ok(())
    }

    /// A tar hard link: a copy of a file extracted earlier in this tree.
    fn hardlink(&mut self, rel: &str, target: &str) -> Result<()> {
        let Some(id) = self.manifest.get(target).filter(|id| id.mode != 0o120000) else {
            bail!(
                "hard link `{rel}` points to `{target}`, which is not a file of the extracted tree"
            );
        };
        let exec = id.mode & 0o111 != 0;
        let from = self.dest.join(target);
        let data =
            std::fs::File::open(&from).with_context(|| format!("reading {}", from.display()))?;
        self.file(rel, exec, data)
    }
}

/// Copies `from` into `to` and returns the sha256 and length of what passed.
pub fn copy_hashing(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        size += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), size))
}

/// A `/`-separated entry path made safe: `None` when nothing is left after
/// stripping, an error for absolute paths and `..`.
fn entry_path(raw: &[u8], strip: u32) -> Result<Option<String>> {
    let text = std::str::from_utf8(raw).map_err(|_| anyhow::anyhow!("path is not UTF-8"))?;
    if text.starts_with('/') {
        bail!("is an absolute path");
    }
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => bail!("has a `..` component"),
            p if p.contains('\n') || p.contains('\0') => bail!("has a newline or NUL in its name"),
            p => parts.push(p),
        }
    }
    let strip = strip as usize;
    if parts.len() <= strip {
        return Ok(None);
    }
    Ok(Some(parts[strip..].join("/")))
}

fn include_set(globs: &[String]) -> Result<Option<GlobSet>> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut builder = GlobSetBuilder::new();
    for g in globs {
        builder.add(Glob::new(g).with_context(|| format!("`{g}` is not a glob"))?);
    }
    Ok(Some(builder.build()?))
}

/// Whether `rel` or a folder above it matches `set`.
fn included(set: &Option<GlobSet>, rel: &str) -> bool {
    let Some(set) = set else { return true };
    let mut end = 0;
    while end < rel.len() {
        end = rel[end..].find('/').map_or(rel.len(), |i| end + i);
        if set.is_match(&rel[..end]) {
            return true;
        }
        end += 1;
    }
    false
}

/// Extracts a tar, tar.gz, tar.xz or tar.zst archive (told apart by content).
pub fn archive(path: &Path, sel: &Selection, dest: &Path, reporter: &Reporter) -> Result<Manifest> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let total = file.metadata().map(|m| m.len()).ok();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let progress = reporter.progress(format!("extract {}", name.unwrap_or_default()), total, true);
    let mut input = BufReader::with_capacity(
        1 << 20,
        Counting {
            inner: file,
            progress,
        },
    );
    let magic = input.fill_buf()?.to_vec();
    let (reader, compressed): (Box<dyn Read>, bool) = if magic.starts_with(&[0x1f, 0x8b]) {
        (Box::new(flate2::read::GzDecoder::new(input)), true)
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        (
            Box::new(xz2::read::XzDecoder::new_multi_decoder(input)),
            true,
        )
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        (
            Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
            true,
        )
    } else {
        (Box::new(input), false)
    };
    let wrap = |e: anyhow::Error| e.context(format!("extracting archive {}", path.display()));
    let tracked = Tracked {
        inner: reader,
        state: Default::default(),
    };
    let state = tracked.state.clone();
    untar(tracked, compressed, &state, sel, dest).map_err(wrap)
}

/// What the stream under the tar reader saw: whether it ended, and the
/// first read error. A failure after either is the archive's, not a path's.
#[derive(Default)]
struct StreamState {
    ended: std::cell::Cell<bool>,
    error: std::cell::RefCell<Option<std::io::Error>>,
}

struct Tracked<R> {
    inner: R,
    state: std::rc::Rc<StreamState>,
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Ok(0) if !buf.is_empty() => {
                self.state.ended.set(true);
                Ok(0)
            }
            Ok(n) => Ok(n),
            Err(e) => {
                let copy = std::io::Error::new(e.kind(), e.to_string());
                self.state.error.borrow_mut().get_or_insert(copy);
                Err(e)
            }
        }
    }
}

/// Whether a 512-byte block is a tar header (its checksum matches) or the
/// all-zero end-of-archive block.
fn is_tar_block(block: &[u8; 512]) -> bool {
    if block.iter().all(|&b| b == 0) {
        return true;
    }
    let field = std::str::from_utf8(&block[148..156]).unwrap_or("");
    let Ok(stored) = u32::from_str_radix(field.trim_matches(|c: char| c == '\0' || c == ' '), 8)
    else {
        return false;
    };
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                b as u32
            }
        })
        .sum();
    sum == stored
}

fn untar(
    mut reader: impl Read,
    compressed: bool,
    stream: &StreamState,
    sel: &Selection,
    dest: &Path,
) -> Result<Manifest> {
    use tar::EntryType as T;
    let not_tar = || {
        anyhow::anyhow!(
            "not a gzip/xz/zstd tar archive: its first bytes are neither a compressed stream nor a \
             tar header; check that the source names a .tar, .tar.gz, .tar.xz or .tar.zst"
        )
    };
    let truncated = |at: &str, e: &dyn std::fmt::Display| {
        anyhow::anyhow!(
            "the archive is truncated or corrupt ({at}: {e}); nothing was applied. Fetch it again \
             (remove it from the cache, or replace the local file) and check where it comes from"
        )
    };
    let mut head = [0u8; 512];
    if let Err(e) = reader.read_exact(&mut head) {
        return Err(
            if compressed && e.kind() != std::io::ErrorKind::UnexpectedEof {
                truncated("in its first block", &e)
            } else if compressed {
                truncated("in its first block", &"it ends early")
            } else {
                not_tar()
            },
        );
    }
    if !is_tar_block(&head) {
        return Err(not_tar());
    }
    let include = include_set(&sel.include)?;
    let mut sink = Sink::new(dest)?;
    let mut archive = tar::Archive::new((&head[..]).chain(reader));
    let broken = |stream: &StreamState| stream.ended.get() || stream.error.borrow().is_some();
    let entries = archive
        .entries()
        .map_err(|e| truncated("reading the archive", &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| truncated("reading the next entry header", &e))?;
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let refuse = |e: anyhow::Error| {
            if e.downcast_ref::<OverLimit>().is_some() {
                e
            } else if broken(stream) {
                let cause = stream
                    .error
                    .borrow()
                    .as_ref()
                    .map_or_else(|| "it ends early".to_owned(), ToString::to_string);
                truncated(&format!("inside entry `{shown}`"), &cause)
            } else {
                e.context(format!(
                    "entry `{shown}` is refused: the archive could write outside the tree"
                ))
            }
        };
        let kind = entry.header().entry_type();
        if matches!(kind, T::XGlobalHeader | T::XHeader) {
            continue;
        }
        let Some(rel) =
            entry_path(&raw, sel.strip).map_err(|e| refuse(anyhow::anyhow!("it {e}")))?
        else {
            continue;
        };
        if !included(&include, &rel) {
            continue;
        }
        match kind {
            T::Regular | T::Continuous | T::GNUSparse => {
                let exec = entry.header().mode().unwrap_or(0o644) & 0o111 != 0;
                sink.file(&rel, exec, entry).map_err(refuse)?;
            }
            T::Directory => sink.dir(&rel).map_err(refuse)?,
            T::Symlink => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                sink.symlink(&rel, &target).map_err(refuse)?;
            }
            T::Link => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                let shown = String::from_utf8_lossy(&target).into_owned();
                let target = entry_path(&target, sel.strip)
                    .map_err(|e| refuse(anyhow::anyhow!("its hard link target `{shown}` {e}")))?
                    .unwrap_or(shown);
                sink.hardlink(&rel, &target).map_err(refuse)?;
            }
            other => {
                return Err(refuse(anyhow::anyhow!(
                    "it is a device, fifo or other special entry ({other:?}); only files, folders and links are extracted"
                )))
            }
        }
    }
    Ok(sink.manifest)
}

struct Counting<R> {
    inner: R,
    progress: crate::report::Progress,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }
}

/// Copies a local folder (without `.git` and `.patchkit`).
pub fn dir(src: &Path, sel: &Selection, dest: &Path) -> Result<Manifest> {
    let include = include_set(&sel.include)?;
    let mut sink = Sink::new(dest)?;
    let mut stack = vec![String::new()];
    while let Some(rel_dir) = stack.pop() {
        let dir = src.join(&rel_dir);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("listing {}", dir.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                bail!("{} has a name that is not UTF-8", entry.path().display());
            };
            if rel_dir.is_empty() && (name == ".git" || name == crate::state::DIR) {
                continue;
            }
            let rel = if rel_dir.is_empty() {
                name.to_owned()
            } else {
                format!("{rel_dir}/{name}")
            };
            let meta = entry
                .metadata()
                .with_context(|| format!("reading {}", entry.path().display()))?;
            let refuse = |e: anyhow::Error| e.context(format!("copying {}", src.display()));
            if meta.is_dir() {
                stack.push(rel);
            } else if !included(&include, &rel) {
                continue;
            } else if meta.is_file() {
                use std::os::unix::fs::PermissionsExt;
                let data = std::fs::File::open(entry.path())
                    .with_context(|| format!("reading {}", entry.path().display()))?;
                sink.file(&rel, meta.permissions().mode() & 0o111 != 0, data)
                    .map_err(refuse)?;
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(entry.path())?;
                let target = target.to_str().unwrap_or("/").as_bytes().to_vec();
                sink.symlink(&rel, &target).map_err(refuse)?;
            } else {
                return Err(refuse(anyhow::anyhow!(
                    "`{rel}` is a device, fifo or socket; only files, folders and links are copied"
                )));
            }
        }
    }
    Ok(sink.manifest)
}

/// Writes the tree of `commit` in the repository `repo`, limited to `paths`.
pub fn git(
    repo: &Path,
    commit: &str,
    paths: &[String],
    dest: &Path,
    reporter: &Reporter,
) -> Result<Manifest> {
    let context = || format!("extracting commit {commit} of {}", repo.display());
    let repository = git2::Repository::open(repo).with_context(context)?;
    let oid = git2::Oid::from_str(commit).with_context(context)?;
    let tree = repository
        .find_commit(oid)
        .and_then(|c| c.tree())
        .with_context(|| format!("commit {commit} is not in {}", repo.display()))?;
    let mut sink = Sink::new(dest)?;
    let roots: Vec<String> = if paths.is_empty() {
        vec![String::new()]
    } else {
        paths.to_vec()
    };
    for root in roots {
        let root = root.trim_matches('/').to_owned();
        if root.is_empty() {
            git_tree(&repository, &tree, "", &mut sink, reporter).with_context(context)?;
            continue;
        }
        entry_path(root.as_bytes(), 0).map_err(|e| anyhow::anyhow!("path `{root}` {e}"))?;
        let entry = tree
            .get_path(Path::new(&root))
            .with_context(|| format!("commit {commit} has no path `{root}`; fix `source.paths`"))?;
        git_entry(&repository, &entry, &root, &mut sink, reporter).with_context(context)?;
    }
    Ok(sink.manifest)
}

fn git_tree(
    repo: &git2::Repository,
    tree: &git2::Tree,
    prefix: &str,
    sink: &mut Sink,
    reporter: &Reporter,
) -> Result<()> {
    for entry in tree.iter() {
        let name = entry.name_bytes();
        let name = std::str::from_utf8(name)
            .map_err(|_| anyhow::anyhow!("a name below `{prefix}` is not UTF-8"))?;
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            bail!(
                "tree entry `{name}` below `{prefix}/` is refused: it could write outside the tree"
            );
        }
        let rel = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}/{name}")
        };
        git_entry(repo, &entry, &rel, sink, reporter)?;
    }
    Ok(())
}

fn git_entry(
    repo: &git2::Repository,
    entry: &git2::TreeEntry,
    rel: &str,
    sink: &mut Sink,
    reporter: &Reporter,
) -> Result<()> {
    let object = entry
        .to_object(repo)
        .with_context(|| format!("reading `{rel}`"))?;
    match entry.filemode() {
        0o040000 => {
            let tree = object.peel_to_tree()?;
            git_tree(repo, &tree, rel, sink, reporter)
        }
        0o160000 => {
            reporter.warn(format!(
                "skipping submodule `{rel}`: submodules are not extracted"
            ));
            Ok(())
        }
        0o120000 => {
            let blob = object.peel_to_blob()?;
            sink.symlink(rel, blob.content())
                .map_err(|e| e.context(format!("tree entry `{rel}` is refused")))
        }
        mode => {
            let blob = object.peel_to_blob()?;
            sink.file(rel, mode & 0o111 != 0, blob.content())
                .map_err(|e| e.context(format!("tree entry `{rel}` is refused")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_paths_are_stripped_and_checked() {
        assert_eq!(
            entry_path(b"linux-6.12/drivers/x.c", 1).unwrap().as_deref(),
            Some("drivers/x.c")
        );
        assert_eq!(entry_path(b"linux-6.12/", 1).unwrap(), None);
        assert!(entry_path(b"/etc/passwd", 0).is_err());
        assert!(entry_path(b"a/../../x", 0).is_err());
    }

    #[test]
    fn limits_read_sizes_and_stop_the_bomb_of_issue_15() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("16G").unwrap(), 16 << 30);
        assert!(parse_size("lots").is_err());
        // A 3 MB archive wrote 3.1 GiB; the whole Linux source is 1.5 GiB.
        const {
            assert!(Limits::DEFAULT.bytes < 3_100 << 20);
            assert!(Limits::DEFAULT.bytes > 2 * (1_486 << 20));
        }
    }

    #[test]
    fn tar_blocks_are_told_from_garbage() {
        let mut header = tar::Header::new_gnu();
        header.set_path("a/b.c").unwrap();
        header.set_size(0);
        header.set_cksum();
        assert!(is_tar_block(header.as_bytes()));
        assert!(is_tar_block(&[0u8; 512]));
        let mut garbage = [b'x'; 512];
        garbage[148..156].copy_from_slice(b"0000000\0");
        assert!(!is_tar_block(&garbage));
    }

    #[test]
    fn include_matches_folders_above() {
        let set = include_set(&["drivers/gpu/drm/amd".into()]).unwrap();
        assert!(included(&set, "drivers/gpu/drm/amd/amdkfd/kfd_chardev.c"));
        assert!(!included(&set, "drivers/gpu/drm/i915/i915_drv.c"));
    }
}
