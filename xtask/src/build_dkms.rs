//! build-dkms: the maintainers' main job. Walks the whole line for a DKMS
//! recipe: fetch, apply, verify, render, package, and publish into
//! `dist/<recipe>/` atomically, or says that the publication is up to date.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::diag::UsageError;
use crate::dist::{self, Staging};
use crate::fetch::{self, FetchOptions, Fetched};
use crate::manifest::Manifest;
use crate::package::{self, tar::Names, FileTree, PackageMeta};
use crate::packaging;
use crate::patch::{stage, Tolerance};
use crate::plan::{self, Plan};

pub use crate::publish::Outcome;
use crate::publish::{self, template_bytes, Stamp};
use crate::recipe::{Dkms, Format, Kind, Recipe};
use crate::render::Renderer;
use crate::workspace::Workspace;
use crate::{extract, state, target, verify};

/// What to build.
#[derive(Debug, Clone)]
pub struct Options {
    pub recipe: String,
    /// `--kernel`; the newest headers under `modules_dir` otherwise.
    pub kernel: Option<String>,
    pub modules_dir: PathBuf,
    /// `--formats`; the recipe's otherwise.
    pub formats: Option<Vec<Format>>,
    /// `--out`; `dist/<recipe>` otherwise.
    pub out: Option<PathBuf>,
    pub fetch: FetchOptions,
}

