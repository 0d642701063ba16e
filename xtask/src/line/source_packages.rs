//! The source packages of a dkms or config build, one per format, made by
//! the format (`PackageFormat::write_source_packages`) from what the
//! publish-source and render steps left in the staging folder: Debian's
//! `3.0 (quilt)` (`.dsc` + `.debian.tar.xz` beside the orig tarball), the
//! `.src.rpm` of the rendered spec, and the Arch `.src.tar.gz` that
//! `makepkg --source` would make.

use std::path::PathBuf;

use anyhow::Result;

use super::exec::Cx;
use crate::formats::{Artifact, Format, PackageMeta, Sources};

/// Writes the source packages of every format built, reporting each.
pub(crate) fn write_all(formats: &[Format], cx: &Cx, meta: &PackageMeta) -> Result<()> {
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
            crate::release::outcome::wrote_noting(&cx.ws.reporter, artifact, cx.dir()?, note);
        }
        drop(task);
    }
    Ok(())
}

/// Writes the source package(s) of `format`, as the format makes them
/// from the rendered packaging files and the published source.
fn write(format: Format, cx: &Cx, meta: &PackageMeta) -> Result<Vec<Artifact>> {
    if format.get().source_packages(meta).is_empty() {
        return Ok(Vec::new());
    }
    let patches: Vec<(String, PathBuf)> = cx
        .fetched()?
        .patches
        .iter()
        .map(|p| (p.name.clone(), p.path.clone()))
        .collect();
    let source = cx.source()?;
    let about = &cx.recipe.package.about;
    let sources = Sources {
        meta,
        version: &about.version,
        revision: &about.release,
        rendered: cx.rendered()?,
        orig: &source.orig,
        extra: &super::kind_of(cx.recipe.kind.name()).extra_sources(cx)?,
        patches: &patches,
        series: &source.series,
        epoch: cx.epoch_u()?,
        packing: cx.packing(),
    };
    format.get().write_source_packages(&sources, cx.dir()?)
}
