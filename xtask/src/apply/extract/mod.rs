//! Extraction: materialises a fetched source (an archive, a git commit's
//! tree, a local folder) into a staging folder, limited to the paths the
//! recipe names, refusing every entry that could land outside the tree
//! (absolute paths, `..`, device files, links out of the tree, writes
//! through a symlink), stopping at a limit of bytes and files (archive
//! bombs), and lists what it wrote as a [`TreeListing`].
//!
//! One file an idea: `limits` (how much one extraction may write), `sink`
//! (the one writer every kind of source goes through, and where the refusals
//! live), and one reader per kind of source: `archive` (a file it hands on
//! to `tar_stream`, the tar reader, or to `deb`, the `ar` of a binary
//! package, whose members go through `tar_stream` too), `dir`, `git`.

mod archive;
mod deb;
mod dir;
mod tar_stream;
pub(crate) use dir::sorted_entries;
mod git;
mod limits;
mod sink;

use std::path::Path;

use anyhow::{Context, Result};
use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::apply::state::{self, TreeListing};
use crate::fetch::FetchedSource;
use crate::input::recipe::Source;
use crate::shared::report::Reporter;

pub use archive::{archive, archive_pinned};
pub(crate) use deb::{data_modes, CONTROL_DIR, MODES_FILE};
pub use dir::dir;
pub use git::git;
pub use limits::{Limits, MAX_BYTES_ENV, MAX_FILES_ENV};

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
    pub(crate) fn of(source: &Source) -> Selection {
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
            // The whole package: its data members, and its control members under DEBIAN/.
            Source::Deb(_) => Selection::default(),
        }
    }
}

/// How a tree records the source it was extracted from.
pub(crate) fn source_pin(source: &FetchedSource, sel: &Selection) -> state::SourcePin {
    let (kind, pin) = match source {
        FetchedSource::Archive { sha256, .. } => ("archive", Some(sha256.clone())),
        FetchedSource::Dir { .. } => ("dir", None),
        FetchedSource::Git { commit, .. } => ("git", Some(commit.clone())),
    };
    let selected = if sel.paths.is_empty() {
        sel.include.clone()
    } else {
        sel.paths.clone()
    };
    state::SourcePin {
        kind: kind.to_owned(),
        pin,
        selected,
        strip: sel.strip,
    }
}

/// Extracts `source` into the existing, empty folder `dest`, writing at
/// most `limits` (the settings').
pub(crate) fn extract(
    source: &FetchedSource,
    sel: &Selection,
    dest: &Path,
    limits: Limits,
    reporter: &Reporter,
) -> Result<TreeListing> {
    match source {
        FetchedSource::Archive { path, sha256 } => {
            archive_pinned(path, sha256, sel, dest, limits, reporter)
        }
        FetchedSource::Dir { path } if path.is_file() => archive(path, sel, dest, limits, reporter),
        FetchedSource::Dir { path } => dir(path, sel, dest, limits),
        FetchedSource::Git { repo, commit } => {
            git(repo, commit, &sel.paths, dest, limits, reporter)
        }
    }
}

/// The globs of `include` as one set; `None` keeps everything.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_matches_folders_above() {
        let set = include_set(&["drivers/gpu/drm/amd".into()]).unwrap();
        assert!(included(&set, "drivers/gpu/drm/amd/amdkfd/kfd_chardev.c"));
        assert!(!included(&set, "drivers/gpu/drm/i915/i915_drv.c"));
    }
}
