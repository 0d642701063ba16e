//! The `expert-sched-off` transform: every gfx12 kernel file of the tree
//! (`*.co`, `*.hsaco` outside `DEBIAN/`) rewritten by `codeobj::rewrite`
//! so that expert scheduling is switched off, each rewritten file replaced
//! by rename in a hard-link copy of the pristine tree (which keeps its
//! bytes), its sites recorded in the state record; and its check: the
//! record, and every kernel file read again with no site left.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};

use crate::apply::extract::CONTROL_DIR;
use crate::apply::patch::pristine::{self, Pristine};
use crate::apply::state::{self, FileId, RewriteRecord, RewrittenFile, State, TreeListing};
use crate::fetch::Fetched;
use crate::gpu::codeobj::rewrite::{self, Rewrite};
use crate::input::recipe::Recipe;
use crate::shared::report::Reporter;

/// The name the transform is recorded by.
pub(crate) const TRANSFORM: &str = "expert-sched-off";

/// Links the pristine tree into a staging folder, rewrites every kernel
/// file there (each replaced by rename), writes the state record and moves
/// the tree into place at `dest`.
pub(crate) fn apply(
    recipe: &Recipe,
    fetched: &Fetched,
    pristine: &Pristine,
    dest: &Path,
    reporter: &Reporter,
) -> Result<()> {
    let name = dest
        .file_name()
        .context("the tree has a name")?
        .to_string_lossy()
        .into_owned();
    let staged = crate::apply::patch::stage::StagedTree::for_tree(dest, &name)?;
    let staging = staged.dir.clone();
    let built = (|| {
        pristine::link_copy(&pristine.dir, &staging)?;
        let mut manifest = pristine.manifest.clone();
        let files = rewrite_all(&staging, &mut manifest, reporter)?;
        let sites: usize = files.iter().map(|f| f.sites).sum();
        reporter.step(format!(
            "apply: {TRANSFORM}: {} kernel files rewritten, {sites} sites",
            files.len()
        ));
        let state = State {
            format: state::FORMAT,
            manifest_sha256: crate::shared::hash::sha256_hex(
                state::manifest_to_text(&manifest).as_bytes(),
            ),
            record: state::Record::Rewrites(vec![RewriteRecord {
                files,
                transform: TRANSFORM.to_owned(),
            }]),
            recipe: state::RecipeRef {
                name: recipe.name.clone(),
                version: recipe.package.about.version.clone(),
            },
            source: crate::apply::extract::source_pin(&fetched.source, &Default::default()),
            tolerance: state::ToleranceRecord { fuzz: 0 },
            tool: state::ToolRef::current(),
        };
        state::write(&staging, &state, &manifest)
    })();
    built.with_context(|| format!("rewriting the kernel files of {}", recipe.name))?;
    staged.commit(dest)
}

/// Whether a tree path is a kernel file (`*.co`, `*.hsaco`) outside `DEBIAN/`.
fn is_kernel_file(path: &str) -> bool {
    !path.starts_with(&format!("{CONTROL_DIR}/"))
        && (path.ends_with(".co") || path.ends_with(".hsaco"))
}

/// Rewrites every kernel file below `tree` that switches expert scheduling
/// on, updating `manifest`; returns what changed, sorted by path.
fn rewrite_all(
    tree: &Path,
    manifest: &mut TreeListing,
    reporter: &Reporter,
) -> Result<Vec<RewrittenFile>> {
    let paths: Vec<String> = manifest
        .keys()
        .filter(|p| is_kernel_file(p))
        .cloned()
        .collect();
    let progress = Mutex::new(reporter.progress(
        format!("{TRANSFORM}: {} kernel files", paths.len()),
        Some(paths.len() as u64),
        false,
    ));
    let changed = crate::shared::par::try_map(&paths, crate::shared::par::cores(), |rel| {
        let path = tree.join(rel);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let outcome = rewrite::rewrite_file(&bytes)
            .map_err(|why| anyhow::anyhow!("kernel file {rel} cannot be rewritten: {why}"))?;
        progress.lock().expect("no worker panics holding it").inc(1);
        let Rewrite::Rewritten {
            bytes: new, sites, ..
        } = outcome
        else {
            return Ok(None);
        };
        let tmp = path.with_file_name(format!(
            ".{}.rewrite-{}",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::write(&tmp, &new).with_context(|| format!("writing {}", tmp.display()))?;
        let mode = std::fs::metadata(&path)?.permissions();
        std::fs::set_permissions(&tmp, mode)?;
        // By rename: the pristine tree's hard link keeps the original.
        std::fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))?;
        Ok(Some(RewrittenFile {
            after: crate::shared::hash::sha256_hex(&new),
            before: crate::shared::hash::sha256_hex(&bytes),
            path: rel.clone(),
            sites: sites.len(),
            value_offsets: sites.iter().map(|s| s.value_offset).collect(),
            size_after: new.len() as u64,
        }))
    })?;
    let files: Vec<RewrittenFile> = changed.into_iter().flatten().collect();
    for f in &files {
        let id = manifest
            .get_mut(&f.path)
            .context("a rewritten file is listed")?;
        *id = FileId {
            mode: id.mode,
            sha256: f.after.clone(),
            size: f.size_after,
        };
    }
    Ok(files)
}

/// Whether `tree` verifies against its record and no kernel file has a site.
pub(crate) fn check(
    tree: &Path,
    memo: &crate::shared::hash::memo::Memo,
    reporter: &Reporter,
) -> Result<bool> {
    let report = crate::apply::verify::tree(tree, memo, reporter)?;
    if !report.ok {
        return Ok(false);
    }
    let left = sites_left(tree)?;
    for (path, n) in &left {
        reporter.warn(format!(
            "{path} still switches expert scheduling on at {n} site(s)"
        ));
    }
    Ok(left.is_empty())
}

/// Every kernel file below `tree` read again: those with sites left, and how many.
pub(crate) fn sites_left(tree: &Path) -> Result<Vec<(String, usize)>> {
    let (_, manifest) = state::read(tree)?.context("the tree has a state record")?;
    let paths: Vec<PathBuf> = manifest
        .keys()
        .filter(|p| is_kernel_file(p))
        .map(PathBuf::from)
        .collect();
    let found = crate::shared::par::try_map(&paths, crate::shared::par::cores(), |rel| {
        let path = tree.join(rel);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let sites = rewrite::find_sites(&bytes).map_err(|why| {
            anyhow::anyhow!("kernel file {} cannot be read: {why}", rel.display())
        })?;
        Ok((rel.display().to_string(), sites.len()))
    })?;
    Ok(found.into_iter().filter(|(_, n)| *n > 0).collect())
}
