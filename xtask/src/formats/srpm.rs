//! Source rpm writer: `<name>-<version>-<release>.src.rpm` holding the
//! spec, its sources and its patches, with the header rpmbuild -bs writes
//! (source lead, `SOURCEPACKAGE` set and no `SOURCERPM`, the `SOURCE` and
//! `PATCH` lists, the spec text, `BUILDARCHS`) and a gzip'd cpio payload
//! of plain file names, so `rpmbuild --rebuild` builds from it.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::compress::Compression;
use super::cpio::{cpio_entry_named, cpio_trailer};
use super::meta::PackageMeta;
use super::packing::Packing;
use super::rpm::lead_of;
use super::rpm_header::{Header, Value};
use super::rpm_tags::{sense, src_tag, tag, SHA256_ALGO, SPECFILE};
use super::tally::Tally;
use super::tree::{Entry, FileTree, Kind};
use super::Format;
use super::{scratch, Artifact};

/// rpmbuild's payload for source rpms on Debian: `gzip -9`, which every
/// rpm that a build farm runs reads.
const PAYLOAD: Compression = Compression::Gzip(9);
const BUILDHOST: &str = "rocm-patchkit";

/// What a source rpm holds besides the package's metadata.
pub(crate) struct SourceRpm<'a> {
    /// The spec's file name (`<name>.spec`) and text.
    pub(crate) spec_name: &'a str,
    pub(crate) spec: &'a str,
    /// `Source<N>` files in spec order, then `Patch<N>` files in spec
    /// order: (file name, path).
    pub(crate) sources: &'a [(String, &'a Path)],
    pub(crate) patches: &'a [(String, &'a Path)],
    /// The spec's `BuildArch` (`noarch`).
    pub(crate) build_arch: &'a str,
}

/// Writes `<out_dir>/<file_name>`.
pub(crate) fn write(
    meta: &PackageMeta,
    src: &SourceRpm,
    epoch: u64,
    out_dir: &Path,
    packing: &Packing,
) -> Result<Artifact> {
    meta.validate(Format::Rpm)?;
    let epoch32 =
        u32::try_from(epoch).context("SOURCE_DATE_EPOCH does not fit rpm's 32-bit times")?;
    let mut tree = FileTree::new();
    tree.add_bytes(src.spec_name, src.spec.as_bytes().to_vec(), false)?;
    for (name, path) in src.sources.iter().chain(src.patches) {
        if name.contains('/') || tree.get(name).is_some() {
            bail!(
                "the source rpm of {} would hold `{name}` twice or below a folder: source and patch file names must be unique plain names",
                meta.name
            );
        }
        tree.add_file(name, path, false)?;
    }
    let entries: Vec<&Entry> = tree.entries().collect();

    // Payload: cpio -> count + sha256 -> gzip -> count + sha256 -> scratch.
    let mut payload = scratch(out_dir)?;
    let mut digests = Vec::with_capacity(entries.len());
    let (raw_size, raw_sha, packed_size, packed_sha) = {
        let packed = Tally::new(
            std::io::BufWriter::with_capacity(1 << 20, &mut payload),
            true,
        );
        let mut raw = Tally::new(packing.encoder(PAYLOAD, packed)?, true);
        for (i, entry) in entries.iter().enumerate() {
            digests.push(cpio_entry_named(
                &mut raw,
                entry,
                &entry.path,
                i as u32 + 1,
                epoch32,
                &packing.digests,
            )?);
        }
        cpio_trailer(&mut raw).context("writing the source rpm payload")?;
        let (enc, raw_size, raw_sha) = raw.into_parts();
        let packed = enc.finish().context("compressing the source rpm payload")?;
        let (mut buf, packed_size, sha) = packed.into_parts();
        buf.flush().context("writing the source rpm payload")?;
        (
            raw_size,
            raw_sha.unwrap_or_default(),
            packed_size,
            sha.unwrap_or_default(),
        )
    };
    let header = main_header(
        meta,
        src,
        &entries,
        &digests,
        epoch32,
        &raw_sha,
        &packed_sha,
    )?;
    let header = header.to_bytes(63);
    super::rpm::write_file(
        out_dir,
        &super::names::srpm(meta),
        &lead_of(meta, true),
        &header,
        (payload, raw_size, packed_size),
        "source rpm payload",
    )
}

