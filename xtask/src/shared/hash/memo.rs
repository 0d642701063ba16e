//! File digests taken at most once per build. A file is known by its stamp
//! (device, inode, size, modification time); what was hashed of it in this
//! build is remembered under that stamp in the build's [`Memo`] (a value
//! the build makes and hands to what hashes, dropped with the build), so the pristine check, the
//! verify step, the rpm file digests, the Arch `.MTREE` and the .deb
//! md5sums read a file of the tree once, not five times (the patched tree
//! is hard links to the pristine one: the same inodes). A file modified in
//! the last seconds could change again under the same stamp (a coarse
//! clock, a file system that keeps whole seconds): it is never remembered,
//! and is hashed each time it is asked for.
//!
//! Beside it, the md5 of content by its sha256, a function of the bytes
//! alone, kept between builds in a book in the work folder that is checked
//! against its own digest when read: a rebuild takes the md5sums of the
//! files it did not change from there.

use std::collections::HashMap;
use std::fs::Metadata;
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use md5::Md5;
use sha2::{Digest, Sha256};

/// Which digests to take of a file's bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    pub(crate) md5: bool,
    pub(crate) sha256: bool,
}

impl Want {
    pub(crate) const SHA256: Want = Want {
        md5: false,
        sha256: true,
    };
    pub(crate) const MD5: Want = Want {
        md5: true,
        sha256: false,
    };
    pub(crate) const BOTH: Want = Want {
        md5: true,
        sha256: true,
    };

    /// What of this is not in `have`.
    fn missing(self, have: &Digests) -> Want {
        Want {
            md5: self.md5 && have.md5.is_none(),
            sha256: self.sha256 && have.sha256.is_none(),
        }
    }

    fn any(self) -> bool {
        self.md5 || self.sha256
    }
}

/// The digests of one file's bytes, those taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Digests {
    pub(crate) md5: Option<[u8; 16]>,
    pub(crate) sha256: Option<[u8; 32]>,
}

impl Digests {
    /// Both digests of bytes in memory.
    pub(crate) fn of_bytes(bytes: &[u8], want: Want) -> Digests {
        Digests {
            md5: want.md5.then(|| Md5::digest(bytes).into()),
            sha256: want.sha256.then(|| Sha256::digest(bytes).into()),
        }
    }

    fn or(self, other: Digests) -> Digests {
        Digests {
            md5: self.md5.or(other.md5),
            sha256: self.sha256.or(other.sha256),
        }
    }
}

/// How recently modified a file may be and still be remembered: more
/// than a coarse kernel clock's tick and a file system's whole second.
const SETTLED: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    /// The stamp of a file modified long enough ago to be remembered.
    fn of(meta: &Metadata) -> Option<Stamp> {
        let modified = meta.modified().ok()?;
        let age = SystemTime::now().duration_since(modified).ok()?;
        (meta.is_file() && age >= SETTLED).then(|| Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        })
    }
}

/// Copies all of `src` to `dst`, taking the digests asked for; returns
/// the bytes copied.
pub fn copy_hashed(
    src: &mut dyn Read,
    dst: &mut dyn Write,
    want: Want,
) -> io::Result<(u64, Digests)> {
    let mut md5 = want.md5.then(Md5::new);
    let mut sha = want.sha256.then(Sha256::new);
    let total = super::each_block(src, 256 * 1024, |block| {
        if let Some(h) = &mut md5 {
            h.update(block);
        }
        if let Some(h) = &mut sha {
            h.update(block);
        }
        dst.write_all(block)
    })?;
    let digests = Digests {
        md5: md5.map(|h| h.finalize().into()),
        sha256: sha.map(|h| h.finalize().into()),
    };
    Ok((total, digests))
}

/// The book's first line, naming its format.
const BOOK_HEADER: &[u8] = b"rocm-patchkit md5-by-sha256 v1\n";
/// At most this many md5s are kept (2,870 make the amdgpu tree).
const BOOK_LIMIT: usize = 200_000;

