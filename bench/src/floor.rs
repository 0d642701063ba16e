//! The compressor floor of `bench package`: each format's payload
//! uncompressed (the archive our writer streams through its compressor,
//! without the small generated metadata files), written once and untimed,
//! then compressed in a child process by that writer's [`Compression`]
//! alone, with the same threads and settings, into a file committed as
//! our packages are. No writer at that compressor and level can take less
//! wall time than this.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::formats;
use xtask::formats::Format;
use xtask::formats::{Artifact, Compression, FileTree, Output};
use xtask::shared::hash::memo::{copy_hashed, Want};

/// The compressor and level of our `fmt` writer.
pub(crate) fn compression(fmt: Format) -> Compression {
    fmt.get().compression()
}

/// `floor-<fmt>.tar` (`.cpio` for rpm): the uncompressed payload.
fn payload_name(fmt: Format) -> String {
    format!("floor-{}.{}", fmt.as_str(), formats::of(fmt).archive)
}

/// The compressed payload's file name: the payload's plus `.xz`, `.zst`
/// or `.gz`.
pub(crate) fn compressed_name(fmt: Format) -> String {
    let ext = match compression(fmt) {
        Compression::None => "",
        Compression::Gzip(_) => ".gz",
        Compression::Xz(_) => ".xz",
        Compression::Zstd(_) => ".zst",
    };
    format!("{}{ext}", payload_name(fmt))
}

/// Writes `<out>/floor-<fmt>.tar` (or `.cpio`): the DKMS tree `tree`
/// (below `prefix`) as our `fmt` writer lays it out before compressing it
/// (deb's data.tar, rpm's cpio, the Arch files' tar, the DKMS tarball's
/// tar), streamed to disk. Returns its path and size.
pub(crate) fn prepare(
    fmt: Format,
    tree: &FileTree,
    prefix: &str,
    out: &Path,
) -> Result<(PathBuf, u64)> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(payload_name(fmt));
    let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let w = BufWriter::with_capacity(1 << 20, file);
    let w = (formats::of(fmt).payload)(w, tree, prefix)?;
    let file = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", path.display()))?;
    let size = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    Ok((path, size))
}

/// `patchkit-bench package-one --floor`: streams `payload` through `fmt`'s
/// compressor into `<out_dir>/<compressed_name>`.
pub(crate) fn compress(fmt: Format, payload: &Path, out_dir: &Path) -> Result<Artifact> {
    let name = compressed_name(fmt);
    let mut input =
        File::open(payload).with_context(|| format!("opening {}", payload.display()))?;
    let mut out = Output::create(out_dir, &name)?;
    {
        // No chunk cache: the compressor alone, as a cold build runs it.
        let mut enc = xtask::formats::Packing::default().encoder(compression(fmt), out.writer())?;
        // 256 KiB reads straight into the compressor: never the whole payload.
        copy_hashed(&mut input, &mut enc, Want::default())
            .with_context(|| format!("compressing {} into {name}", payload.display()))?;
        let mut w = enc
            .finish()
            .with_context(|| format!("compressing {name}"))?;
        w.flush().with_context(|| format!("writing {name}"))?;
    }
    out.commit()
}

/// `xz -6`, `zstd -12`, `gzip -6`: the compressor as its tool is called.
pub(crate) fn describe(c: Compression) -> String {
    match c {
        Compression::None => "no compression".into(),
        Compression::Gzip(l) => format!("gzip -{l}"),
        Compression::Xz(l) => format!("xz -{l}"),
        Compression::Zstd(l) => format!("zstd -{l}"),
    }
}
