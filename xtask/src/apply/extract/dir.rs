//! A local folder copied into the [`Sink`] (without `.git` and
//! `.patchkit`), sorted, with only files, folders and links taken, under
//! the name rules of archives (no control character in a name).

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::sink::Sink;
use super::{include_set, included, Limits, Selection};
use crate::apply::state::TreeListing;

/// Copies a local folder (without `.git` and `.patchkit`), writing at
/// most `limits`.
pub fn dir(src: &Path, sel: &Selection, dest: &Path, limits: Limits) -> Result<TreeListing> {
    let include = include_set(&sel.include)?;
    let mut sink = Sink::new(dest, limits);
    let mut stack = vec![String::new()];
    while let Some(rel_dir) = stack.pop() {
        let dir = src.join(&rel_dir);
        for (name, entry) in sorted_entries(&dir)? {
            let name = name.as_str();
            if rel_dir.is_empty() && (name == ".git" || name == crate::apply::state::DIR) {
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
            if let Some(c) = super::sink::control_char(name) {
                return Err(refuse(anyhow::anyhow!(
                    "`{}` is refused: its name holds the control character U+{:04X}, which \
                     the tree's listings and packages cannot carry; rename it",
                    rel.escape_debug(),
                    u32::from(c)
                )));
            }
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
    sink.finish().map(|(manifest, _)| manifest)
}

/// The entries of `dir` with their names, sorted by name; a name that is
/// not UTF-8 is refused.
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<(String, std::fs::DirEntry)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let Ok(name) = entry.file_name().into_string() else {
            bail!("{} has a name that is not UTF-8", entry.path().display());
        };
        entries.push((name, entry));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}