/// What one build knows of file digests: by stamp, and md5 by sha256.
/// Shared by the threads that hash (it locks inside).
#[derive(Debug, Default)]
pub struct Memo(Mutex<Known>);

#[derive(Debug, Default)]
struct Known {
    files: HashMap<Stamp, Digests>,
    md5_of: HashMap<[u8; 32], [u8; 16]>,
}

impl Memo {
    fn lock(&self) -> MutexGuard<'_, Known> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What this build already knows of the file `meta` describes.
    pub(crate) fn known(&self, meta: &Metadata) -> Digests {
        let Some(stamp) = Stamp::of(meta) else {
            return Digests::default();
        };
        let memo = self.lock();
        let mut d = memo.files.get(&stamp).copied().unwrap_or_default();
        if d.md5.is_none() {
            d.md5 = d.sha256.and_then(|s| memo.md5_of.get(&s).copied());
        }
        d
    }

    /// Remembers what was taken of the file `meta` described before it was read.
    pub(crate) fn learn(&self, meta: &Metadata, d: Digests) {
        let mut memo = self.lock();
        let all = match Stamp::of(meta) {
            Some(stamp) => {
                let entry = memo.files.entry(stamp).or_default();
                *entry = entry.or(d);
                *entry
            }
            None => d,
        };
        if let (Some(sha), Some(md5)) = (all.sha256, all.md5) {
            memo.md5_of.insert(sha, md5);
        }
    }

    /// Copies the open file `file` (described by `meta`, taken when it was
    /// opened) to `dst`, hashing only what this build does not know of it
    /// yet; returns the bytes copied and the digests asked for.
    pub(crate) fn copy_file(
        &self,
        file: &mut dyn Read,
        meta: &Metadata,
        dst: &mut dyn Write,
        want: Want,
    ) -> io::Result<(u64, Digests)> {
        let have = self.known(meta);
        let (n, taken) = copy_hashed(file, dst, want.missing(&have))?;
        let all = have.or(taken);
        self.learn(meta, all);
        Ok((n, all))
    }

    /// The digests of the file at `path`, from what this build knows or by
    /// reading it, and its metadata.
    pub(crate) fn of_file(&self, path: &Path, want: Want) -> Result<(Digests, Metadata)> {
        let mut file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let meta = file
            .metadata()
            .with_context(|| format!("reading metadata of {}", path.display()))?;
        let have = self.known(&meta);
        let need = want.missing(&have);
        if !need.any() {
            return Ok((have, meta));
        }
        let (_, taken) = copy_hashed(&mut file, &mut io::sink(), need)
            .with_context(|| format!("reading {}", path.display()))?;
        let all = have.or(taken);
        self.learn(&meta, all);
        Ok((all, meta))
    }

    /// Takes the digests asked for of every file in `paths` that this build
    /// does not know yet, on all cores, so that the writers that follow read
    /// each file once and hash nothing.
    pub(crate) fn take_all(&self, paths: &[&Path], want: Want) -> Result<()> {
        let threads = crate::shared::par::cores().min(8);
        crate::shared::par::try_map(paths, threads, |path| self.of_file(path, want).map(|_| ()))?;
        Ok(())
    }

    /// Reads the md5s a book at `path` holds into this memo, when it is
    /// whole (its last 32 bytes are the BLAKE3 of the rest); a missing or
    /// damaged book costs only time.
    pub(crate) fn read_book(&self, path: &Path) {
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        let Some(body_len) = bytes.len().checked_sub(32) else {
            return;
        };
        let (body, check) = bytes.split_at(body_len);
        let Some(records) = body.strip_prefix(BOOK_HEADER) else {
            return;
        };
        if blake3::hash(body).as_bytes() != check || records.len() % 48 != 0 {
            return;
        }
        let mut memo = self.lock();
        for r in records.chunks_exact(48) {
            let sha: [u8; 32] = r[..32].try_into().expect("32 bytes");
            let md5: [u8; 16] = r[32..].try_into().expect("16 bytes");
            memo.md5_of.insert(sha, md5);
        }
    }

