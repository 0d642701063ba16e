//! The verdict cache: "off", "gated" and "no gfx12" verdicts of kernel
//! files, keyed by path, size, modification time, inode and change time,
//! so a second look at an unchanged library reads no kernel file (and a
//! file put back with its old size and modification time, as
//! `rewrite-hipblaslt` keeps them, is another inode and is read again). A
//! file that cannot be read as a cache is ignored (and replaced on save);
//! "on" is never cached (it is found fast).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::gate::Gate;
use super::FileVerdict;

/// Bump when the judging changes, so old verdicts are dropped.
const FORMAT: u32 = 2;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    format: u32,
    files: BTreeMap<PathBuf, Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    ctime_ns: i128,
    /// `off`, `gated` or `no-gfx12`.
    verdict: String,
    /// For `gated`: the target, the first site and its gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gated: Option<(String, usize, Gate)>,
}

/// Verdicts by file; `path` is where it is loaded from and saved to (none:
/// an in-memory cache that forgets).
#[derive(Debug, Default)]
pub struct VerdictCache {
    path: Option<PathBuf>,
    stored: Stored,
    changed: bool,
}

/// `$XDG_CACHE_HOME/rocm-patchkit/kernel-verdicts.json`, else
/// `$HOME/.cache/...`; none when neither is set (or HOME is `/`).
pub fn default_path(env: &crate::shared::settings::Environment) -> Option<PathBuf> {
    // a HOME of `/` (a system service) gets no cache of ours
    let base =
        crate::input::workspace::user_cache_home(env).filter(|b| b != Path::new("/.cache"))?;
    Some(base.join("rocm-patchkit").join("kernel-verdicts.json"))
}

/// What says a file is unchanged: its size, modification time, inode and
/// change time (which no one sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    ctime_ns: i128,
}

fn stamp(path: &Path) -> Option<(PathBuf, Stamp)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let ns = |secs: i64, nsec: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsec);
    let canonical = std::fs::canonicalize(path).ok()?;
    Some((
        canonical,
        Stamp {
            size: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ino: meta.ino(),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        },
    ))
}

impl Entry {
    fn stamp(&self) -> Stamp {
        Stamp {
            size: self.size,
            mtime_ns: self.mtime_ns,
            ino: self.ino,
            ctime_ns: self.ctime_ns,
        }
    }
}

impl VerdictCache {
    /// An empty cache that is never saved.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// The cache at `path`; missing or unreadable means empty.
    pub fn load(path: PathBuf) -> Self {
        let stored = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Stored>(&b).ok())
            .filter(|s| s.format == FORMAT)
            .unwrap_or(Stored {
                format: FORMAT,
                files: BTreeMap::new(),
            });
        VerdictCache {
            path: Some(path),
            stored,
            changed: false,
        }
    }

    pub(super) fn get(&self, path: &Path) -> Option<FileVerdict> {
        let (key, now) = stamp(path)?;
        let entry = self.stored.files.get(&key)?;
        if entry.stamp() != now {
            return None;
        }
        match (entry.verdict.as_str(), &entry.gated) {
            ("off", _) => Some(FileVerdict::Off),
            ("no-gfx12", _) => Some(FileVerdict::NoGfx12),
            ("gated", Some((gfx, offset, gate))) => Some(FileVerdict::Gated {
                gfx: gfx.clone(),
                offset: *offset,
                gate: gate.clone(),
            }),
            _ => None,
        }
    }

    pub(super) fn put(&mut self, path: &Path, verdict: FileVerdict) {
        let (verdict, gated) = match verdict {
            FileVerdict::Off => ("off", None),
            FileVerdict::NoGfx12 => ("no-gfx12", None),
            FileVerdict::Gated { gfx, offset, gate } => ("gated", Some((gfx, offset, gate))),
            _ => return,
        };
        if let Some((key, now)) = stamp(path) {
            self.stored.files.insert(
                key,
                Entry {
                    size: now.size,
                    mtime_ns: now.mtime_ns,
                    ino: now.ino,
                    ctime_ns: now.ctime_ns,
                    verdict: verdict.to_owned(),
                    gated,
                },
            );
            self.changed = true;
        }
    }

    /// Writes the cache back when it changed (a temporary file, then a rename).
    pub fn save(&mut self) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if !self.changed {
            return Ok(());
        }
        let dir = path
            .parent()
            .context("the verdict cache path has no folder")?;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the verdict cache folder {}", dir.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        serde_json::to_writer(&mut tmp, &self.stored)
            .with_context(|| format!("writing the verdict cache {}", path.display()))?;
        tmp.persist(path)
            .with_context(|| format!("saving the verdict cache {}", path.display()))?;
        self.changed = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_put_back_with_the_old_size_and_mtime_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k_gfx1201.co");
        std::fs::write(&path, b"rewritten").unwrap();
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        let set = |p: &Path| {
            let f = std::fs::File::options().write(true).open(p).unwrap();
            f.set_modified(when).unwrap();
        };
        set(&path);
        let mut cache = VerdictCache::in_memory();
        cache.put(&path, FileVerdict::Off);
        assert_eq!(cache.get(&path), Some(FileVerdict::Off));
        // the original back (same size, same mtime, as --undo leaves it)
        let other = dir.path().join("other");
        std::fs::write(&other, b"original!").unwrap();
        set(&other);
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(cache.get(&path), None);
    }
}
