//! An archive file: a tar (plain or compressed, read by
//! [`super::tar_stream`]) or a `.deb` (its `ar`, read by [`super::deb`]),
//! told apart by its first bytes, counted for the progress bar as it is
//! read. A pinned archive is hashed as it is read, to its last byte: what
//! is extracted is what the pin names, whatever said so before.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use anyhow::{Context, Result};

use super::tar_stream::stream;
use super::{Limits, Selection};
use crate::apply::state::TreeListing;
use crate::shared::report::Reporter;

/// Extracts a tar, tar.gz, tar.xz or tar.zst archive (told apart by
/// content), writing at most `limits`.
pub fn archive(
    path: &Path,
    sel: &Selection,
    dest: &Path,
    limits: Limits,
    reporter: &Reporter,
) -> Result<TreeListing> {
    read(path, None, sel, dest, limits, reporter)
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
    limits: Limits,
    reporter: &Reporter,
) -> Result<TreeListing> {
    read(path, Some(sha256), sel, dest, limits, reporter)
}

fn read(
    path: &Path,
    pin: Option<&str>,
    sel: &Selection,
    dest: &Path,
    limits: Limits,
    reporter: &Reporter,
) -> Result<TreeListing> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // Shares the file's offset: what the extraction left unread is read
    // through it, so that the hash covers every byte.
    let mut tail = file
        .try_clone()
        .with_context(|| format!("opening {}", path.display()))?;
    let hasher = Rc::new(RefCell::new(
        pin.map(|_| crate::shared::hash::Hasher::new()),
    ));
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
        super::deb::deb(input, dest, limits)
            .map_err(|e| e.context(format!("extracting package {}", path.display())))?
    } else {
        stream(input, sel, dest, limits)
            .map_err(|e| e.context(format!("extracting archive {}", path.display())))?
    };
    let (Some(pin), Some(mut hasher)) = (pin, hasher.borrow_mut().take()) else {
        return Ok(manifest);
    };
    crate::shared::hash::each_block(&mut tail, 1 << 20, |block| {
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

/// The raw archive as read: counted for the progress bar and, when the
/// archive is pinned, hashed.
struct Counting<R> {
    inner: R,
    progress: crate::shared::report::Progress,
    hasher: Rc<RefCell<Option<crate::shared::hash::Hasher>>>,
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