fn main_header(
    meta: &PackageMeta,
    src: &SourceRpm,
    entries: &[&Entry],
    digests: &[Option<[u8; 32]>],
    epoch: u32,
    raw_sha: &[u8; 32],
    packed_sha: &[u8; 32],
) -> Result<Header> {
    let names = |list: &[(String, &Path)]| -> Vec<String> {
        // rpmbuild lists them last-declared first.
        list.iter().rev().map(|(name, _)| name.clone()).collect()
    };
    let mut h = super::rpm::base_header(meta, epoch);
    h.add(tag::GROUP, Value::I18n("Unspecified".into()))
        .str(tag::OS, "linux")
        .str(tag::ARCH, src.build_arch)
        .str(tag::RPMVERSION, "4.18.0")
        .add(
            src_tag::BUILDARCHS,
            Value::StrArray(vec![src.build_arch.into()]),
        )
        .str(src_tag::COOKIE, format!("{BUILDHOST} {epoch}"))
        .int32(src_tag::SOURCEPACKAGE, 1)
        .str(src_tag::SPEC, src.spec)
        .str(tag::ENCODING, "utf-8")
        .str(tag::PAYLOADFORMAT, "cpio")
        .str(tag::PAYLOADCOMPRESSOR, "gzip")
        .str(tag::PAYLOADFLAGS, "9")
        .add(
            tag::PAYLOADDIGEST,
            Value::StrArray(vec![hex::encode(packed_sha)]),
        )
        .add(
            src_tag::PAYLOADDIGESTALT,
            Value::StrArray(vec![hex::encode(raw_sha)]),
        )
        .int32(tag::PAYLOADDIGESTALGO, SHA256_ALGO)
        .int32(tag::FILEDIGESTALGO, SHA256_ALGO);
    if !src.sources.is_empty() {
        h.add(src_tag::SOURCE, Value::StrArray(names(src.sources)));
    }
    if !src.patches.is_empty() {
        h.add(src_tag::PATCH, Value::StrArray(names(src.patches)));
    }

    add_files(&mut h, meta, src, entries, digests, epoch)?;

    // A source rpm needs only the rpmlib features of its file list.
    let rpmlib = sense::RPMLIB | sense::LESS | sense::EQUAL;
    let requires = [
        ("rpmlib(CompressedFileNames)", "3.0.4-1"),
        ("rpmlib(FileDigests)", "4.6.0-1"),
    ];
    h.add(
        tag::REQUIRENAME,
        Value::StrArray(requires.iter().map(|r| r.0.to_owned()).collect()),
    )
    .add(
        tag::REQUIREFLAGS,
        Value::Int32(vec![rpmlib; requires.len()]),
    )
    .add(
        tag::REQUIREVERSION,
        Value::StrArray(requires.iter().map(|r| r.1.to_owned()).collect()),
    )
    .add(tag::PROVIDENAME, Value::StrArray(vec![meta.name.clone()]))
    .add(tag::PROVIDEFLAGS, Value::Int32(vec![sense::EQUAL]))
    .add(
        tag::PROVIDEVERSION,
        Value::StrArray(vec![meta.full_version()]),
    );
    Ok(h)
}

/// The files: plain names in one (empty) folder, as rpmbuild -bs lists them.
fn add_files(
    h: &mut Header,
    meta: &PackageMeta,
    src: &SourceRpm,
    entries: &[&Entry],
    digests: &[Option<[u8; 32]>],
    epoch: u32,
) -> Result<()> {
    let n = entries.len();
    let mut total: u64 = 0;
    for e in entries {
        if !matches!(e.kind, Kind::File(_)) {
            bail!("a source rpm holds plain files only, not {}", e.path);
        }
        total += e.size;
    }
    h.add(
        tag::BASENAMES,
        Value::StrArray(entries.iter().map(|e| e.path.clone()).collect()),
    )
    .add(tag::DIRNAMES, Value::StrArray(vec![String::new()]))
    .add(tag::DIRINDEXES, Value::Int32(vec![0; n]))
    .add(
        tag::FILESIZES,
        Value::Int32(entries.iter().map(|e| e.size as u32).collect()),
    )
    .add(tag::FILELINKTOS, Value::StrArray(vec![String::new(); n]));
    let flags = entries
        .iter()
        .map(|e| if e.path == src.spec_name { SPECFILE } else { 0 })
        .collect();
    super::rpm::add_file_stats(h, entries, digests, flags, epoch);
    let total = u32::try_from(total)
        .map_err(|_| anyhow::anyhow!("{} holds over 4 GiB of sources", meta.name))?;
    h.int32(tag::SIZE, total);
    Ok(())
}