pub fn run(ws: &Workspace, opts: &Options) -> Result<Outcome> {
    let recipe = Recipe::load(&ws.root, &opts.recipe)?;
    let dkms = dkms_of(&recipe)?;
    let kernel = target::pick_kernel(opts.kernel.as_deref(), &opts.modules_dir)?;
    target::check_kernel(&recipe, &kernel)?;
    let formats = opts
        .formats
        .clone()
        .unwrap_or_else(|| recipe.target.formats.clone());
    let epoch = target::source_date_epoch(&ws.root)?;
    let plan = plan::plan(&recipe)?;
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| ws.root.join("dist").join(&recipe.name));
    dist::check_replaceable(&out)?;
    let templates_dir = ws.root.join("templates");
    let renderer = Renderer::new(&templates_dir)?;
    let templates = template_bytes(&templates_dir)?;
    let reporter = &ws.reporter;

    let fetched = fetch::fetch(ws, &recipe, &opts.fetch)?;
    let mut build = BTreeMap::new();
    build.insert("kernel".to_owned(), kernel.clone());
    build.insert("formats".to_owned(), publish::formats_line(&formats));
    let mut manifest = Manifest::new(&plan, &fetched, epoch, build, &templates)?;
    let lock = ws.lock_work(&recipe.name)?;
    let work = lock.dir.clone();
    let stamp = Stamp::new(work.join("published.stamp"), &manifest, &out);
    if stamp.up_to_date(&out, &manifest) {
        return Ok(Outcome::UpToDate { dir: out });
    }

    let tree = patched_tree(ws, &recipe, &fetched, &work.join("tree"))?;
    manifest.record_placement(&tree)?;
    let pristine = pristine_tree(ws, &recipe, &fetched, &work.join("pristine"))?;

    let epoch_u = u64::try_from(epoch).context("SOURCE_DATE_EPOCH is negative")?;
    let p = &recipe.package;
    let source_dir = format!("{}-{}", p.name, p.version);
    let staging = Staging::begin(&out)?;
    let dir = staging.dir().to_path_buf();

    // The pristine source, the series, and the patches.
    let orig_name = format!("{}_{}.orig.tar.gz", p.name, p.version);
    let task = reporter.task(format!("writing source/{orig_name}"));
    let orig_tree = FileTree::from_dir(&pristine, &source_dir)?;
    let orig = package::tarball::write_tar_gz(
        &orig_tree,
        Names::Plain,
        epoch_u,
        &dir.join("source"),
        &orig_name,
    )?;
    drop(task);
    let orig_sha256 = dist::hash_file(&orig.path)?.sha256;
    let patches_dir = dir.join("source/patches");
    std::fs::create_dir_all(&patches_dir)?;
    let mut series = String::new();
    for patch in &fetched.patches {
        std::fs::copy(&patch.path, patches_dir.join(&patch.name)).with_context(|| {
            format!(
                "copying patch {} into {}",
                patch.name,
                patches_dir.display()
            )
        })?;
        series.push_str(&patch.name);
        series.push('\n');
    }
    std::fs::write(patches_dir.join("series"), &series)?;

    // The DKMS tree and every packaging file rendered for it.
    let tree_root = if dkms.tree == "." {
        tree.clone()
    } else {
        tree.join(&dkms.tree)
    };
    anyhow::ensure!(
        tree_root.is_dir(),
        "`dkms.tree = \"{}\"` of {} is not a folder of the patched source: fix the recipe",
        dkms.tree,
        recipe.path.display()
    );
    let mut inputs = packaging::Inputs {
        epoch,
        orig_tarball: orig_name.clone(),
        orig_sha256,
        source_dir: source_dir.clone(),
        patch_sha256: fetched.patches.iter().map(|p| p.sha256.clone()).collect(),
        dkms_conf_sha256: None,
        tree_entries: top_level_entries(&tree_root)?,
    };
    let dkms_conf = packaging::render(&renderer, &packaging::values(&recipe, &plan, &inputs)?)?
        ["dkms.conf"]
        .clone();
    inputs.dkms_conf_sha256 = Some(plan::sha256_hex(dkms_conf.as_bytes()));
    let meta = package_meta(&recipe, &plan, epoch)?;
    let mut rendered = packaging::render(&renderer, &packaging::values(&recipe, &plan, &inputs)?)?;
    rendered.extend(packaging::debian_docs(&meta, epoch_u)?);
    for (name, text) in &rendered {
        if name.starts_with("scripts/") {
            continue;
        }
        let path = dir.join("packaging").join(name);
        std::fs::create_dir_all(path.parent().expect("rendered files have a folder"))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }

    let prefix = package::dkms::source_dir(&p.name, &p.version);
    let mut dkms_tree = FileTree::from_dir(&tree_root, &prefix)?;
    dkms_tree.remove(&format!("{prefix}/{}", state::DIR));
    dkms_tree.add_bytes(
        &format!("{prefix}/dkms.conf"),
        dkms_conf.clone().into_bytes(),
        false,
    )?;
    let sources = SourceInputs {
        orig: &orig.path,
        series: &series,
        fetched: &fetched,
        rendered: &rendered,
        dkms_conf: &dir.join("packaging/dkms.conf"),
    };
    if formats.contains(&Format::Deb) {
        let task = reporter.task("writing the Debian source package");
        for artifact in debian_source(&recipe, &sources, epoch_u, &dir.join("source"))? {
            publish::wrote(reporter, &artifact, &dir);
        }
        drop(task);
    }
    if formats.contains(&Format::Arch) {
        let task = reporter.task("writing the Arch source package");
        let artifact = arch_source(&meta, &sources, epoch_u, &dir)?;
        drop(task);
        publish::wrote(reporter, &artifact, &dir);
    }
    if formats.contains(&Format::Rpm) {
        let task = reporter.task("writing the source rpm");
        let artifact = source_rpm(&meta, &sources, epoch_u, &dir)?;
        drop(task);
        publish::wrote(reporter, &artifact, &dir);
    }

    let scripts_of = |post: &str, pre: &str| package::Scripts {
        post_install: Some(rendered[post].clone()),
        pre_remove: Some(rendered[pre].clone()),
        arch_install: None,
    };
    for format in &formats {
        let task = reporter.task(format!("writing the {} package", format.as_str()));
        let artifact = match format {
            Format::Deb => package::deb::write(
                &meta,
                &dkms_tree,
                &scripts_of("scripts/postinst", "scripts/prerm"),
                epoch_u,
                &dir,
            )?,
            Format::Rpm => package::rpm::write(
                &meta,
                &dkms_tree,
                &scripts_of("scripts/rpm-post", "scripts/rpm-preun"),
                epoch_u,
                &dir,
            )?,
            Format::Arch => {
                let pkgbuild = rendered["arch/PKGBUILD"].as_bytes();
                package::arch::write(
                    &meta,
                    &dkms_tree,
                    &package::Scripts {
                        arch_install: Some(rendered["scripts/arch-install"].clone()),
                        ..package::Scripts::default()
                    },
                    Some(pkgbuild),
                    epoch_u,
                    &dir,
                )?
            }
            Format::Tar => {
                let source = dkms_tree.subtree(&prefix)?;
                package::tarball::write_dkms(&source, &p.name, &p.version, epoch_u, &dir)?
            }
        };
        drop(task);
        publish::wrote(reporter, &artifact, &dir);
    }

    publish::finish(staging, manifest, &stamp)
}

