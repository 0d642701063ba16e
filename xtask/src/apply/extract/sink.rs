//! The one writer below a staging folder that every kind of source goes
//! through: it refuses any entry that could land outside the tree (absolute
//! paths, `..`, links out of the tree, alone or followed one through
//! another, writes through a symlink), counts bytes and files against the
//! [`Limits`], and records what it wrote, with the archive's modes and
//! owners where they are not the tree's (0644/0755, root).

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::limits::{Limits, MAX_BYTES_ENV, MAX_FILES_ENV};
use crate::apply::state::{FileId, TreeListing};

/// Writes entries below `dest`, refusing anything that could leave it.
pub(super) struct Sink {
    dest: PathBuf,
    pub(super) manifest: TreeListing,
    /// Every symlink written, by path, with its target.
    symlinks: BTreeMap<String, String>,
    meta: ArchiveMeta,
    dirs: HashSet<PathBuf>,
    limits: Limits,
    bytes: u64,
    entries: u64,
}

/// What an archive said of its entries that the tree on disk does not
/// keep (files are 0644 or 0755, folders 0755, all root's): the modes and
/// owners that differ, by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ArchiveMeta {
    /// Permission bits (setuid, setgid and sticky included) of the files
    /// and folders whose bits are not 0644/0755 (0755 for a folder).
    pub(crate) modes: BTreeMap<String, u32>,
    /// `(uid, gid, user, group)` of the entries not owned by root.
    pub(crate) owners: BTreeMap<String, (u64, u64, String, String)>,
}

/// Links followed one through another before a chain counts as a loop
/// (Linux's own limit).
const MAX_LINKS: usize = 40;

/// The limit was reached: not a path problem, so reported on its own.
#[derive(Debug)]
pub(super) struct OverLimit(pub(super) String);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OverLimit {}

impl Sink {
    pub(super) fn new(dest: &Path, limits: Limits) -> Sink {
        Sink {
            dest: dest.to_path_buf(),
            manifest: TreeListing::new(),
            symlinks: BTreeMap::new(),
            meta: ArchiveMeta::default(),
            dirs: HashSet::new(),
            limits,
            bytes: 0,
            entries: 0,
        }
    }

