//! The content-addressed cache of verified inputs. Layout below the cache
//! directory:
//!
//! - `sha256/<hex>`: verified blobs (tarballs, url patches, git-commit
//!   diffs); a file's name is the sha256 of its content, always.
//! - `git/<sha256-of-url>.git`: bare repositories, verified by commit id
//!   (git objects are content-addressed); each pinned commit is kept alive by
//!   a ref `refs/patchkit/<commit>`.
//! - `tmp/`: partial downloads and repositories being cloned; the only place
//!   where unverified bytes live. Leftovers of a killed run are removed by
//!   the next run that takes the lock.
//! - `taken-pins/<recipe>.toml`: pins taken by `fetch --allow-unpinned`.
//! - `corrupt/<hex>.<pid>`: blobs whose content no longer hashed to their
//!   name when a build read them, moved aside (never used, kept to inspect).
//! - `lock`: the file whose exclusive lock serialises cache mutation.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::shared::hash::{sha256_file, sha256_hex};
use crate::shared::report::Reporter;

/// The cache directory and what lives in it.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    root: PathBuf,
}

/// Held while the cache is being mutated; released when dropped.
pub(crate) struct CacheLock {
    _file: File,
}

impl Cache {
    /// The cache at `root`; nothing is created until [`Cache::lock`].
    pub(crate) fn new(root: &Path) -> Cache {
        Cache {
            root: root.to_path_buf(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Takes the exclusive cache lock, waiting (and saying so) while another
    /// process holds it, then removes what a killed run left in `tmp/`.
    pub(crate) fn lock(&self, reporter: &Reporter) -> Result<CacheLock> {
        for dir in ["sha256", "git", "tmp"] {
            let dir = self.root.join(dir);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("creating cache folder {}", dir.display()))?;
        }
        let path = self.root.join("lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening the cache lock {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                reporter.step(format!(
                    "waiting for the cache lock held by another fetch ({})",
                    path.display()
                ));
                file.lock()
                    .with_context(|| format!("locking the cache {}", path.display()))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking the cache {}", path.display()))
            }
        }
        self.clean_tmp()?;
        Ok(CacheLock { _file: file })
    }

    fn clean_tmp(&self) -> Result<()> {
        let tmp = self.tmp_dir();
        for entry in
            std::fs::read_dir(&tmp).with_context(|| format!("listing {}", tmp.display()))?
        {
            let path = entry?.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.with_context(|| format!("removing leftover {}", path.display()))?;
        }
        Ok(())
    }

    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Where the verified blob with this sha256 lives (whether or not it does).
    pub(crate) fn blob_path(&self, sha256: &str) -> PathBuf {
        self.root.join("sha256").join(sha256)
    }

    /// The verified blob with this sha256, if the cache holds it.
    pub(crate) fn blob(&self, sha256: &str) -> Option<PathBuf> {
        let path = self.blob_path(sha256);
        path.is_file().then_some(path)
    }

    /// The blob with this sha256, hashed again before it is used: a blob
    /// whose bytes changed since it was admitted (a disk error, a hand edit)
    /// is moved to `corrupt/`, reported with its path, and treated as absent
    /// so that it is fetched again.
    pub(crate) fn verified_blob(
        &self,
        sha256: &str,
        reporter: &Reporter,
    ) -> Result<Option<PathBuf>> {
        let Some(path) = self.blob(sha256) else {
            return Ok(None);
        };
        let actual = sha256_file(&path)
            .with_context(|| format!("re-hashing the cached blob {}", path.display()))?;
        if actual == sha256 {
            return Ok(Some(path));
        }
        let corrupt = self.root.join("corrupt");
        std::fs::create_dir_all(&corrupt)
            .with_context(|| format!("creating {}", corrupt.display()))?;
        let aside = corrupt.join(format!("{sha256}.{}", std::process::id()));
        std::fs::rename(&path, &aside)
            .with_context(|| format!("moving the corrupt blob {} aside", path.display()))?;
        reporter.warn(format!(
            "the cached blob {} no longer hashes to its name (it holds sha256 {actual}); moved it \
             to {} and fetching it again",
            path.display(),
            aside.display()
        ));
        Ok(None)
    }

    /// A new temporary file in `tmp/` (same filesystem as `sha256/`).
    pub(crate) fn tmp_file(&self) -> Result<tempfile::NamedTempFile> {
        tempfile::Builder::new()
            .prefix("download-")
            .tempfile_in(self.tmp_dir())
            .with_context(|| format!("creating a temporary file in {}", self.tmp_dir().display()))
    }

    /// Moves a temporary file whose content hashes to `sha256` into
    /// `sha256/<hex>`. The caller has hashed it; this is the only way a blob
    /// enters the cache.
    pub(crate) fn admit(&self, tmp: tempfile::NamedTempFile, sha256: &str) -> Result<PathBuf> {
        let dest = self.blob_path(sha256);
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("syncing {}", tmp.path().display()))?;
        tmp.persist(&dest)
            .with_context(|| format!("moving a verified download into {}", dest.display()))?;
        Ok(dest)
    }

    /// Writes `bytes` (already hashed to `sha256`) into the cache.
    pub(crate) fn admit_bytes(&self, bytes: &[u8], sha256: &str) -> Result<PathBuf> {
        let mut tmp = self.tmp_file()?;
        tmp.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.path().display()))?;
        self.admit(tmp, sha256)
    }

    /// The bare repository that mirrors `url`.
    pub(crate) fn git_repo(&self, url: &str) -> PathBuf {
        self.root
            .join("git")
            .join(format!("{}.git", sha256_hex(url.as_bytes())))
    }

    /// The record of pins taken by `fetch --allow-unpinned` for a recipe.
    pub(crate) fn taken_pins(&self, recipe: &str) -> PathBuf {
        self.root.join("taken-pins").join(format!("{recipe}.toml"))
    }
}
