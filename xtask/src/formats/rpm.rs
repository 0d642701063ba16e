//! `.rpm` writer, native: lead, signature header (header SHA256, sizes),
//! main header (metadata, file list with SHA256 digests, dependencies
//! including the `rpmlib()` features used, scriptlets, payload digest)
//! and a zstd-compressed cpio (newc) payload of `./`-prefixed names.
//!
//! The payload streams to a scratch file first, hashed on the way, since
//! the headers before it describe it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::compress::Compression;
use super::cpio::{cpio_entry, cpio_trailer, rpm_mode};
use super::entry_write::EntryWrite;
use super::meta::PackageMeta;
use super::packing::Packing;
use super::rpm_header::{Header, Value};
use super::rpm_tags::{sense, tag, CONFIG_NOREPLACE, SHA256_ALGO};
use super::tally::Tally;
use super::tree::{Entry, FileTree, Kind};
use super::Format;
use super::{names, scratch, Artifact, Output, Package, Scripts};
use crate::shared::hash::memo::Memo;

const BUILDHOST: &str = "rocm-patchkit";

/// The payload [`write`] compresses, uncompressed: the cpio archive of
/// `tree`'s explicit entries, streamed to `out` (which is returned).
/// `patchkit-bench package` times our compressor alone on it.
pub fn write_payload<W: EntryWrite>(
    tree: &FileTree,
    epoch: u64,
    mut out: W,
    memo: &Memo,
) -> Result<W> {
    let epoch32 =
        u32::try_from(epoch).context("SOURCE_DATE_EPOCH does not fit rpm's 32-bit times")?;
    for (i, entry) in tree.entries().filter(|e| e.explicit).enumerate() {
        cpio_entry(&mut out, entry, i as u32 + 1, epoch32, memo)?;
    }
    cpio_trailer(&mut out).context("writing an rpm payload")?;
    Ok(out)
}

/// Writes `<out_dir>/<file name>`. Only explicit directories of the tree
/// are owned by the package (not `usr` or `usr/src`).
pub(crate) fn write(pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
    let (meta, machine, tree, scripts, epoch) =
        (pkg.meta, pkg.machine, pkg.tree, pkg.scripts, pkg.epoch);
    meta.validate(Format::Rpm)?;
    let epoch32 =
        u32::try_from(epoch).context("SOURCE_DATE_EPOCH does not fit rpm's 32-bit times")?;
    let entries: Vec<&Entry> = tree.entries().filter(|e| e.explicit).collect();
    if entries.is_empty() {
        bail!("the rpm of {} would be empty; give it files", meta.name);
    }
    let compression = Compression::RPM;

    // Payload: cpio -> count -> zstd -> count + sha256 -> scratch file.
    let mut payload = scratch(out_dir)?;
    let mut digests = Vec::with_capacity(entries.len());
    let (raw_size, packed_size, packed_sha) = {
        let packed = Tally::new(
            std::io::BufWriter::with_capacity(1 << 20, &mut payload),
            true,
        );
        let mut raw = Tally::new(packing.encoder(compression, packed)?, false);
        for (i, entry) in entries.iter().enumerate() {
            digests.push(cpio_entry(
                &mut raw,
                entry,
                i as u32 + 1,
                epoch32,
                &packing.digests,
            )?);
        }
        cpio_trailer(&mut raw).context("writing the rpm payload")?;
        let (enc, raw_size, _) = raw.into_parts();
        let packed = enc.finish().context("compressing the rpm payload")?;
        let (mut buf, packed_size, sha) = packed.into_parts();
        buf.flush().context("writing the rpm payload")?;
        (raw_size, packed_size, sha.unwrap_or_default())
    };
    if raw_size > u32::MAX as u64 {
        bail!(
            "the rpm payload of {} is over 4 GiB; rpm's cpio format cannot hold it",
            meta.name
        );
    }

    let mut header = main_header(
        meta,
        &entries,
        &digests,
        scripts,
        epoch32,
        compression,
        &packed_sha,
    )?;
    header
        .add(tag::GROUP, Value::I18n(machine.section().1.into()))
        .str(tag::ARCH, machine.rpm());
    let header = header.to_bytes(63);
    let name = names::file_name(Format::Rpm, meta, machine);
    write_file(
        out_dir,
        &name,
        &lead(meta),
        &header,
        (payload, raw_size, packed_size),
        "rpm payload",
    )
}

