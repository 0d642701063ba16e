//! The source artifacts every build publishes under `source/`: the pristine
//! upstream source as `<name>_<version>.orig.tar.gz`, the patched tree as
//! `<name>-<version>-patched.tar.gz` (without its `.patchkit/` record), and
//! the series (`patches/<name>` plus `patches/series`).

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::extract::{self, Selection};
use crate::fetch::Fetched;
use crate::package::tar::Names;
use crate::package::{tarball, FileTree};
use crate::recipe::Recipe;
use crate::report::Reporter;

/// `source/<name>_<version>.orig.tar.gz`
pub fn orig_name(recipe: &Recipe) -> String {
    format!(
        "{}_{}.orig.tar.gz",
        recipe.package.name, recipe.package.version
    )
}

/// `source/<name>-<version>-patched.tar.gz`
pub fn patched_name(recipe: &Recipe) -> String {
    format!(
        "{}-{}-patched.tar.gz",
        recipe.package.name, recipe.package.version
    )
}

/// Writes the source artifacts of `recipe` into `<out>/source/`; `tree` is
/// the patched tree, `work` the recipe's work folder (the pristine source
/// is extracted again into `<work>/pristine`).
pub fn write(
    recipe: &Recipe,
    fetched: &Fetched,
    tree: &Path,
    work: &Path,
    epoch: i64,
    out: &Path,
    reporter: &Reporter,
) -> Result<()> {
    let dir = out.join("source");
    let top = format!("{}-{}", recipe.package.name, recipe.package.version);
    let epoch = u64::try_from(epoch).context("SOURCE_DATE_EPOCH is before 1970")?;

    let pristine = work.join("pristine");
    if pristine.exists() {
        std::fs::remove_dir_all(&pristine)
            .with_context(|| format!("removing the previous {}", pristine.display()))?;
    }
    std::fs::create_dir_all(&pristine)
        .with_context(|| format!("creating {}", pristine.display()))?;
    extract::extract(
        &fetched.source,
        &Selection::of(&recipe.source),
        &pristine,
        reporter,
    )
    .with_context(|| format!("extracting {}", recipe.source_origin()))?;
    let orig = FileTree::from_dir(&pristine, &top)?;
    compress(&orig, epoch, &dir, &orig_name(recipe), reporter)?;

    let patched = without_record(tree, &top)?;
    compress(&patched, epoch, &dir, &patched_name(recipe), reporter)?;

    let patches = dir.join("patches");
    std::fs::create_dir_all(&patches).with_context(|| format!("creating {}", patches.display()))?;
    let mut series = String::new();
    for patch in &fetched.patches {
        let dest = patches.join(&patch.name);
        std::fs::copy(&patch.path, &dest).with_context(|| {
            format!(
                "copying patch {} to {}",
                patch.path.display(),
                dest.display()
            )
        })?;
        series.push_str(&patch.name);
        series.push('\n');
    }
    std::fs::write(patches.join("series"), series)
        .with_context(|| format!("writing {}", patches.join("series").display()))?;
    Ok(())
}

/// The patched tree below `top`, leaving out the `.patchkit/` record.
fn without_record(tree: &Path, top: &str) -> Result<FileTree> {
    let mut files = FileTree::new();
    files.add_dir(top)?;
    let mut names: Vec<_> = std::fs::read_dir(tree)
        .with_context(|| format!("listing {}", tree.display()))?
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("listing {}", tree.display()))?;
    names.sort_by_key(|e| e.file_name());
    for entry in names {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            bail!("{} has a name that is not UTF-8", entry.path().display());
        };
        if name == crate::state::DIR {
            continue;
        }
        let path = format!("{top}/{name}");
        let kind = entry.file_type()?;
        if kind.is_dir() {
            files.add_dir(&path)?;
            files.add_dir_contents(&entry.path(), &path)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            files.add_symlink(&path, &target.to_string_lossy())?;
        } else {
            let exec = std::os::unix::fs::PermissionsExt::mode(&entry.metadata()?.permissions())
                & 0o111
                != 0;
            files.add_file(&path, &entry.path(), exec)?;
        }
    }
    Ok(files)
}

/// Writes one `.tar.gz`, with a spinner and the time it took.
fn compress(
    files: &FileTree,
    epoch: u64,
    dir: &Path,
    name: &str,
    reporter: &Reporter,
) -> Result<()> {
    let started = Instant::now();
    let progress = reporter.progress(format!("compress {name}"), None, false);
    let artifact = tarball::write_tar_gz(files, Names::Plain, epoch, dir, name)
        .with_context(|| format!("writing {}", dir.join(name).display()))?;
    progress.finish();
    reporter.step(format!(
        "compress: {name} ({} files, {}) in {:.1}s",
        files.len(),
        crate::fetch::inputs::human_bytes(artifact.size),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}
