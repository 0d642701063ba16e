//! Tar archives, plain or gzip-, xz- or zstd-compressed (told apart by
//! their first bytes), read as a stream into the [`Sink`]; a damaged or
//! truncated archive is told from a refused entry. A compressed archive is
//! read to the end of its compressed stream, so that the decompressor checks
//! its own trailer (gzip CRC and size, xz and zstd checksums) after the tar
//! stream's end. A pinned archive is hashed as it is read, to its last
//! byte: what is extracted is what the pin names, whatever said so before.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use anyhow::{Context, Result};

use super::sink::{entry_path, OverLimit, Sink};
use super::{include_set, included, Selection};
use crate::report::Reporter;
use crate::state::Manifest;

/// Extracts a tar, tar.gz, tar.xz or tar.zst archive (told apart by content).
pub fn archive(path: &Path, sel: &Selection, dest: &Path, reporter: &Reporter) -> Result<Manifest> {
    read(path, None, sel, dest, reporter)
}

/// [`archive`] for an archive pinned by `sha256`: the bytes are hashed as
/// they are extracted, and an archive that does not hash to its pin (it
/// changed since fetch hashed it, or a memo of its size and times vouched
/// for it) is refused once read; the caller removes what was written.
pub fn archive_pinned(
    path: &Path,
    sha256: &str,
    sel: &Selection,
    dest: &Path,
    reporter: &Reporter,
) -> Result<Manifest> {
    read(path, Some(sha256), sel, dest, reporter)
}

fn read(
    path: &Path,
    pin: Option<&str>,
    sel: &Selection,
    dest: &Path,
    reporter: &Reporter,
) -> Result<Manifest> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // Shares the file's offset: what the extraction left unread is read
    // through it, so that the hash covers every byte.
    let mut tail = file
        .try_clone()
        .with_context(|| format!("opening {}", path.display()))?;
    let hasher = Rc::new(RefCell::new(pin.map(|_| crate::hash::Hasher::new())));
    let total = file.metadata().map(|m| m.len()).ok();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let progress = reporter.progress(format!("extract {}", name.unwrap_or_default()), total, true);
    let mut input = BufReader::with_capacity(
        1 << 20,
        Counting {
            inner: file,
            progress,
            hasher: hasher.clone(),
        },
    );
    let manifest = if input.fill_buf()?.starts_with(super::deb::AR_MAGIC) {
        super::deb::deb(input, dest)
            .map_err(|e| e.context(format!("extracting package {}", path.display())))?
    } else {
        stream(input, sel, dest)
            .map_err(|e| e.context(format!("extracting archive {}", path.display())))?
    };
    let (Some(pin), Some(mut hasher)) = (pin, hasher.borrow_mut().take()) else {
        return Ok(manifest);
    };
    crate::hash::each_block(&mut tail, 1 << 20, |block| {
        hasher.update(block);
        Ok(())
    })
    .with_context(|| format!("reading {}", path.display()))?;
    let read = hasher.hex();
    if read != pin {
        anyhow::bail!(
            "the archive {} does not hash to its pin: expected sha256 {pin}, read {read} while \
             extracting it; nothing was applied. It changed after it was hashed (a local \
             archive's hash may also have come from the memo in the cache's `local-sha256/`, \
             which then named other bytes: remove that folder and check the archive)",
            path.display()
        );
    }
    Ok(manifest)
}

/// A tar stream, plain or compressed (told apart by its first bytes), into `dest`.
pub(super) fn stream<'a>(
    mut input: impl BufRead + 'a,
    sel: &Selection,
    dest: &Path,
) -> Result<Manifest> {
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
    untar(tracked, compressed, &state, sel, dest)
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

fn untar(
    mut reader: impl Read,
    compressed: bool,
    stream: &StreamState,
    sel: &Selection,
    dest: &Path,
) -> Result<Manifest> {
    use tar::EntryType as T;
    let not_tar = || {
        anyhow::anyhow!(
            "not a gzip/xz/zstd tar archive: its first bytes are neither a compressed stream nor a \
             tar header; check that the source names a .tar, .tar.gz, .tar.xz or .tar.zst"
        )
    };
    let truncated = |at: &str, e: &dyn std::fmt::Display| {
        anyhow::anyhow!(
            "the archive is truncated or corrupt ({at}: {e}); nothing was applied. Fetch it again \
             (remove it from the cache, or replace the local file) and check where it comes from"
        )
    };
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
    let include = include_set(&sel.include)?;
    let mut sink = Sink::new(dest)?;
    let cap = sink.byte_limit();
    let mut archive = tar::Archive::new((&head[..]).chain(reader));
    let broken = |stream: &StreamState| stream.ended.get() || stream.error.borrow().is_some();
    let entries = archive
        .entries()
        .map_err(|e| truncated("reading the archive", &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| truncated("reading the next entry header", &e))?;
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let refuse = |e: anyhow::Error| {
            if e.downcast_ref::<OverLimit>().is_some() {
                e
            } else if broken(stream) {
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
        };
        let kind = entry.header().entry_type();
        if matches!(kind, T::XGlobalHeader | T::XHeader) {
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
        match kind {
            T::Regular | T::Continuous | T::GNUSparse => {
                let exec = entry.header().mode().unwrap_or(0o644) & 0o111 != 0;
                sink.file(&rel, exec, entry).map_err(refuse)?;
            }
            T::Directory => sink.dir(&rel).map_err(refuse)?,
            T::Symlink => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                sink.symlink(&rel, &target).map_err(refuse)?;
            }
            T::Link => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                let shown = String::from_utf8_lossy(&target).into_owned();
                let target = entry_path(&target, sel.strip)
                    .map_err(|e| refuse(anyhow::anyhow!("its hard link target `{shown}` {e}")))?
                    .unwrap_or(shown);
                sink.hardlink(&rel, &target).map_err(refuse)?;
            }
            other => {
                return Err(refuse(anyhow::anyhow!(
                    "it is a device, fifo or other special entry ({other:?}); only files, folders and links are extracted"
                )))
            }
        }
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
    Ok(sink.manifest)
}

/// Reads and drops what follows the tar stream's end, up to one byte past
/// `cap`: a tar reader stops at the end-of-archive block, and only reading
/// on to the end of the compressed stream makes gzip check its CRC and
/// size, and xz and zstd their checksums. Returns the bytes read.
fn read_to_end_of_stream(rest: &mut impl Read, cap: u64) -> std::io::Result<u64> {
    crate::hash::each_block(&mut rest.take(cap.saturating_add(1)), 64 * 1024, |_| Ok(()))
}

/// The raw archive as read: counted for the progress bar and, when the
/// archive is pinned, hashed.
struct Counting<R> {
    inner: R,
    progress: crate::report::Progress,
    hasher: Rc<RefCell<Option<crate::hash::Hasher>>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(hasher) = self.hasher.borrow_mut().as_mut() {
            hasher.update(&buf[..n]);
        }
        self.progress.inc(n as u64);
        Ok(n)
    }
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
