//! The publish-source step, the same for every kind: the pristine upstream
//! source as `source/<name>_<version>.orig.tar.gz`, the patches and their
//! `series` under `source/patches/`, and, for hipBLASLt (the kinds with
//! source packages carry the series in them instead), the patched tree as
//! `source/<name>-<version>-patched.tar.gz` without its `.patchkit/` record.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::apply::patch::pristine::Pristine;
use crate::fetch::Fetched;
use crate::formats::tar::Names;
use crate::formats::{names, tarball, FileTree, Packing};
use crate::input::recipe::Recipe;
use crate::shared::report::Reporter;

/// What the source step published, for the steps after it.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    /// The orig tarball in the staging folder, and its sha256.
    pub(crate) orig: PathBuf,
    pub(crate) orig_sha256: String,
    /// `<name>-<version>`, the folder the orig tarball unpacks into.
    pub(crate) top: String,
    /// The `series` file's text: one patch name a line.
    pub(crate) series: String,
}

/// What the publish-source step reads: the steps before it made these.
pub(crate) struct Inputs<'a> {
    pub(crate) recipe: &'a Recipe,
    /// The verified pristine tree.
    pub(crate) pristine: &'a Pristine,
    /// The tree the recipe's transform made.
    pub(crate) tree: &'a Path,
    pub(crate) fetched: &'a Fetched,
    /// The publication's staging folder.
    pub(crate) dir: &'a Path,
    /// The recipe's work folder, where the orig tarball is kept.
    pub(crate) work: &'a Path,
    /// `SOURCE_DATE_EPOCH`.
    pub(crate) epoch: u64,
    /// The build's packing: how archives are compressed, the chunk cache.
    pub(crate) packing: &'a Packing,
    pub(crate) reporter: &'a Reporter,
}

/// Writes the source artifacts into `<staging>/source/`, from the patched
/// and the verified pristine tree.
pub(crate) fn publish(inputs: &Inputs) -> Result<Published> {
    let Inputs {
        recipe,
        pristine,
        epoch,
        ..
    } = *inputs;
    let p = &recipe.package;
    let out = inputs.dir.join("source");
    let top = format!("{}-{}", p.name, p.about.version);
    let keep = inputs.work.join("orig");
    let name = names::orig(&p.name, &p.about.version);
    let (orig, orig_sha256) = orig_tarball(pristine, &top, &name, epoch, &out, &keep, inputs)?;
    if super::kind_of(recipe.kind.name()).publishes_patched() {
        let patched = without_record(inputs.tree, &top)?;
        compress(
            &patched,
            epoch,
            &out,
            &names::patched(&p.name, &p.about.version),
            inputs,
        )?;
    }
    let series = copy_series(inputs.fetched, &out.join("patches"))?;
    Ok(Published {
        orig,
        orig_sha256,
        top,
        series,
    })
}

/// The orig tarball in `out`, and its sha256: a copy of the one kept in
/// `keep` when that was made of the same pristine listing, top folder,
/// `SOURCE_DATE_EPOCH` and tool binary and still has its recorded sha256;
/// compressed afresh (and kept) otherwise.
fn orig_tarball(
    pristine: &Pristine,
    top: &str,
    name: &str,
    epoch: u64,
    out: &Path,
    keep: &Path,
    inputs: &Inputs,
) -> Result<(PathBuf, String)> {
    let reporter = inputs.reporter;
    let key = orig_key(pristine, top, epoch);
    let (kept, key_file) = (keep.join(name), keep.join(format!("{name}.key")));
    let dest = out.join(name);
    if let Some(sha256) = std::fs::read_to_string(&key_file)
        .ok()
        .filter(|_| !crate::release::outcome::tool_identity().is_empty())
        .and_then(|t| t.strip_prefix(&key).map(|s| s.trim().to_owned()))
    {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        if std::fs::copy(&kept, &dest).is_ok()
            && crate::release::dist::hash_file(&dest)?.sha256 == sha256
        {
            reporter.step(format!("compress: {name} kept from {}", keep.display()));
            return Ok((dest, sha256));
        }
        reporter.warn(format!(
            "{} does not hash as recorded: compressing it again",
            kept.display()
        ));
    }
    let orig = compress(
        &FileTree::from_dir(&pristine.dir, top)?,
        epoch,
        out,
        name,
        inputs,
    )?;
    let sha256 = crate::release::dist::hash_file(&orig)?.sha256;
    std::fs::create_dir_all(keep).with_context(|| format!("creating {}", keep.display()))?;
    let tmp = keep.join(format!(".{name}.{}", std::process::id()));
    std::fs::copy(&orig, &tmp).with_context(|| format!("keeping {}", tmp.display()))?;
    std::fs::rename(&tmp, &kept).with_context(|| format!("keeping {}", kept.display()))?;
    std::fs::write(&key_file, format!("{key}{sha256}\n"))
        .with_context(|| format!("writing {}", key_file.display()))?;
    Ok((orig, sha256))
}

/// What an orig tarball is made of: the pristine tree (its listing), the
/// top folder, `SOURCE_DATE_EPOCH`, and the tool binary that writes it.
fn orig_key(pristine: &Pristine, top: &str, epoch: u64) -> String {
    let listing = crate::apply::state::manifest_to_text(&pristine.manifest);
    format!(
        "listing {}\ntop {top}\nepoch {epoch}\ntool {}\n",
        crate::shared::hash::sha256_hex(listing.as_bytes()),
        crate::release::outcome::tool_identity()
    )
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
    for (name, entry) in crate::apply::extract::sorted_entries(tree)? {
        let name = name.as_str();
        if name == crate::apply::state::DIR {
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

/// Writes one `.tar.gz` with the build's packing, with a spinner and the
/// time it took.
fn compress(
    files: &FileTree,
    epoch: u64,
    dir: &Path,
    name: &str,
    inputs: &Inputs,
) -> Result<PathBuf> {
    let reporter = inputs.reporter;
    let started = Instant::now();
    let progress = reporter.progress(format!("compress {name}"), None, false);
    let artifact = tarball::write_tar_gz(files, Names::Plain, epoch, dir, name, inputs.packing)
        .with_context(|| format!("writing {}", dir.join(name).display()))?;
    progress.finish();
    reporter.step(format!(
        "compress: {name} ({} files, {}) in {:.1}s",
        files.len(),
        crate::shared::report::human_size(artifact.size),
        started.elapsed().as_secs_f64()
    ));
    Ok(artifact.path)
}
