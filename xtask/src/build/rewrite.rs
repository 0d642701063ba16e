//! What a `kind = "rewrite"` recipe brings to the build line: its source is
//! an upstream binary package (`source.deb`, pinned by sha256), its
//! transform is the expert-scheduling rewrite of every kernel file
//! (`codeobj::rewrite`), recorded in the tree's state record beside the
//! (empty) patch series and in the manifest, and its output is the `.deb`
//! that takes the place of the upstream one: the same name, paths and
//! modes and control fields, a version just above it, only kernel files
//! changed.
//!
//! Steps: ensure-applied (the pristine tree is the package as `dpkg-deb -R`
//! lays it out; the rewritten tree is a hard-link copy in which each
//! rewritten file is replaced by rename, so the pristine one keeps its
//! bytes), verify (the state record, and every kernel file read again: no
//! site left), assemble (the tree without `DEBIAN/`, and the carried
//! control members), package (`package::deb_carried`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

use super::exec::Cx;
use super::{plan, Assembled, Options};
use crate::codeobj::rewrite::{self, Rewrite};
use crate::extract::CONTROL_DIR;
use crate::fetch::Fetched;
use crate::package::deb_carried::Carried;
use crate::package::{FileTree, Format, PackageMeta};
use crate::patch::pristine::{self, Pristine};
use crate::recipe::{DebSource, Recipe, Source};
use crate::state::{self, FileId, Manifest, RewriteRecord, RewrittenFile, State};

/// The name the transform is recorded by.
pub const TRANSFORM: &str = "expert-sched-off";
/// What the version of the package built adds to the upstream one
/// (`7.1.1+dfsg-4` becomes `7.1.1+dfsg-4+patchkit1` for release 1): above
/// it for apt, below the distribution's next revision.
pub const VERSION_TAG: &str = "+patchkit";

/// A rewrite build's settings, resolved before anything is fetched.
pub struct Part {
    pub deb: DebSource,
    pub formats: Vec<Format>,
}

impl Part {
    pub fn new(recipe: &Recipe, opts: &Options) -> Result<Part> {
        let Source::Deb(deb) = &recipe.source else {
            bail!(crate::diag::UsageError(format!(
                "{}: a rewrite recipe's source is a binary package: `[source] deb = \"name\"` \
                 with `version`, `arch` and `sha256`",
                recipe.path.display()
            )));
        };
        let formats = opts.formats_of(recipe);
        if formats != [Format::Deb] {
            bail!(crate::diag::UsageError(format!(
                "a rewrite recipe builds only the `deb` that takes the place of {}",
                deb.file_name()
            )));
        }
        Ok(Part {
            deb: deb.clone(),
            formats,
        })
    }

    pub fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("transform".to_owned(), TRANSFORM.to_owned()),
            ("replaces".to_owned(), self.deb.file_name()),
        ])
    }

    /// The packages' tree (the rewritten tree without `DEBIAN/`) and
    /// metadata, with the upstream control members carried.
    pub fn assemble(&self, cx: &Cx) -> Result<Assembled> {
        let tree_dir = cx.tree()?;
        let mut tree = FileTree::from_dir(tree_dir, "")?;
        tree.remove(state::DIR).remove(CONTROL_DIR);
        let control = carried_control(&tree_dir.join(CONTROL_DIR))?;
        let record = state::read(tree_dir)?
            .context("the rewritten tree has no state record")?
            .0;
        let sites: usize = record
            .rewrites
            .iter()
            .flat_map(|r| &r.files)
            .map(|f| f.sites)
            .sum();
        let files: usize = record.rewrites.iter().map(|r| r.files.len()).sum();
        Ok(Assembled {
            meta: plan::identity(cx.recipe),
            machine: plan::machine(cx.recipe.target.kind),
            tree,
            scripts: BTreeMap::new(),
            pkgbuild: None,
            params: BTreeMap::from([
                ("rewritten_files".to_owned(), files.to_string()),
                ("rewritten_sites".to_owned(), sites.to_string()),
            ]),
            carried: Some(control),
        })
    }
}