/// Writes `<out_dir>/<name>`: the lead, the signature of `header` and of
/// the payload's sizes, the header, then the payload (rewound here), which
/// must still be `packed` bytes long; `raw` is its size uncompressed.
pub(super) fn write_file(
    out_dir: &Path,
    name: &str,
    lead: &[u8],
    header: &[u8],
    (mut payload, raw, packed): (File, u64, u64),
    what_payload: &str,
) -> Result<Artifact> {
    let mut sig = Header::new();
    let total = header.len() as u64 + packed;
    sig.str(tag::SIG_SHA256, hex::encode(Sha256::digest(header)));
    if let (Ok(total32), Ok(raw32)) = (u32::try_from(total), u32::try_from(raw)) {
        sig.int32(tag::SIG_SIZE, total32)
            .int32(tag::SIG_PAYLOADSIZE, raw32);
    } else {
        sig.add(tag::SIG_LONGSIZE, Value::Int64(vec![total]))
            .add(tag::SIG_LONGARCHIVESIZE, Value::Int64(vec![raw]));
    }
    let mut sig = sig.to_bytes(62);
    while !sig.len().is_multiple_of(8) {
        sig.push(0);
    }
    payload
        .seek(SeekFrom::Start(0))
        .with_context(|| format!("reading back the {what_payload}"))?;
    let mut out = Output::create(out_dir, name)?;
    {
        let what = || format!("writing {name}");
        let mut w = out.writer();
        w.write_all(lead).with_context(what)?;
        w.write_all(&sig).with_context(what)?;
        w.write_all(header).with_context(what)?;
        let copied = std::io::copy(&mut payload, &mut w).with_context(what)?;
        if copied != packed {
            bail!("the {what_payload} changed size while being copied into {name}");
        }
        w.flush().with_context(what)?;
    }
    out.commit()
}

/// The 96-byte lead of a binary package.
fn lead(meta: &PackageMeta) -> [u8; 96] {
    lead_of(meta, false)
}

/// The 96-byte lead: magic, v3.0, binary (type 0, archnum 0) or source
/// (type 1, archnum 1, as rpmbuild writes it), `name-version-release`,
/// Linux, header-style signature.
pub(super) fn lead_of(meta: &PackageMeta, source: bool) -> [u8; 96] {
    let mut l = [0u8; 96];
    l[0..4].copy_from_slice(&[0xed, 0xab, 0xee, 0xdb]);
    l[4] = 3;
    l[5] = 0;
    if source {
        l[7] = 1;
        l[9] = 1;
    }
    let nevr = format!(
        "{}-{}-{}",
        meta.name, meta.about.version, meta.about.release
    );
    let n = nevr.len().min(65);
    l[10..10 + n].copy_from_slice(&nevr.as_bytes()[..n]);
    l[76..78].copy_from_slice(&1u16.to_be_bytes());
    l[78..80].copy_from_slice(&5u16.to_be_bytes());
    l
}

/// The tags every rpm of ours starts with, binary or source: name, version,
/// release, texts, build time and host, licence, and the URL when there is one.
pub(super) fn base_header(meta: &PackageMeta, epoch: u32) -> Header {
    let mut h = Header::new();
    h.add(tag::I18NTABLE, Value::StrArray(vec!["C".into()]))
        .str(tag::NAME, &meta.name)
        .str(tag::VERSION, &meta.about.version)
        .str(tag::RELEASE, &meta.about.release)
        .add(tag::SUMMARY, Value::I18n(meta.about.summary.trim().into()))
        .add(
            tag::DESCRIPTION,
            Value::I18n(meta.about.description.trim().into()),
        )
        .int32(tag::BUILDTIME, epoch)
        .str(tag::BUILDHOST, BUILDHOST)
        .str(tag::LICENSE, &meta.about.license);
    if let Some(homepage) = &meta.about.homepage {
        h.str(tag::URL, homepage);
    }
    h
}

/// The per-file tags a binary and a source rpm fill alike: modes, device
/// numbers, mtimes (all `SOURCE_DATE_EPOCH`) and sha256 digests.
pub(super) fn add_file_stats(
    h: &mut Header,
    entries: &[&Entry],
    digests: &[Option<[u8; 32]>],
    flags: Vec<u32>,
    epoch: u32,
) {
    let n = entries.len();
    h.add(tag::FILEFLAGS, Value::Int32(flags))
        .add(tag::FILEUSERNAME, Value::StrArray(vec!["root".into(); n]))
        .add(tag::FILEGROUPNAME, Value::StrArray(vec!["root".into(); n]))
        .add(tag::FILEVERIFYFLAGS, Value::Int32(vec![u32::MAX; n]))
        .add(tag::FILEDEVICES, Value::Int32(vec![1; n]))
        .add(tag::FILEINODES, Value::Int32((1..=n as u32).collect()))
        .add(tag::FILELANGS, Value::StrArray(vec![String::new(); n]));
    h.add(
        tag::FILEMODES,
        Value::Int16(entries.iter().map(|e| rpm_mode(e) as u16).collect()),
    )
    .add(tag::FILERDEVS, Value::Int16(vec![0; n]))
    .add(tag::FILEMTIMES, Value::Int32(vec![epoch; n]))
    .add(
        tag::FILEDIGESTS,
        Value::StrArray(
            digests
                .iter()
                .map(|d| d.map(hex::encode).unwrap_or_default())
                .collect(),
        ),
    );
}