    /// The most bytes one extraction may write.
    pub(super) fn byte_limit(&self) -> u64 {
        self.limits.bytes
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
            if self.symlinks.contains_key(&rel[..end]) {
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

    pub(super) fn dir(&mut self, rel: &str) -> Result<()> {
        self.count()?;
        let path = self.parent(rel)?;
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        self.dirs.insert(path);
        Ok(())
    }

    pub(super) fn file(&mut self, rel: &str, exec: bool, data: impl Read) -> Result<()> {
        self.count()?;
        let path = self.parent(rel)?;
        if path.symlink_metadata().is_ok() {
            std::fs::remove_file(&path).with_context(|| format!("replacing {}", path.display()))?;
        }
        // Private until its mode is set, and never through a link planted there.
        use std::os::unix::fs::OpenOptionsExt;
        let mut out = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let room = self.limits.bytes.saturating_sub(self.bytes);
        let mut data = data.take(room.saturating_add(1));
        let (sha256, size) = crate::shared::hash::copy_hashed(&mut data, &mut out)
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

    /// Notes what the archive says of the entry written at `rel` (a file
    /// or folder): its permission bits and owner, kept where they differ
    /// from what the tree holds.
    pub(super) fn note(
        &mut self,
        rel: &str,
        dir: bool,
        mode: u32,
        owner: (u64, u64, String, String),
    ) {
        let bits = mode & 0o7777;
        let normal = if dir {
            bits == 0o755
        } else {
            bits == 0o644 || bits == 0o755
        };
        if !normal {
            self.meta.modes.insert(rel.to_owned(), bits);
        }
        let root = |name: &str| name.is_empty() || name == "root";
        if owner.0 != 0 || owner.1 != 0 || !root(&owner.2) || !root(&owner.3) {
            self.meta.owners.insert(rel.to_owned(), owner);
        }
    }

    /// Ends the extraction: every symlink is followed through the others
    /// as a reader would, and one that leads out of the tree (or loops) is
    /// refused; then what was written, and what the archive said of it.
    pub(super) fn finish(self) -> Result<(TreeListing, ArchiveMeta)> {
        for (rel, target) in &self.symlinks {
            self.resolve_inside(rel, target)?;
        }
        Ok((self.manifest, self.meta))
    }

    /// Follows the link at `rel` to `target` through the tree's other
    /// links; an error when it climbs above the tree or loops.
    fn resolve_inside(&self, rel: &str, target: &str) -> Result<()> {
        let mut real: Vec<&str> = rel.split('/').collect();
        real.pop();
        let mut pending: Vec<&str> = target.split('/').rev().collect();
        let mut followed = 0;
        while let Some(part) = pending.pop() {
            match part {
                "" | "." => {}
                ".." => {
                    if real.pop().is_none() {
                        bail!(
                            "symlink `{rel}` points to `{target}`, which leads outside the tree \
                             when the links it goes through are followed"
                        );
                    }
                }
                name => {
                    real.push(name);
                    let Some(next) = self.symlinks.get(&real.join("/")) else {
                        continue;
                    };
                    followed += 1;
                    if followed > MAX_LINKS {
                        bail!("symlink `{rel}` points to `{target}`, a chain of links that loops");
                    }
                    real.pop();
                    pending.extend(next.split('/').rev());
                }
            }
        }
        Ok(())
    }

    pub(super) fn symlink(&mut self, rel: &str, target: &[u8]) -> Result<()> {
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
        self.symlinks.insert(rel.to_owned(), target.to_owned());
        self.manifest.insert(
            rel.to_owned(),
            FileId {
                mode: 0o120000,
                sha256: crate::shared::hash::sha256_hex(target.as_bytes()),
                size: target.len() as u64,
            },
        );
        Ok(())
    }

    /// A tar hard link: a copy of a file extracted earlier in this tree.
    pub(super) fn hardlink(&mut self, rel: &str, target: &str) -> Result<()> {
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

/// A `/`-separated entry path made safe: `None` when nothing is left after
/// stripping, an error for absolute paths and `..`.
pub(super) fn entry_path(raw: &[u8], strip: u32) -> Result<Option<String>> {
    let text = std::str::from_utf8(raw).map_err(|_| anyhow::anyhow!("path is not UTF-8"))?;
    if text.starts_with('/') {
        bail!("is an absolute path");
    }
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => bail!("has a `..` component"),
            p if control_char(p).is_some() => bail!(
                "has the control character U+{:04X} in its name",
                control_char(p).map_or(0, u32::from)
            ),
            p => parts.push(p),
        }
    }
    let strip = strip as usize;
    if parts.len() <= strip {
        return Ok(None);
    }
    Ok(Some(parts[strip..].join("/")))
}

/// The first control character of a name (a newline, an escape, a NUL):
/// none may be in a path of the tree, whatever the source, since the
/// listings that verify and the packages read are one path a line and a
/// name is printed to terminals.
pub(super) fn control_char(name: &str) -> Option<char> {
    name.chars().find(|c| c.is_control())
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
        for evil in [&b"a/b\nc"[..], b"a\x1b[2Jb", b"tab\there", b"nul\0"] {
            assert!(entry_path(evil, 0).is_err(), "{evil:?}");
        }
    }

    #[test]
    fn links_are_followed_through_each_other_before_the_tree_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let sink = |links: &[(&str, &str)]| {
            let mut sink = Sink::new(dir.path(), Limits::DEFAULT);
            for (rel, target) in links {
                sink.symlinks
                    .insert((*rel).to_owned(), (*target).to_owned());
            }
            sink.finish().map(|_| ())
        };
        // each stays inside by its own text
        sink(&[("a/here", "."), ("a/b/up", "../here/x")]).unwrap();
        let out = sink(&[
            ("usr/share/here", "."),
            ("usr/share/out", "here/here/here/../../../../.."),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            out.contains("`usr/share/out`") && out.contains("outside the tree"),
            "{out}"
        );
        // a link through a link to a folder higher up
        let out = sink(&[("d/top", ".."), ("d/e/f", "../top/..")])
            .unwrap_err()
            .to_string();
        assert!(out.contains("`d/e/f`"), "{out}");
        let out = sink(&[("x", "y"), ("y", "x")]).unwrap_err().to_string();
        assert!(out.contains("loops"), "{out}");
    }
}