    /// Writes what this memo knows of md5s by sha256 to a book at `path`
    /// (a temporary file, then a rename), sorted so the same knowledge writes
    /// the same bytes.
    pub(crate) fn write_book(&self, path: &Path) -> Result<()> {
        let mut pairs: Vec<_> = self.lock().md5_of.iter().map(|(s, m)| (*s, *m)).collect();
        pairs.sort_unstable();
        pairs.truncate(BOOK_LIMIT);
        let mut body = BOOK_HEADER.to_vec();
        for (sha, md5) in pairs {
            body.extend_from_slice(&sha);
            body.extend_from_slice(&md5);
        }
        let check = blake3::hash(&body);
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp.")
            .tempfile_in(dir)
            .with_context(|| format!("writing {}", path.display()))?;
        tmp.write_all(&body)
            .and_then(|_| tmp.write_all(check.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))?;
        tmp.persist(path)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aged(path: &Path) {
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }

    #[test]
    fn a_settled_file_is_read_once_and_a_fresh_one_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (dir.path().join("old"), dir.path().join("new"));
        std::fs::write(&old, b"abc").unwrap();
        std::fs::write(&new, b"abc").unwrap();
        aged(&old);
        let memo = Memo::default();
        let (d, meta) = memo.of_file(&old, Want::BOTH).unwrap();
        assert_eq!(d, Digests::of_bytes(b"abc", Want::BOTH));
        assert_eq!(
            memo.known(&meta),
            d,
            "a settled file's digests are remembered"
        );
        let (_, meta) = memo.of_file(&new, Want::SHA256).unwrap();
        assert_eq!(
            memo.known(&meta),
            Digests::default(),
            "a file modified a moment ago could change under the same stamp"
        );
        let mut out = Vec::new();
        let (n, d) = memo
            .copy_file(&mut &b"abc"[..], &meta, &mut out, Want::BOTH)
            .unwrap();
        assert_eq!((n, out.as_slice()), (3, &b"abc"[..]));
        assert_eq!(d, Digests::of_bytes(b"abc", Want::BOTH));
    }

    #[test]
    fn a_rewritten_file_is_hashed_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"one").unwrap();
        aged(&path);
        let memo = Memo::default();
        let (first, _) = memo.of_file(&path, Want::SHA256).unwrap();
        std::fs::write(&path, b"two").unwrap();
        let (second, _) = memo.of_file(&path, Want::SHA256).unwrap();
        assert_ne!(first.sha256, second.sha256);
        assert_eq!(second, Digests::of_bytes(b"two", Want::SHA256));
    }

    #[test]
    fn the_book_keeps_md5s_and_a_damaged_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let content = b"a book entry of its own";
        let d = Digests::of_bytes(content, Want::BOTH);
        let file = dir.path().join("f");
        std::fs::write(&file, content).unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let memo = Memo::default();
        memo.learn(&meta, d);
        let book = dir.path().join("book");
        memo.write_book(&book).unwrap();
        let bytes = std::fs::read(&book).unwrap();
        assert!(bytes.starts_with(BOOK_HEADER));
        assert_eq!((bytes.len() - BOOK_HEADER.len() - 32) % 48, 0);
        memo.lock().md5_of.remove(&d.sha256.unwrap());
        let mut damaged = bytes.clone();
        let at = BOOK_HEADER.len() + 40;
        damaged[at] ^= 1;
        std::fs::write(&book, &damaged).unwrap();
        memo.read_book(&book);
        assert!(!memo.lock().md5_of.contains_key(&d.sha256.unwrap()));
        std::fs::write(&book, &bytes).unwrap();
        memo.read_book(&book);
        assert_eq!(memo.lock().md5_of.get(&d.sha256.unwrap()), d.md5.as_ref());
    }
}
