//! The source side of a config recipe's publication, what a DKMS recipe's
//! `dist/<recipe>/` carries too: the pristine tree as
//! `source/<name>_<version>.orig.tar.gz`, the series in `source/patches/`,
//! the packaging files rendered from `templates/config/` in `packaging/`,
//! and the source packages build farms take (the `.dsc` with its
//! `.debian.tar.xz`, the `.src.rpm`, the Arch `.src.tar.gz`), written into
//! a staging folder by the package writers.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::extract::{self, Selection};
use crate::fetch::Fetched;
use crate::package::{self, tar::Names, Artifact, FileTree, PackageMeta};
use crate::packaging_config::{self, Inputs};
use crate::plan::Plan;
use crate::recipe::{Format, Recipe};
use crate::render::{Rendered, Renderer};
use crate::report::Reporter;

/// What the source side is made of.
pub struct Sources<'a> {
    pub recipe: &'a Recipe,
    pub plan: &'a Plan,
    pub fetched: &'a Fetched,
    /// The binary packages' metadata: the changelog and copyright of
    /// `debian/` are the very texts the `.deb` carries.
    pub meta: &'a PackageMeta,
    /// The formats being built: each brings its source package.
    pub formats: &'a [Format],
    /// The project's `templates/`.
    pub templates: &'a Path,
    /// A work folder of this recipe, for the pristine tree.
    pub work: &'a Path,
    pub epoch: u64,
}

/// What [`write`] wrote that the binary packages' writers need to know.
pub struct Written {
    /// The source packages, for `publish::wrote` to report.
    pub artifacts: Vec<Artifact>,
    /// The rendered PKGBUILD, whose sha256 the Arch package's `.BUILDINFO`
    /// records.
    pub pkgbuild: String,
}