fn main_header(
    meta: &PackageMeta,
    entries: &[&Entry],
    digests: &[Option<[u8; 32]>],
    scripts: &Scripts,
    epoch: u32,
    compression: Compression,
    payload_sha: &[u8; 32],
) -> Result<Header> {
    let mut h = base_header(meta, epoch);
    h.str(tag::PACKAGER, &meta.about.maintainer)
        .str(tag::OS, "linux")
        .str(tag::SOURCERPM, names::srpm(meta))
        .str(tag::RPMVERSION, "4.18.0")
        .str(tag::ENCODING, "utf-8")
        .str(tag::PAYLOADFORMAT, "cpio");
    let compressor = add_payload(&mut h, compression, payload_sha)?;
    add_changelog(&mut h, meta, epoch);
    add_files(&mut h, meta, entries, digests, epoch)?;
    let mut requires = add_scriptlets(&mut h, scripts);
    requires.extend(dependencies(meta, scripts, compressor));
    requires.sort();
    add_requires(&mut h, &requires);
    add_provides_and_conflicts(&mut h, meta);
    Ok(h)
}

/// The payload's compressor, level and digest; returns the compressor's name.
fn add_payload(
    h: &mut Header,
    compression: Compression,
    payload_sha: &[u8; 32],
) -> Result<&'static str> {
    let (compressor, level) = match compression {
        Compression::Zstd(l) => ("zstd", l.to_string()),
        Compression::Xz(l) => ("xz", l.to_string()),
        Compression::Gzip(l) => ("gzip", l.to_string()),
        Compression::None => bail!("rpm payloads must be compressed"),
    };
    h.str(tag::PAYLOADCOMPRESSOR, compressor)
        .str(tag::PAYLOADFLAGS, level)
        .add(
            tag::PAYLOADDIGEST,
            Value::StrArray(vec![hex::encode(payload_sha)]),
        )
        .int32(tag::PAYLOADDIGESTALGO, SHA256_ALGO)
        .int32(tag::FILEDIGESTALGO, SHA256_ALGO);
    Ok(compressor)
}

/// The changelog: one entry for this version.
fn add_changelog(h: &mut Header, meta: &PackageMeta, epoch: u32) {
    h.add(tag::CHANGELOGTIME, Value::Int32(vec![epoch]))
        .add(
            tag::CHANGELOGNAME,
            Value::StrArray(vec![format!(
                "{} - {}-{}",
                meta.about.maintainer, meta.about.version, meta.about.release
            )]),
        )
        .add(
            tag::CHANGELOGTEXT,
            Value::StrArray(vec![meta
                .changes
                .iter()
                .map(|c| format!("- {}", c.trim()))
                .collect::<Vec<_>>()
                .join("\n")]),
        );
}

/// The file list: names split into folders and base names, sizes, link
/// targets, flags, stats and digests, and the total size.
fn add_files(
    h: &mut Header,
    meta: &PackageMeta,
    entries: &[&Entry],
    digests: &[Option<[u8; 32]>],
    epoch: u32,
) -> Result<()> {
    let n = entries.len();
    let mut dir_index: BTreeMap<String, u32> = BTreeMap::new();
    let mut dirnames = Vec::new();
    let (mut basenames, mut dirindexes) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut total: u64 = 0;
    for e in entries {
        let (dir, base) = match e.path.rsplit_once('/') {
            Some((d, b)) => (format!("/{d}/"), b),
            None => ("/".to_string(), e.path.as_str()),
        };
        let next = dirnames.len() as u32;
        let idx = *dir_index.entry(dir.clone()).or_insert_with(|| {
            dirnames.push(dir);
            next
        });
        basenames.push(base.to_string());
        dirindexes.push(idx);
        if matches!(e.kind, Kind::File(_)) {
            total += e.size;
        }
    }
    h.add(tag::BASENAMES, Value::StrArray(basenames))
        .add(tag::DIRNAMES, Value::StrArray(dirnames))
        .add(tag::DIRINDEXES, Value::Int32(dirindexes))
        .add(
            tag::FILESIZES,
            Value::Int32(
                entries
                    .iter()
                    .map(|e| if e.is_dir() { 0 } else { e.size as u32 })
                    .collect(),
            ),
        )
        .add(
            tag::FILELINKTOS,
            Value::StrArray(
                entries
                    .iter()
                    .map(|e| match &e.kind {
                        Kind::Symlink(t) => t.clone(),
                        _ => String::new(),
                    })
                    .collect(),
            ),
        );
    let flags = entries
        .iter()
        .map(|e| if e.config { CONFIG_NOREPLACE } else { 0 })
        .collect();
    add_file_stats(h, entries, digests, flags, epoch);
    match u32::try_from(total) {
        Ok(t) => h.int32(tag::SIZE, t),
        Err(_) => bail!("{} holds over 4 GiB of files; split the package", meta.name),
    };
    Ok(())
}