/// What the source packages are made of: the files already in the
/// staging folder and the rendered packaging.
struct SourceInputs<'a> {
    orig: &'a Path,
    series: &'a str,
    fetched: &'a Fetched,
    rendered: &'a crate::render::Rendered,
    dkms_conf: &'a Path,
}

/// The Debian source package (`3.0 (quilt)`) beside the orig tarball:
/// `debian/` as rendered, with the series in `debian/patches/`.
fn debian_source(
    recipe: &Recipe,
    inputs: &SourceInputs,
    epoch: u64,
    dir: &Path,
) -> Result<Vec<package::Artifact>> {
    let mut debian = FileTree::new();
    for (name, text) in inputs.rendered {
        if let Some(rel) = name.strip_prefix("debian/") {
            debian.add_bytes(rel, text.clone().into_bytes(), rel == "rules")?;
        }
    }
    if !inputs.fetched.patches.is_empty() {
        for patch in &inputs.fetched.patches {
            debian.add_file(&format!("patches/{}", patch.name), &patch.path, false)?;
        }
        debian.add_bytes("patches/series", inputs.series.as_bytes().to_vec(), false)?;
    }
    package::dsc::write(
        &package::dsc::DebianSource {
            version: &recipe.package.version,
            revision: &recipe.package.release,
            debian: &debian,
            orig: inputs.orig,
        },
        epoch,
        dir,
    )
}

/// The Arch source package, as `makepkg --source` makes it:
/// `<pkgname>-<version>-<release>.src.tar.gz` holding `<pkgname>/` with the
/// PKGBUILD, its .SRCINFO and every local source the PKGBUILD names, so
/// makepkg builds offline from the files beside the PKGBUILD.
fn arch_source(
    meta: &PackageMeta,
    inputs: &SourceInputs,
    epoch: u64,
    dir: &Path,
) -> Result<package::Artifact> {
    let top = &meta.name;
    let mut tree = FileTree::new();
    tree.add_dir(top)?;
    // The PKGBUILD, its .SRCINFO and any file it names beside it (an
    // install script).
    for (name, text) in inputs.rendered {
        if let Some(name) = name.strip_prefix("arch/") {
            tree.add_bytes(&format!("{top}/{name}"), text.clone().into_bytes(), false)?;
        }
    }
    anyhow::ensure!(
        tree.get(&format!("{top}/PKGBUILD")).is_some(),
        "arch/PKGBUILD was not rendered: restore templates/arch/PKGBUILD.hbs"
    );
    let orig_name = inputs
        .orig
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    tree.add_file(&format!("{top}/{orig_name}"), inputs.orig, false)?;
    tree.add_file(&format!("{top}/dkms.conf"), inputs.dkms_conf, false)?;
    for patch in &inputs.fetched.patches {
        tree.add_file(&format!("{top}/{}", patch.name), &patch.path, false)?;
    }
    package::tarball::write_tar_gz(
        &tree,
        package::tar::Names::Plain,
        epoch,
        dir,
        &package::arch::source_file_name(meta),
    )
}