/// The package's version split as the writers join it (`version-release`):
/// the upstream version and the revision with [`VERSION_TAG`] and the
/// recipe's release (`7.1.1+dfsg`, `4+patchkit1`).
pub fn version_of(recipe: &Recipe) -> (String, String) {
    let upstream = match &recipe.source {
        Source::Deb(deb) => deb.version.clone(),
        _ => recipe.package.version.clone(),
    };
    let (version, revision) = match upstream.rsplit_once('-') {
        Some((v, r)) => (
            v.to_owned(),
            format!("{r}{VERSION_TAG}{}", recipe.package.release),
        ),
        None => (
            upstream.clone(),
            format!("0{VERSION_TAG}{}", recipe.package.release),
        ),
    };
    (version, revision)
}

fn carried_control(dir: &Path) -> Result<Carried> {
    let mut control = None;
    let mut members = Vec::new();
    for (entry, _) in crate::extract::sorted_entries(dir)? {
        let path = dir.join(&entry);
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if !meta.is_file() {
            bail!(
                "{} is not a file: a control member must be one",
                path.display()
            );
        }
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        let mode = if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        match entry.as_str() {
            "control" => {
                control = Some(
                    String::from_utf8(bytes)
                        .with_context(|| format!("{} is not UTF-8", path.display()))?,
                )
            }
            "md5sums" => {}
            _ => members.push((entry, mode, bytes)),
        }
    }
    let control =
        control.with_context(|| format!("the package has no {}/control", dir.display()))?;
    Ok(Carried { control, members })
}

/// The rewritten tree at `<work>/tree`: kept when its state record is
/// exactly the one this build would write, else made afresh from a
/// hard-link copy of the pristine tree.
pub fn ensure_applied(cx: &mut Cx) -> Result<()> {
    let work = cx.work()?.to_path_buf();
    let dest = work.join("tree");
    let fetched = cx.fetched()?.clone();
    let reporter = &cx.ws.reporter;
    let memo = cx.digests();
    let pristine = pristine::ensure(
        cx.recipe,
        &fetched.source,
        &work.join("pristine"),
        memo,
        reporter,
    )?;
    let reuse = matches!(state::read(&dest), Ok(Some((recorded, _)))
        if made_by(&recorded, cx.recipe, &fetched));
    if reuse {
        reporter.step(format!("apply: {} is already rewritten", dest.display()));
    } else {
        apply(cx.recipe, &fetched, &pristine, &dest, reporter)?;
    }
    cx.pristine = Some(pristine);
    cx.reused = reuse;
    cx.tree = Some(dest);
    Ok(())
}

/// Whether `recorded` is the record [`apply`] would write: the same recipe
/// and version, the same pinned source, no patches, this transform, this tool.
pub fn made_by(recorded: &State, recipe: &Recipe, fetched: &Fetched) -> bool {
    let pin = crate::patch::stage::source_pin(&fetched.source, &Default::default());
    recorded.format == state::FORMAT
        && recorded.recipe.name == recipe.name
        && recorded.recipe.version == recipe.package.version
        && pin.pin.is_some()
        && recorded.source == pin
        && recorded.patches.is_empty()
        && recorded.rewrites.len() == 1
        && recorded.rewrites[0].transform == TRANSFORM
        && recorded.tool == state::ToolRef::current()
}