/// A requirement: name, sense flags, version.
type Require = (String, u32, String);

/// The scriptlets and their interpreter; returns what they require.
fn add_scriptlets(h: &mut Header, scripts: &Scripts) -> Vec<Require> {
    let mut requires: Vec<Require> = Vec::new();
    let sh = || Value::StrArray(vec!["/bin/sh".into()]);
    if let Some(s) = &scripts.post_install {
        h.add(tag::POSTIN, Value::Str(scriptlet(s)))
            .add(tag::POSTINPROG, sh());
        requires.push((
            "/bin/sh".into(),
            sense::INTERP | sense::SCRIPT_POST,
            String::new(),
        ));
    }
    if let Some(s) = &scripts.pre_remove {
        h.add(tag::PREUN, Value::Str(scriptlet(s)))
            .add(tag::PREUNPROG, sh());
        requires.push((
            "/bin/sh".into(),
            sense::INTERP | sense::SCRIPT_PREUN,
            String::new(),
        ));
    }
    requires
}

/// Dependencies, also for the scriptlets (`Requires(post)`,
/// `Requires(preun)`: the dkms calls need dkms installed first), and the
/// rpmlib features this package uses.
fn dependencies(meta: &PackageMeta, scripts: &Scripts, compressor: &str) -> Vec<Require> {
    let mut requires = Vec::new();
    for dep in &meta.depends {
        requires.push((dep.clone(), 0, String::new()));
        if scripts.post_install.is_some() {
            requires.push((dep.clone(), sense::SCRIPT_POST, String::new()));
        }
        if scripts.pre_remove.is_some() {
            requires.push((dep.clone(), sense::SCRIPT_PREUN, String::new()));
        }
    }
    let rpmlib = sense::RPMLIB | sense::LESS | sense::EQUAL;
    let mut features = vec![
        ("CompressedFileNames", "3.0.4-1"),
        ("FileDigests", "4.6.0-1"),
        ("PayloadFilesHavePrefix", "4.0-1"),
    ];
    if compressor == "zstd" {
        features.push(("PayloadIsZstd", "5.4.18-1"));
    } else if compressor == "xz" {
        features.push(("PayloadIsXz", "5.2-1"));
    }
    for (feature, version) in features {
        requires.push((format!("rpmlib({feature})"), rpmlib, version.into()));
    }
    requires
}

fn add_requires(h: &mut Header, requires: &[Require]) {
    h.add(
        tag::REQUIRENAME,
        Value::StrArray(requires.iter().map(|r| r.0.clone()).collect()),
    )
    .add(
        tag::REQUIREFLAGS,
        Value::Int32(requires.iter().map(|r| r.1).collect()),
    )
    .add(
        tag::REQUIREVERSION,
        Value::StrArray(requires.iter().map(|r| r.2.clone()).collect()),
    );
}

/// The package itself at its version, then the virtual names it stands
/// for (versionless); a conflict with one of those is rpm's way to keep
/// one package of the kind installed (rpm ignores a self-conflict).
fn add_provides_and_conflicts(h: &mut Header, meta: &PackageMeta) {
    let provides = &meta.relations.provides;
    let mut names = vec![meta.name.clone()];
    names.extend(provides.iter().cloned());
    let mut flags = vec![sense::EQUAL];
    flags.extend(provides.iter().map(|_| 0));
    let mut versions = vec![meta.full_version()];
    versions.extend(provides.iter().map(|_| String::new()));
    h.add(tag::PROVIDENAME, Value::StrArray(names))
        .add(tag::PROVIDEFLAGS, Value::Int32(flags))
        .add(tag::PROVIDEVERSION, Value::StrArray(versions));
    let conflicts = &meta.relations.conflicts;
    if !conflicts.is_empty() {
        h.add(tag::CONFLICTNAME, Value::StrArray(conflicts.clone()))
            .add(tag::CONFLICTFLAGS, Value::Int32(vec![0; conflicts.len()]))
            .add(
                tag::CONFLICTVERSION,
                Value::StrArray(vec![String::new(); conflicts.len()]),
            );
    }
}

/// A scriptlet as rpmbuild stores one from a spec: without trailing blank
/// lines or the last newline.
fn scriptlet(text: &str) -> String {
    text.trim_end().to_owned()
}
