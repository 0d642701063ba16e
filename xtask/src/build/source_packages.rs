//! The source packages of a dkms or config build, one per format, made from
//! what the publish-source and render steps left in the staging folder:
//! Debian's
//! `3.0 (quilt)` (`.dsc` + `.debian.tar.xz` beside the orig tarball), the
//! `.src.rpm` of the rendered spec, and the Arch `.src.tar.gz` that
//! `makepkg --source` would make.

use std::path::Path;

use anyhow::{Context, Result};

use super::exec::Cx;
use crate::package::{self, names, Artifact, FileTree, Format, PackageMeta};

/// Writes the source packages of every format built, reporting each.
pub fn write_all(formats: &[Format], cx: &Cx, meta: &PackageMeta) -> Result<()> {
    for format in formats {
        let task = cx
            .ws
            .reporter
            .task(format!("writing the {} source package", format.as_str()));
        let before = cx.chunk_count();
        let artifacts = write(*format, cx, meta)?;
        // What the format took from the chunk cache, on its largest file.
        let note = cx.chunk_note(before);
        let largest = artifacts.iter().map(|a| a.size).max();
        for artifact in &artifacts {
            let note = if Some(artifact.size) == largest {
                &note[..]
            } else {
                ""
            };
            crate::publish::wrote_noting(&cx.ws.reporter, artifact, cx.dir()?, note);
        }
        drop(task);
    }
    Ok(())
}

/// Writes the source package(s) of `format`; none for the tarball.
fn write(format: Format, cx: &Cx, meta: &PackageMeta) -> Result<Vec<Artifact>> {
    let epoch = cx.epoch_u()?;
    let dir = cx.dir()?;
    Ok(match format {
        Format::Deb => debian(cx, epoch, &dir.join("source"))?,
        Format::Rpm => vec![rpm(cx, meta, epoch, dir)?],
        Format::Arch => vec![arch(cx, meta, epoch, dir)?],
        Format::Tar => Vec::new(),
    })
}

/// `debian/` as rendered, with the series in `debian/patches/`.
fn debian(cx: &Cx, epoch: u64, dir: &Path) -> Result<Vec<Artifact>> {
    let mut debian = FileTree::new();
    for (name, text) in cx.rendered()? {
        if let Some(rel) = name.strip_prefix("debian/") {
            debian.add_bytes(rel, text.clone().into_bytes(), rel == "rules")?;
        }
    }
    let patches = &cx.fetched()?.patches;
    if !patches.is_empty() {
        for patch in patches {
            debian.add_file(&format!("patches/{}", patch.name), &patch.path, false)?;
        }
        let series = cx.source()?.series.as_bytes().to_vec();
        debian.add_bytes("patches/series", series, false)?;
    }
    package::dsc::write(
        &package::dsc::DebianSource {
            version: &cx.recipe.package.about.version,
            revision: &cx.recipe.package.about.release,
            debian: &debian,
            orig: &cx.source()?.orig,
        },
        epoch,
        dir,
        cx.packing(),
    )
}

/// `<pkgname>/` with the PKGBUILD, its .SRCINFO and every local source the
/// PKGBUILD names, so makepkg builds offline from the files beside it.
fn arch(cx: &Cx, meta: &PackageMeta, epoch: u64, dir: &Path) -> Result<Artifact> {
    let top = &meta.name;
    let mut tree = FileTree::new();
    tree.add_dir(top)?;
    for (name, text) in cx.rendered()? {
        if let Some(name) = name.strip_prefix("arch/") {
            tree.add_bytes(&format!("{top}/{name}"), text.clone().into_bytes(), false)?;
        }
    }
    anyhow::ensure!(
        tree.get(&format!("{top}/PKGBUILD")).is_some(),
        "arch/PKGBUILD was not rendered: restore templates/arch/PKGBUILD.hbs"
    );
    let orig = &cx.source()?.orig;
    tree.add_file(&format!("{top}/{}", file_name(orig)), orig, false)?;
    for (name, path) in super::kind_of(cx.recipe.kind.name()).extra_sources(cx)? {
        tree.add_file(&format!("{top}/{name}"), &path, false)?;
    }
    for patch in &cx.fetched()?.patches {
        tree.add_file(&format!("{top}/{}", patch.name), &patch.path, false)?;
    }
    package::tarball::write_tar_gz(
        &tree,
        package::tar::Names::Plain,
        epoch,
        dir,
        &names::arch_source(meta),
        cx.packing(),
    )
}

/// Source0 the orig tarball, then (dkms) Source1 dkms.conf, then the
/// patches in series order.
fn rpm(cx: &Cx, meta: &PackageMeta, epoch: u64, dir: &Path) -> Result<Artifact> {
    let spec_name = format!("{}.spec", meta.name);
    let spec = cx
        .rendered()?
        .get(&format!("rpm/{spec_name}"))
        .with_context(|| format!("the spec rpm/{spec_name} was not rendered"))?;
    let orig = cx.source()?.orig.as_path();
    let extra = super::kind_of(cx.recipe.kind.name()).extra_sources(cx)?;
    let mut sources = vec![(file_name(orig), orig)];
    sources.extend(
        extra
            .iter()
            .map(|(name, path)| (name.clone(), path.as_path())),
    );
    let patches: Vec<(String, &Path)> = cx
        .fetched()?
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
        cx.packing(),
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}