/// The source rpm of the rendered spec: Source0 the orig tarball, Source1
/// dkms.conf, then the patches in series order.
fn source_rpm(
    meta: &PackageMeta,
    inputs: &SourceInputs,
    epoch: u64,
    dir: &Path,
) -> Result<package::Artifact> {
    let spec_name = format!("{}.spec", meta.name);
    let spec = inputs
        .rendered
        .get(&format!("rpm/{spec_name}"))
        .with_context(|| format!("the spec rpm/{spec_name} was not rendered"))?;
    let file_name = |path: &Path| {
        path.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    let sources = [
        (file_name(inputs.orig), inputs.orig),
        ("dkms.conf".to_owned(), inputs.dkms_conf),
    ];
    let patches: Vec<(String, &Path)> = inputs
        .fetched
        .patches
        .iter()
        .map(|p| (p.name.clone(), p.path.as_path()))
        .collect();
    package::srpm::write(
        meta,
        &package::srpm::SourceRpm {
            spec_name: &spec_name,
            spec,
            sources: &sources,
            patches: &patches,
            build_arch: "noarch",
        },
        epoch,
        dir,
    )
}

/// The recipe's `[dkms]` table, or a refusal that says what to add.
fn dkms_of(recipe: &Recipe) -> Result<&Dkms> {
    publish::require_kind(recipe, Kind::Dkms)?;
    recipe.dkms.as_ref().ok_or_else(|| {
        UsageError(format!(
            "{}: build-dkms needs a `[dkms]` table with at least one `[[dkms.module]]` (see recipes/README.md)",
            recipe.path.display()
        ))
        .into()
    })
}

/// The patched tree: reused when its state record is for these very inputs
/// and it verifies clean, applied afresh otherwise.
fn patched_tree(
    ws: &Workspace,
    recipe: &Recipe,
    fetched: &Fetched,
    dest: &Path,
) -> Result<PathBuf> {
    if let Ok(Some((recorded, _))) = state::read(dest) {
        let same_patches = recorded.patches.len() == fetched.patches.len()
            && recorded
                .patches
                .iter()
                .zip(&fetched.patches)
                .all(|(r, f)| r.name == f.name && r.sha256 == f.sha256);
        let pin = stage::source_pin(&fetched.source, &extract::Selection::of(&recipe.source));
        if same_patches
            && recorded.recipe.name == recipe.name
            && pin.pin.is_some()
            && pin == recorded.source
        {
            let report = verify::tree(dest, &ws.reporter)?;
            if report.ok {
                ws.reporter.step(format!(
                    "apply: {} is already patched and verifies",
                    dest.display()
                ));
                return Ok(dest.to_path_buf());
            }
        }
    }
    stage::apply_recipe(recipe, fetched, dest, Tolerance::strict(), &ws.reporter)?;
    let report = verify::tree(dest, &ws.reporter)?;
    anyhow::ensure!(
        report.ok,
        "the tree just applied at {} does not verify: run `cargo xtask verify {}`",
        dest.display(),
        dest.display()
    );
    Ok(dest.to_path_buf())
}

/// The unpatched source, for the pristine archive distro packagers start from.
fn pristine_tree(
    ws: &Workspace,
    recipe: &Recipe,
    fetched: &Fetched,
    dest: &Path,
) -> Result<PathBuf> {
    let marker = dest.with_extension("pin");
    let pin = stage::source_pin(&fetched.source, &extract::Selection::of(&recipe.source));
    let pin_text = serde_json::to_string(&pin)?;
    if pin.pin.is_some()
        && dest.is_dir()
        && std::fs::read_to_string(&marker).is_ok_and(|m| m == pin_text)
    {
        return Ok(dest.to_path_buf());
    }
    if dest.exists() {
        std::fs::remove_dir_all(dest)
            .with_context(|| format!("removing the previous {}", dest.display()))?;
    }
    let staging = dest.with_extension(format!("staging-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("removing the stale {}", staging.display()))?;
    }
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    extract::extract(
        &fetched.source,
        &extract::Selection::of(&recipe.source),
        &staging,
        &ws.reporter,
    )
    .with_context(|| format!("extracting {}", recipe.source_origin()))?;
    std::fs::rename(&staging, dest)
        .with_context(|| format!("moving {} to {}", staging.display(), dest.display()))?;
    std::fs::write(&marker, pin_text).with_context(|| format!("writing {}", marker.display()))?;
    Ok(dest.to_path_buf())
}

/// The package metadata of a DKMS recipe, as every format of build-dkms
/// writes it (the benchmark packages with the very same).
pub fn package_meta(recipe: &Recipe, plan: &Plan, epoch: i64) -> Result<PackageMeta> {
    let p = &recipe.package;
    let mut changes = vec![format!(
        "Built by rocm-patchkit from {} and {}.",
        plan.recipe_file,
        packaging::source_line(&recipe.source)
    )];
    changes.extend(
        plan.patches
            .iter()
            .map(|patch| format!("Patch {}.", patch.name)),
    );
    Ok(PackageMeta {
        name: package::dkms::package_name(&p.name),
        source: Some(p.name.clone()),
        version: p.version.clone(),
        release: p.release.clone(),
        summary: p.summary.clone(),
        description: p.description.trim().to_owned(),
        license: p.license.clone(),
        homepage: p.homepage.clone(),
        maintainer: p.maintainer.clone(),
        depends: vec!["dkms".to_owned()],
        changes,
        copyright: vec![format!(
            "{} The upstream authors of {}",
            packaging::year(epoch),
            p.name
        )],
        relations: package::Relations::for_dkms_modules(
            dkms_of(recipe)?.modules.iter().map(|m| m.name.as_str()),
        ),
    })
}

fn top_level_entries(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}
