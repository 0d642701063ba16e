//! The tree a series is applied to: reads through an in-memory layer of
//! pending changes, confines every path to the tree, never follows a symlink,
//! and either writes changes through to disk or keeps them (dry runs).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};

/// A regular file's bytes and permission bits (`0o644`, `0o755`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) data: Vec<u8>,
    pub(crate) mode: u32,
}

/// A tree on disk, seen through the changes made to it so far.
pub struct Tree {
    root: PathBuf,
    write: bool,
    layer: BTreeMap<String, Option<Entry>>,
}

impl Tree {
    /// Changes are written to disk as they are committed.
    pub fn writing(root: &Path) -> Tree {
        Tree {
            root: root.to_path_buf(),
            write: true,
            layer: BTreeMap::new(),
        }
    }

    /// Changes stay in memory; the disk is only read.
    pub fn dry(root: &Path) -> Tree {
        Tree {
            root: root.to_path_buf(),
            write: false,
            layer: BTreeMap::new(),
        }
    }

    /// The file at `rel`, `None` if there is none.
    pub(crate) fn read(&self, rel: &str) -> Result<Option<Entry>> {
        if let Some(entry) = self.layer.get(rel) {
            return Ok(entry.clone());
        }
        let path = self.checked(rel)?;
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        if !meta.is_file() {
            bail!("`{rel}` in the tree is not a regular file; a patch can only change files");
        }
        let data = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        Ok(Some(Entry {
            data,
            mode: mode_of(&meta),
        }))
    }

    /// Makes `changes` (path -> new entry, `None` to delete) part of the tree.
    pub(crate) fn commit(&mut self, changes: BTreeMap<String, Option<Entry>>) -> Result<()> {
        for (rel, entry) in changes {
            if !self.write {
                self.layer.insert(rel, entry);
                continue;
            }
            let path = self.checked(&rel)?;
            match entry {
                Some(entry) => {
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)
                            .with_context(|| format!("creating {}", parent.display()))?;
                    }
                    replace(&path, &entry)?;
                }
                None => {
                    std::fs::remove_file(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                    self.prune_empty_dirs(&path);
                }
            }
        }
        Ok(())
    }

    /// `rel` below the root, after checking that it stays in the tree and
    /// that neither it nor a folder on its way is a symlink.
    fn checked(&self, rel: &str) -> Result<PathBuf> {
        confine(rel)?;
        let mut path = self.root.clone();
        for part in rel.split('/') {
            path.push(part);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                bail!(
                    "refusing to write through symlink `{}` in the tree (patch path `{rel}`)",
                    path.strip_prefix(&self.root).unwrap_or(&path).display()
                );
            }
        }
        Ok(path)
    }

    fn prune_empty_dirs(&self, file: &Path) {
        let mut dir = file.parent();
        while let Some(d) = dir {
            if d == self.root || std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
}

/// Refuses a patch path that is absolute, climbs with `..`, or names the
/// tool's own record folder.
pub(crate) fn confine(rel: &str) -> Result<()> {
    if rel.is_empty() {
        bail!("empty patch path");
    }
    if rel.starts_with('/') || Path::new(rel).is_absolute() {
        bail!("patch path `{rel}` is absolute; patches may only change files inside the tree");
    }
    for part in Path::new(rel).components() {
        match part {
            Component::Normal(name) if name == ".patchkit" => {
                bail!("patch path `{rel}` names the tool's record folder `.patchkit`; refused")
            }
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                bail!("patch path `{rel}` has a `..` component and could leave the tree; refused")
            }
            _ => bail!("patch path `{rel}` is not a plain relative path; refused"),
        }
    }
    Ok(())
}

/// Permission bits as `0o755` or `0o644` (git records nothing finer).
pub(crate) fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    if meta.permissions().mode() & 0o111 != 0 {
        0o755
    } else {
        0o644
    }
}

/// Puts `entry` at `path` by writing a new file beside it and renaming it
/// over: a file is never written in place, so another name of the old file
/// (a hard link from a pristine tree) keeps the old bytes, and a crash
/// leaves the old file or the new one, never half of one.
fn replace(path: &Path, entry: &Entry) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".patchkit-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, &entry.data).with_context(|| format!("writing {}", tmp.display()))?;
    let renamed = set_mode(&tmp, entry.mode).and_then(|()| {
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patched_file_is_replaced_never_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/a.c"), "old\n").unwrap();
        // Another name of the same file, as a hard-link copy of a pristine
        // tree would have.
        let pristine = dir.path().join("pristine-a.c");
        std::fs::hard_link(tree.join("src/a.c"), &pristine).unwrap();
        let mode = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).unwrap().permissions().mode() & 0o777
        };
        let pristine_mode = mode(&pristine);
        assert_ne!(pristine_mode, 0o755);
        let mut t = Tree::writing(&tree);
        let entry = Entry {
            data: b"new\n".to_vec(),
            mode: 0o755,
        };
        t.commit(BTreeMap::from([("src/a.c".to_owned(), Some(entry))]))
            .unwrap();
        assert_eq!(std::fs::read(tree.join("src/a.c")).unwrap(), b"new\n");
        assert_eq!(std::fs::read(&pristine).unwrap(), b"old\n");
        assert_eq!(mode(&tree.join("src/a.c")), 0o755);
        assert_eq!(mode(&pristine), pristine_mode);
        let names: Vec<_> = std::fs::read_dir(tree.join("src"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.c"], "no temporary file left");
    }

    #[test]
    fn confine_refuses_escapes() {
        assert!(confine("a/b.c").is_ok());
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            ".patchkit/state.json",
            "",
        ] {
            assert!(confine(bad).is_err(), "{bad}");
        }
    }
}
