//! The pristine tree of a recipe's source, extracted once into the work
//! folder and kept, keyed by the source's pin and selection (`<dir>.pin`),
//! with its file listing beside it (`<dir>.manifest`). It is hashed against
//! that listing before each use, so a changed pristine tree is extracted
//! again rather than used. A patched tree is made from a hard-link copy of
//! it: the patch engine replaces files by rename, never writing in place,
//! so the pristine tree keeps its bytes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::apply::extract::{self, Limits, Selection};
use crate::apply::state::{self, TreeListing};
use crate::fetch::FetchedSource;
use crate::input::recipe::Recipe;
use crate::input::workspace::RemoveOnDrop;
use crate::shared::hash::memo::Memo;
use crate::shared::report::Reporter;

/// A verified pristine tree and its listing.
#[derive(Debug, Clone)]
pub(crate) struct Pristine {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: TreeListing,
}

/// The pristine tree of `recipe` at `dir`: the kept one when its pin and
/// selection are these and every file hashes as listed, else extracted
/// afresh (an unpinned local folder is extracted every time).
pub(crate) fn ensure(
    recipe: &Recipe,
    source: &FetchedSource,
    dir: &Path,
    memo: &Memo,
    limits: Limits,
    reporter: &Reporter,
) -> Result<Pristine> {
    let selection = Selection::of(&recipe.source);
    let pin = extract::source_pin(source, &selection);
    let key = serde_json::to_string(&pin)?;
    let marker = dir.with_extension("pin");
    let listing = dir.with_extension("manifest");
    if pin.pin.is_some() && dir.is_dir() && std::fs::read_to_string(&marker).is_ok_and(|m| m == key)
    {
        if let Some(manifest) = kept(dir, &listing, memo, reporter)? {
            reporter.step(format!("pristine: {} kept", dir.display()));
            return Ok(Pristine {
                dir: dir.to_path_buf(),
                manifest,
            });
        }
        reporter.warn(format!(
            "{} no longer matches its listing: extracting it again",
            dir.display()
        ));
    }
    // The marker goes first and comes back last: a run killed in between
    // leaves no marker on a partial tree.
    remove(&marker)?;
    let staging = dir.with_extension(format!("staging-{}", std::process::id()));
    for old in [dir, staging.as_path()] {
        if old.exists() {
            std::fs::remove_dir_all(old)
                .with_context(|| format!("removing the previous {}", old.display()))?;
        }
    }
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    // A refused source (a bomb, a path out of the tree, a corrupt archive)
    // takes its staging folder with it, as `apply` does.
    let mut cleanup = RemoveOnDrop(Some(staging.clone()));
    let manifest = extract::extract(source, &selection, &staging, limits, reporter)
        .with_context(|| format!("extracting {}", recipe.source_origin()))?;
    let text = state::manifest_to_text(&manifest);
    std::fs::write(&listing, text).with_context(|| format!("writing {}", listing.display()))?;
    std::fs::rename(&staging, dir)
        .with_context(|| format!("moving {} to {}", staging.display(), dir.display()))?;
    cleanup.0 = None;
    std::fs::write(&marker, key).with_context(|| format!("writing {}", marker.display()))?;
    Ok(Pristine {
        dir: dir.to_path_buf(),
        manifest,
    })
}

/// The listing of a kept tree, when the tree still hashes as listed.
fn kept(
    dir: &Path,
    listing: &Path,
    memo: &Memo,
    reporter: &Reporter,
) -> Result<Option<TreeListing>> {
    let Ok(text) = std::fs::read_to_string(listing) else {
        return Ok(None);
    };
    let Ok(manifest) = state::manifest_from_text(&text) else {
        return Ok(None);
    };
    let now = super::scan::scan(dir, memo, reporter)?;
    Ok((now == manifest).then_some(manifest))
}

fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Fills the empty folder `to` with `from`: folders made, files hard-linked
/// (copied where a link cannot be made, across file systems), symlinks
/// made again.
pub(crate) fn link_copy(from: &Path, to: &Path) -> Result<()> {
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        for entry in
            std::fs::read_dir(&src).with_context(|| format!("listing {}", src.display()))?
        {
            let entry = entry.with_context(|| format!("listing {}", src.display()))?;
            let (path, dest) = (entry.path(), dst.join(entry.file_name()));
            let kind = entry.file_type()?;
            if kind.is_dir() {
                std::fs::create_dir(&dest)
                    .with_context(|| format!("creating {}", dest.display()))?;
                stack.push((path, dest));
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path)?;
                std::os::unix::fs::symlink(&target, &dest)
                    .with_context(|| format!("linking {}", dest.display()))?;
            } else if std::fs::hard_link(&path, &dest).is_err() {
                std::fs::copy(&path, &dest)
                    .with_context(|| format!("copying {} to {}", path.display(), dest.display()))?;
            }
        }
    }
    Ok(())
}
