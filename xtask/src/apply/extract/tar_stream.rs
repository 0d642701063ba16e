//! Tar streams, plain or gzip-, xz- or zstd-compressed (told apart by
//! their first bytes), read into the [`Sink`]; a damaged or truncated
//! archive is told from a refused entry. A compressed stream is read to its
//! end, so that the decompressor checks its own trailer (gzip CRC and size,
//! xz and zstd checksums) after the tar stream's end.

use std::io::{BufRead, Read};
use std::path::Path;

use anyhow::Result;

use super::sink::{entry_path, ArchiveMeta, OverLimit, Sink};
use super::{include_set, included, Limits, Selection};
use crate::apply::state::TreeListing;

/// A tar stream, plain or compressed (told apart by its first bytes), into `dest`.
pub(super) fn stream<'a>(
    input: impl BufRead + 'a,
    sel: &Selection,
    dest: &Path,
    limits: Limits,
) -> Result<TreeListing> {
    stream_meta(input, sel, dest, limits).map(|(manifest, _)| manifest)
}

/// [`stream`], with what the archive says of its entries' modes and owners.
pub(super) fn stream_meta<'a>(
    mut input: impl BufRead + 'a,
    sel: &Selection,
    dest: &Path,
    limits: Limits,
) -> Result<(TreeListing, ArchiveMeta)> {
    let magic = input.fill_buf()?.to_vec();
    let (reader, compressed): (Box<dyn Read + 'a>, bool) = if magic.starts_with(&[0x1f, 0x8b]) {
        (Box::new(flate2::read::GzDecoder::new(input)), true)
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        (
            Box::new(xz2::read::XzDecoder::new_multi_decoder(input)),
            true,
        )
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        (
            Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
            true,
        )
    } else {
        (Box::new(input), false)
    };
    let tracked = Tracked {
        inner: reader,
        state: Default::default(),
    };
    let state = tracked.state.clone();
    untar(tracked, compressed, &state, sel, dest, limits)
}

/// What the stream under the tar reader saw: whether it ended, and the
/// first read error. A failure after either is the archive's, not a path's.
#[derive(Default)]
struct StreamState {
    ended: std::cell::Cell<bool>,
    error: std::cell::RefCell<Option<std::io::Error>>,
}

struct Tracked<R> {
    inner: R,
    state: std::rc::Rc<StreamState>,
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Ok(0) if !buf.is_empty() => {
                self.state.ended.set(true);
                Ok(0)
            }
            Ok(n) => Ok(n),
            Err(e) => {
                let copy = std::io::Error::new(e.kind(), e.to_string());
                self.state.error.borrow_mut().get_or_insert(copy);
                Err(e)
            }
        }
    }
}

/// Whether a 512-byte block is a tar header (its checksum matches) or the
/// all-zero end-of-archive block.
fn is_tar_block(block: &[u8; 512]) -> bool {
    if block.iter().all(|&b| b == 0) {
        return true;
    }
    let field = std::str::from_utf8(&block[148..156]).unwrap_or("");
    let Ok(stored) = u32::from_str_radix(field.trim_matches(|c: char| c == '\0' || c == ' '), 8)
    else {
        return false;
    };
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                b as u32
            }
        })
        .sum();
    sum == stored
}

fn not_tar() -> anyhow::Error {
    anyhow::anyhow!(
        "not a gzip/xz/zstd tar archive: its first bytes are neither a compressed stream nor a \
         tar header; check that the source names a .tar, .tar.gz, .tar.xz or .tar.zst"
    )
}

fn truncated(at: &str, e: &dyn std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!(
        "the archive is truncated or corrupt ({at}: {e}); nothing was applied. Fetch it again \
         (remove it from the cache, or replace the local file) and check where it comes from"
    )
}

fn untar(
    mut reader: impl Read,
    compressed: bool,
    stream: &StreamState,
    sel: &Selection,
    dest: &Path,
    limits: Limits,
) -> Result<(TreeListing, ArchiveMeta)> {
    let head = first_block(&mut reader, compressed)?;
    let include = include_set(&sel.include)?;
    let mut sink = Sink::new(dest, limits);
    let cap = sink.byte_limit();
    let mut archive = tar::Archive::new((&head[..]).chain(reader));
    let entries = archive
        .entries()
        .map_err(|e| truncated("reading the archive", &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| truncated("reading the next entry header", &e))?;
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let refuse = |e: anyhow::Error| refusal(e, stream, &shown);
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
        ) {
            continue;
        }
        let Some(rel) =
            entry_path(&raw, sel.strip).map_err(|e| refuse(anyhow::anyhow!("it {e}")))?
        else {
            continue;
        };
        if !included(&include, &rel) {
            continue;
        }
        write_entry(&mut sink, entry, &rel, sel.strip).map_err(refuse)?;
    }
    if compressed {
        let mut rest = archive.into_inner();
        match read_to_end_of_stream(&mut rest, cap) {
            Ok(n) if n > cap => {
                return Err(OverLimit(format!(
                    "more than {cap} bytes follow the end of the tar stream, the limit of one \
                     extraction: it may be an archive bomb"
                ))
                .into())
            }
            Ok(_) => {}
            Err(e) => return Err(truncated("after its last entry", &e)),
        }
    }
    sink.finish()
}

