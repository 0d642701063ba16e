//! The listing of a tree as it is on disk ([`scan`]): every file but
//! `.patchkit/` with its mode, sha256 and size, hashed on every core. The
//! pristine tree is checked against it before each use, and `verify`
//! compares a patched tree's record with it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::apply::state::{self, FileId, TreeListing};
use crate::shared::hash::memo::{Memo, Want};
use crate::shared::report::Reporter;

/// Every file below `root` but `.patchkit/`, hashed on every core.
pub(crate) fn scan(root: &Path, memo: &Memo, reporter: &Reporter) -> Result<TreeListing> {
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut manifest = TreeListing::new();
    let mut stack = vec![(String::new(), root.to_path_buf())];
    while let Some((rel_dir, dir)) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if rel_dir.is_empty() && name == state::DIR {
                continue;
            }
            let rel = if rel_dir.is_empty() {
                name
            } else {
                format!("{rel_dir}/{name}")
            };
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push((rel, entry.path()));
            } else if kind.is_symlink() {
                let target = std::fs::read_link(entry.path())?;
                let target = target.to_string_lossy();
                manifest.insert(
                    rel,
                    FileId {
                        mode: 0o120000,
                        sha256: crate::shared::hash::sha256_hex(target.as_bytes()),
                        size: target.len() as u64,
                    },
                );
            } else if kind.is_file() {
                files.push((rel, entry.path()));
            } else {
                let odd = FileId {
                    mode: 0,
                    sha256: String::new(),
                    size: 0,
                };
                manifest.insert(rel, odd);
            }
        }
    }
    let mut progress = reporter.progress("verify: hashing", Some(files.len() as u64), false);
    let threads = crate::shared::par::cores().min(8);
    let found = crate::shared::par::try_map(&files, threads, |(rel, path)| {
        Ok((rel.clone(), hash_file(path, memo)?))
    })?;
    progress.inc(files.len() as u64);
    manifest.extend(found);
    Ok(manifest)
}

/// A file's identity, hashed unless this build already hashed it (the
/// patched tree's files are hard links to the pristine tree's).
fn hash_file(path: &Path, memo: &Memo) -> Result<FileId> {
    let (digests, meta) = memo.of_file(path, Want::SHA256)?;
    Ok(FileId {
        mode: 0o100000 | super::tree::mode_of(&meta),
        sha256: hex::encode(digests.sha256.expect("asked for")),
        size: meta.len(),
    })
}
