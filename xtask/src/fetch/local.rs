//! Local inputs: archives and folders on this machine, read in place and
//! verified against their pin when the recipe gives one.

use std::path::Path;

use anyhow::{Context, Result};

use crate::shared::hash::{sha256_file, sha256_hex};

/// The deterministic hash of a folder, which a `local` folder source's
/// `sha256` pins.
///
/// Algorithm: walk the folder recursively, following no symlink. For every
/// regular file and every symlink, make one line, with paths relative to the
/// folder, `/`-separated:
///
/// - regular file: `file <mode> <sha256 of content> <path>\n`, where
///   `<mode>` is `755` when any executable bit is set and `644` otherwise;
/// - symlink: `link 777 <sha256 of the link target text> <path>\n`.
///
/// Sort the lines by path (byte order) and take the sha256 of their
/// concatenation, as lower-case hex. Folders themselves (and so empty
/// folders), owners and timestamps do not count.
pub(crate) fn tree_sha256(dir: &Path) -> Result<String> {
    let mut entries = Vec::new();
    walk(dir, dir, &mut entries)?;
    entries.sort();
    let mut hasher = crate::shared::hash::Hasher::new();
    for (path, line) in entries {
        hasher.update(format!("{line} {path}\n").as_bytes());
    }
    Ok(hasher.hex())
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<()> {
    let listing = std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
    for entry in listing {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("reading metadata of {}", path.display()))?;
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        if meta.is_dir() {
            walk(root, &path, out)?;
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)
                .with_context(|| format!("reading symlink {}", path.display()))?;
            let hash = sha256_hex(target.as_os_str().as_encoded_bytes());
            out.push((rel, format!("link 777 {hash}")));
        } else if meta.is_file() {
            use std::os::unix::fs::PermissionsExt;
            let mode = if meta.permissions().mode() & 0o111 != 0 {
                "755"
            } else {
                "644"
            };
            out.push((rel, format!("file {mode} {}", sha256_file(&path)?)));
        }
    }
    Ok(())
}

/// Hashes a local source (archive file or folder) and checks it against
/// `expected`; a mismatch names the path, the expected and the actual hash.
pub(crate) fn verify(path: &Path, expected: Option<&str>, memo: Option<&Path>) -> Result<String> {
    Ok(check(path, expected, memo)?.sha256)
}

/// A local source's sha256, and whether it was remembered rather than read.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub(crate) sha256: String,
    /// Taken from the memo: it vouches for nothing by itself, so the
    /// archive's bytes are hashed again as they are extracted
    /// (`extract::archive_pinned`) and refused if they differ.
    pub(crate) remembered: bool,
}

/// [`verify`], saying whether the memo answered.
///
/// An archive's hash is remembered in `memo` (keyed by its path, with its
/// size, inode, mtime and ctime), so that a build with nothing changed
/// does not read a 145 MiB kernel tarball (0.11 s of CPU) to learn its pin.
/// The memo is a hint for that and nothing more: a memo rewritten to match
/// a swapped file names the old pin, under which the kept pristine tree
/// (hashed against its own listing) or the refusal of the extraction, never
/// the swapped bytes, is what a build gets.
pub(crate) fn check(path: &Path, expected: Option<&str>, memo: Option<&Path>) -> Result<Checked> {
    let mut remembered = false;
    let actual = if path.is_dir() {
        tree_sha256(path)?
    } else if path.is_file() {
        match memo {
            Some(memo) => {
                let (sha, hit) = sha256_file_remembered(path, memo)?;
                remembered = hit;
                sha
            }
            None => sha256_file(path)?,
        }
    } else {
        anyhow::bail!(
            "local source {} does not exist: fix `local` in the recipe or create it",
            path.display()
        );
    };
    if let Some(expected) = expected.filter(|e| *e != actual) {
        let what = if path.is_dir() {
            "tree sha256"
        } else {
            "sha256"
        };
        anyhow::bail!(
            "local source {}: {what} mismatch: expected {expected}, got {actual}; \
             if the change is intended, update `sha256` in the recipe",
            path.display()
        );
    }
    Ok(Checked {
        sha256: actual,
        remembered,
    })
}

/// sha256 of a local file, from `memo_dir` when the file's identity (path,
/// size, inode, mtime, ctime) is unchanged since it was last read; `true`
/// when the memo answered.
fn sha256_file_remembered(path: &Path, memo_dir: &Path) -> Result<(String, bool)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    let identity = format!(
        "{} {} {} {}.{} {}.{}",
        path.display(),
        meta.len(),
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    let memo = memo_dir.join(crate::shared::hash::sha256_hex(
        path.display().to_string().as_bytes(),
    ));
    if let Ok(text) = std::fs::read_to_string(&memo) {
        if let Some((seen, sha)) = text.trim_end().rsplit_once(' ') {
            if seen == identity && sha.len() == 64 {
                return Ok((sha.to_owned(), true));
            }
        }
    }
    let sha = sha256_file(path)?;
    std::fs::create_dir_all(memo_dir)
        .with_context(|| format!("creating {}", memo_dir.display()))?;
    let tmp = memo.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, format!("{identity} {sha}\n"))
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &memo).with_context(|| format!("writing {}", memo.display()))?;
    Ok((sha, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_hash_sees_content_paths_and_the_executable_bit() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.sh"), "echo\n").unwrap();
        let first = tree_sha256(dir.path()).unwrap();
        assert_eq!(first, tree_sha256(dir.path()).unwrap());
        let expected =
            sha256_hex(format!("file 644 {} sub/a.sh\n", sha256_hex(b"echo\n")).as_bytes());
        assert_eq!(first, expected);
        let script = dir.path().join("sub/a.sh");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_ne!(first, tree_sha256(dir.path()).unwrap());
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(first, tree_sha256(dir.path()).unwrap());
    }
}