/// Links the pristine tree into a staging folder, rewrites every kernel
/// file there (each replaced by rename), writes the state record and moves
/// the tree into place at `dest`.
pub fn apply(
    recipe: &Recipe,
    fetched: &Fetched,
    pristine: &Pristine,
    dest: &Path,
    reporter: &crate::report::Reporter,
) -> Result<()> {
    let name = dest
        .file_name()
        .context("the tree has a name")?
        .to_string_lossy()
        .into_owned();
    let staged = crate::patch::stage::Staging::for_tree(dest, &name)?;
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
            manifest_sha256: crate::hash::sha256_hex(state::manifest_to_text(&manifest).as_bytes()),
            patches: Vec::new(),
            recipe: state::RecipeRef {
                name: recipe.name.clone(),
                version: recipe.package.version.clone(),
            },
            rewrites: vec![RewriteRecord {
                files,
                transform: TRANSFORM.to_owned(),
            }],
            source: crate::patch::stage::source_pin(&fetched.source, &Default::default()),
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

/// Runs `work` over `items` on every core, in order of the results' index.
fn on_all_cores<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<R>>>> =
        Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = work(item);
                let failed = r.is_err();
                results.lock().expect("no worker panics holding it")[i] = Some(r);
                if failed {
                    next.store(items.len(), std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let results = results.into_inner().expect("no worker panics holding it");
    let mut out = Vec::with_capacity(items.len());
    for r in results.into_iter().flatten() {
        out.push(r?);
    }
    if out.len() != items.len() {
        bail!("a worker stopped before every kernel file was read");
    }
    Ok(out)
}

/// Rewrites every kernel file below `tree` that switches expert scheduling
/// on, updating `manifest`; returns what changed, sorted by path.
fn rewrite_all(
    tree: &Path,
    manifest: &mut Manifest,
    reporter: &crate::report::Reporter,
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
    let changed = on_all_cores(&paths, |rel| {
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
            after: crate::hash::sha256_hex(&new),
            before: crate::hash::sha256_hex(&bytes),
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

/// The verify step of a rewritten tree: the state record (every file as
/// recorded) and every kernel file read again, none with a site left; a
/// kept tree that fails is made again once. Copies the record's rewrites
/// into the build manifest.
pub fn verify(cx: &mut Cx) -> Result<Vec<crate::manifest::RewriteRef>> {
    let tree = cx.tree()?.to_path_buf();
    let mut ok = check(&tree, cx)?;
    if !ok && cx.reused {
        cx.ws.reporter.warn(format!(
            "{} was changed since it was rewritten: rewriting it again",
            tree.display()
        ));
        let pristine = cx
            .pristine
            .clone()
            .context("ensure-applied keeps the pristine tree")?;
        apply(cx.recipe, cx.fetched()?, &pristine, &tree, &cx.ws.reporter)?;
        ok = check(&tree, cx)?;
    }
    if !ok {
        bail!(
            "the tree just rewritten at {} does not verify: run `cargo xtask verify {}`",
            tree.display(),
            tree.display()
        );
    }
    let (record, _) = state::read(&tree)?.context("the rewritten tree has its state record")?;
    Ok(crate::manifest::rewrites_of(&record))
}

/// Whether `tree` verifies against its record and no kernel file has a site.
fn check(tree: &Path, cx: &Cx) -> Result<bool> {
    let report = crate::verify::tree(tree, cx.digests(), &cx.ws.reporter)?;
    if !report.ok {
        return Ok(false);
    }
    let left = sites_left(tree)?;
    for (path, n) in &left {
        cx.ws.reporter.warn(format!(
            "{path} still switches expert scheduling on at {n} site(s)"
        ));
    }
    Ok(left.is_empty())
}

/// Every kernel file below `tree` read again: those with sites left, and how many.
pub fn sites_left(tree: &Path) -> Result<Vec<(String, usize)>> {
    let (_, manifest) = state::read(tree)?.context("the tree has a state record")?;
    let paths: Vec<PathBuf> = manifest
        .keys()
        .filter(|p| is_kernel_file(p))
        .map(PathBuf::from)
        .collect();
    let found = on_all_cores(&paths, |rel| {
        let path = tree.join(rel);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let sites = rewrite::find_sites(&bytes).map_err(|why| {
            anyhow::anyhow!("kernel file {} cannot be read: {why}", rel.display())
        })?;
        Ok((rel.display().to_string(), sites.len()))
    })?;
    Ok(found.into_iter().filter(|(_, n)| *n > 0).collect())
}

/// The version of a rewrite recipe's package: [`version_of`].
pub fn identity(recipe: &Recipe, meta: &mut PackageMeta) {
    let (version, release) = version_of(recipe);
    meta.version = version;
    meta.release = release;
}
