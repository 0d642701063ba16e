//! The publish-source step, the same for every kind: the pristine upstream
//! source as `source/<name>_<version>.orig.tar.gz`, the patches and their
//! `series` under `source/patches/`, and, for kinds other than dkms (whose
//! source packages carry the series instead), the patched tree as
//! `source/<name>-<version>-patched.tar.gz` without its `.patchkit/` record.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::fetch::Fetched;
use crate::package::tar::Names;
use crate::package::{names, tarball, FileTree};
use crate::recipe::{Kind, Recipe};
use crate::report::Reporter;

/// What the source step published, for the steps after it.
#[derive(Debug, Clone)]
pub struct Published {
    /// The orig tarball in the staging folder, and its sha256.
    pub orig: PathBuf,
    pub orig_sha256: String,
    /// `<name>-<version>`, the folder the orig tarball unpacks into.
    pub top: String,
    /// The `series` file's text: one patch name a line.
    pub series: String,
}

/// Writes the source artifacts of `recipe` into `<dir>/source/`; `tree` is
/// the patched tree, `pristine` the verified pristine one.
pub fn publish(
    recipe: &Recipe,
    fetched: &Fetched,
    tree: &Path,
    pristine: &Path,
    epoch: u64,
    dir: &Path,
    reporter: &Reporter,
) -> Result<Published> {
    let p = &recipe.package;
    let out = dir.join("source");
    let top = format!("{}-{}", p.name, p.version);
    let orig_name = names::orig(&p.name, &p.version);
    let orig = compress(
        &FileTree::from_dir(pristine, &top)?,
        epoch,
        &out,
        &orig_name,
        reporter,
    )?;
    if recipe.target.kind != Kind::Dkms {
        let patched = without_record(tree, &top)?;
        compress(
            &patched,
            epoch,
            &out,
            &names::patched(&p.name, &p.version),
            reporter,
        )?;
    }
    let series = copy_series(fetched, &out.join("patches"))?;
    Ok(Published {
        orig_sha256: crate::dist::hash_file(&orig)?.sha256,
        orig,
        top,
        series,
    })
}

/// Copies every patch into `dir` and writes `series`; returns its text.
fn copy_series(fetched: &Fetched, dir: &Path) -> Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut series = String::new();
    for patch in &fetched.patches {
        let dest = dir.join(&patch.name);
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
    let path = dir.join("series");
    std::fs::write(&path, &series).with_context(|| format!("writing {}", path.display()))?;
    Ok(series)
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
) -> Result<PathBuf> {
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
    Ok(artifact.path)
}
