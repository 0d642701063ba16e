//! Source tarballs: a deterministic `.tar.gz` of any tree (the pristine
//! source archive) and the source-only DKMS tarball that
//! `dkms ldtarball` loads (`dkms_main_tree/` plus `dkms_source_tree/`
//! holding `dkms.conf`, the layout `dkms mktarball --source-only` makes).

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::compress::Compression;
use super::packing::Packing;
use super::tar::{write_tree, Names};
use super::tree::FileTree;
use super::{Artifact, Output};

/// Writes `<out_dir>/<name>`: `tree` as gzip'd tar (`gzip -n -6`), entry
/// names as `names` says.
pub fn write_tar_gz(
    tree: &FileTree,
    names: Names,
    epoch: u64,
    out_dir: &Path,
    name: &str,
    packing: &Packing,
) -> Result<Artifact> {
    let mut out = Output::create(out_dir, name)?;
    {
        let enc = packing.encoder(Compression::TARBALL, out.writer())?;
        let enc = write_tree(enc, tree, epoch, names)?;
        let mut w = enc
            .finish()
            .with_context(|| format!("compressing {name}"))?;
        w.flush().with_context(|| format!("writing {name}"))?;
    }
    out.commit()
}

/// Writes the DKMS source tarball of `source` (paths relative to the DKMS
/// source root, with `dkms.conf` at the top).
pub fn write_dkms(
    source: &FileTree,
    module: &str,
    version: &str,
    epoch: u64,
    out_dir: &Path,
    packing: &Packing,
) -> Result<Artifact> {
    if source.get("dkms.conf").is_none_or(|e| e.is_dir()) {
        bail!("the DKMS source of {module} {version} has no dkms.conf at its top; render it into the staging tree first");
    }
    let mut tree = source.nested("dkms_source_tree")?;
    tree.add_dir("dkms_main_tree")?;
    write_tar_gz(
        &tree,
        Names::DotSlash,
        epoch,
        out_dir,
        &super::names::dkms_tarball(module, version),
        packing,
    )
}