/// The archive's first block, which must be a tar header: a compressed
/// stream that ends or fails before it is truncated, anything else is not
/// a tar.
fn first_block(reader: &mut impl Read, compressed: bool) -> Result<[u8; 512]> {
    let mut head = [0u8; 512];
    if let Err(e) = reader.read_exact(&mut head) {
        return Err(
            if compressed && e.kind() != std::io::ErrorKind::UnexpectedEof {
                truncated("in its first block", &e)
            } else if compressed {
                truncated("in its first block", &"it ends early")
            } else {
                not_tar()
            },
        );
    }
    if !is_tar_block(&head) {
        return Err(not_tar());
    }
    Ok(head)
}

/// Why an entry failed: over a limit as it is; the archive's fault when the
/// stream under the tar reader ended or failed; else a refused entry.
fn refusal(e: anyhow::Error, stream: &StreamState, shown: &str) -> anyhow::Error {
    if e.downcast_ref::<OverLimit>().is_some() {
        e
    } else if stream.ended.get() || stream.error.borrow().is_some() {
        let cause = stream
            .error
            .borrow()
            .as_ref()
            .map_or_else(|| "it ends early".to_owned(), ToString::to_string);
        truncated(&format!("inside entry `{shown}`"), &cause)
    } else {
        e.context(format!(
            "entry `{shown}` is refused: the archive could write outside the tree"
        ))
    }
}

/// One entry at `rel` written through the sink, by its kind: files,
/// folders, symbolic and hard links; anything else is refused.
fn write_entry(
    sink: &mut Sink,
    entry: tar::Entry<'_, impl Read>,
    rel: &str,
    strip: u32,
) -> Result<()> {
    use tar::EntryType as T;
    let header = entry.header();
    let mode = header.mode().unwrap_or(0o644);
    let name = |n: Option<&str>| n.unwrap_or_default().to_owned();
    let owner = (
        header.uid().unwrap_or(0),
        header.gid().unwrap_or(0),
        name(header.username().ok().flatten()),
        name(header.groupname().ok().flatten()),
    );
    match header.entry_type() {
        T::Regular | T::Continuous | T::GNUSparse => {
            sink.file(rel, mode & 0o111 != 0, entry)?;
            sink.note(rel, false, mode, owner);
            Ok(())
        }
        T::Directory => {
            sink.dir(rel)?;
            sink.note(rel, true, mode, owner);
            Ok(())
        }
        T::Symlink => {
            let target = entry.link_name_bytes().unwrap_or_default().into_owned();
            sink.symlink(rel, &target)
        }
        T::Link => {
            let target = entry.link_name_bytes().unwrap_or_default().into_owned();
            let shown = String::from_utf8_lossy(&target).into_owned();
            let target = entry_path(&target, strip)
                .map_err(|e| anyhow::anyhow!("its hard link target `{shown}` {e}"))?
                .unwrap_or(shown);
            sink.hardlink(rel, &target)
        }
        other => Err(anyhow::anyhow!(
            "it is a device, fifo or other special entry ({other:?}); only files, folders and links are extracted"
        )),
    }
}

/// Reads and drops what follows the tar stream's end, up to one byte past
/// `cap`: a tar reader stops at the end-of-archive block, and only reading
/// on to the end of the compressed stream makes gzip check its CRC and
/// size, and xz and zstd their checksums. Returns the bytes read.
fn read_to_end_of_stream(rest: &mut impl Read, cap: u64) -> std::io::Result<u64> {
    crate::shared::hash::each_block(&mut rest.take(cap.saturating_add(1)), 64 * 1024, |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tar_blocks_are_told_from_garbage() {
        let mut header = tar::Header::new_gnu();
        header.set_path("a/b.c").unwrap();
        header.set_size(0);
        header.set_cksum();
        assert!(is_tar_block(header.as_bytes()));
        assert!(is_tar_block(&[0u8; 512]));
        let mut garbage = [b'x'; 512];
        garbage[148..156].copy_from_slice(b"0000000\0");
        assert!(!is_tar_block(&garbage));
    }
}