/// Writes the orig tarball, the series, `packaging/` and each format's
/// source package into the staging folder `dir`.
pub fn write(src: &Sources, dir: &Path, reporter: &Reporter) -> Result<Written> {
    let p = &src.recipe.package;
    let renderer = Renderer::new(src.templates)?;
    let source_dir = format!("{}-{}", p.name, p.version);

    // The pristine source, the series, and the patches.
    let pristine = pristine_tree(src, reporter)?;
    let orig_name = format!("{}_{}.orig.tar.gz", p.name, p.version);
    let orig = package::tarball::write_tar_gz(
        &FileTree::from_dir(&pristine, &source_dir)?,
        Names::Plain,
        src.epoch,
        &dir.join("source"),
        &orig_name,
    )?;
    let patches_dir = dir.join("source/patches");
    std::fs::create_dir_all(&patches_dir)
        .with_context(|| format!("creating {}", patches_dir.display()))?;
    let mut series = String::new();
    for patch in &src.fetched.patches {
        let dest = patches_dir.join(&patch.name);
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
    let series_path = patches_dir.join("series");
    std::fs::write(&series_path, &series)
        .with_context(|| format!("writing {}", series_path.display()))?;

    // Every packaging file, as a packager reads it from `packaging/`.
    let inputs = Inputs {
        orig_tarball: orig_name,
        orig_sha256: crate::dist::hash_file(&orig.path)?.sha256,
        source_dir,
        patch_sha256: src
            .fetched
            .patches
            .iter()
            .map(|p| p.sha256.clone())
            .collect(),
    };
    let values = packaging_config::values(src.recipe, src.plan, &inputs)?;
    let mut rendered = packaging_config::render(&renderer, &values)?;
    rendered.extend(crate::packaging::debian_docs(src.meta, src.epoch)?);
    for (name, text) in &rendered {
        let path = dir.join("packaging").join(name);
        let parent = path.parent().expect("rendered files have a folder");
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }

    let mut out = Vec::new();
    if src.formats.contains(&Format::Deb) {
        let _task = reporter.task("writing the Debian source package");
        out.extend(debian_source(src, &rendered, &series, &orig.path)?);
    }
    if src.formats.contains(&Format::Rpm) {
        let _task = reporter.task("writing the source rpm");
        out.push(source_rpm(src, &rendered, &orig.path, dir)?);
    }
    if src.formats.contains(&Format::Arch) {
        let _task = reporter.task("writing the Arch source package");
        out.push(arch_source(src, &rendered, &orig.path, dir)?);
    }
    Ok(Written {
        artifacts: out,
        pkgbuild: rendered["arch/PKGBUILD"].clone(),
    })
}

/// The Debian source package (`3.0 (quilt)`) beside the orig tarball:
/// `debian/` as rendered, with the series in `debian/patches/`.
fn debian_source(
    src: &Sources,
    rendered: &Rendered,
    series: &str,
    orig: &Path,
) -> Result<Vec<Artifact>> {
    let mut debian = FileTree::new();
    for (name, text) in rendered {
        if let Some(rel) = name.strip_prefix("debian/") {
            debian.add_bytes(rel, text.clone().into_bytes(), rel == "rules")?;
        }
    }
    if !src.fetched.patches.is_empty() {
        for patch in &src.fetched.patches {
            debian.add_file(&format!("patches/{}", patch.name), &patch.path, false)?;
        }
        debian.add_bytes("patches/series", series.as_bytes().to_vec(), false)?;
    }
    let dir = orig.parent().context("the orig tarball has a folder")?;
    package::dsc::write(
        &package::dsc::DebianSource {
            version: &src.recipe.package.version,
            revision: &src.recipe.package.release,
            debian: &debian,
            orig,
        },
        src.epoch,
        dir,
    )
}

/// The source rpm of the rendered spec: Source0 the orig tarball, then the
/// patches in series order.
fn source_rpm(src: &Sources, rendered: &Rendered, orig: &Path, dir: &Path) -> Result<Artifact> {
    let spec_name = format!("{}.spec", src.meta.name);
    let spec = rendered
        .get(&format!("rpm/{spec_name}"))
        .with_context(|| format!("the spec rpm/{spec_name} was not rendered"))?;
    let sources = [(file_name(orig), orig)];
    let patches: Vec<(String, &Path)> = src
        .fetched
        .patches
        .iter()
        .map(|p| (p.name.clone(), p.path.as_path()))
        .collect();
    package::srpm::write(
        src.meta,
        &package::srpm::SourceRpm {
            spec_name: &spec_name,
            spec,
            sources: &sources,
            patches: &patches,
            build_arch: "noarch",
        },
        src.epoch,
        dir,
    )
}

/// The Arch source package, as `makepkg --source` makes it:
/// `<pkgname>/` holding the PKGBUILD, its .SRCINFO, the orig tarball and
/// the patches, so makepkg builds offline from the files beside the
/// PKGBUILD.
fn arch_source(src: &Sources, rendered: &Rendered, orig: &Path, dir: &Path) -> Result<Artifact> {
    let top = &src.meta.name;
    let mut tree = FileTree::new();
    tree.add_dir(top)?;
    for (name, text) in rendered {
        if let Some(name) = name.strip_prefix("arch/") {
            tree.add_bytes(&format!("{top}/{name}"), text.clone().into_bytes(), false)?;
        }
    }
    tree.add_file(&format!("{top}/{}", file_name(orig)), orig, false)?;
    for patch in &src.fetched.patches {
        tree.add_file(&format!("{top}/{}", patch.name), &patch.path, false)?;
    }
    package::tarball::write_tar_gz(
        &tree,
        Names::Plain,
        src.epoch,
        dir,
        &package::arch::source_file_name(src.meta),
    )
}

/// The unpatched source, extracted afresh into the work folder (a config
/// recipe's source is a handful of small files).
fn pristine_tree(src: &Sources, reporter: &Reporter) -> Result<PathBuf> {
    let dest = src.work.join("pristine");
    if dest.exists() {
        std::fs::remove_dir_all(&dest)
            .with_context(|| format!("removing the previous {}", dest.display()))?;
    }
    std::fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
    let selection = Selection::of(&src.recipe.source);
    extract::extract(&src.fetched.source, &selection, &dest, reporter)
        .with_context(|| format!("extracting {}", src.recipe.source_origin()))?;
    Ok(dest)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}
