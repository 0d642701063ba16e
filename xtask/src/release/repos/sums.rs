//! The digests the indexes list of a file (size, MD5, SHA-1, SHA-256,
//! SHA-512, as apt's `Packages` and a `.changes` carry them), taken in one
//! read; and the one way a file enters the repository being written.

use std::path::Path;

use anyhow::{Context, Result};
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

/// Size and digests of one file, in lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sums {
    pub(crate) size: u64,
    pub(crate) md5: String,
    pub(crate) sha1: String,
    pub(crate) sha256: String,
    pub(crate) sha512: String,
}

impl Sums {
    /// The digests of the file at `path`.
    pub(crate) fn of_file(path: &Path) -> Result<Sums> {
        let mut all = (Md5::new(), Sha1::new(), Sha256::new(), Sha512::new());
        let size = crate::shared::hash::read_blocks(path, |block| {
            all.0.update(block);
            all.1.update(block);
            all.2.update(block);
            all.3.update(block);
        })
        .with_context(|| format!("hashing {}", path.display()))?;
        Ok(Sums {
            size,
            md5: hex::encode(all.0.finalize()),
            sha1: hex::encode(all.1.finalize()),
            sha256: hex::encode(all.2.finalize()),
            sha512: hex::encode(all.3.finalize()),
        })
    }

    /// The digests of `bytes`.
    pub(crate) fn of_bytes(bytes: &[u8]) -> Sums {
        Sums {
            size: bytes.len() as u64,
            md5: hex::encode(Md5::digest(bytes)),
            sha1: hex::encode(Sha1::digest(bytes)),
            sha256: hex::encode(Sha256::digest(bytes)),
            sha512: hex::encode(Sha512::digest(bytes)),
        }
    }
}

/// Puts the file `from` at `to` (parents made): a hard link where the file
/// system allows (published files are replaced, never written in place),
/// else a copy. Never for a file that is changed afterwards (rpmsign).
pub(crate) fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    copy(from, to)
}

/// Copies `from` to `to` (parents made), mode 0644.
pub(crate) fn copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    let mut perms = std::fs::metadata(to)
        .with_context(|| format!("reading {}", to.display()))?
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
    std::fs::set_permissions(to, perms)
        .with_context(|| format!("setting the mode of {}", to.display()))
}

/// Writes `bytes` to `path` (parents made).
pub(crate) fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
