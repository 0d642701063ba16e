//! A writer that counts the bytes passing through it and hashes them
//! (the rpm payload's sizes and digests).

use std::io::{self, Write};

use sha2::{Digest, Sha256};

use super::entry_write::EntryWrite;

/// A writer that counts bytes and hashes them on the way to `inner`.
pub(crate) struct Tally<W: Write> {
    inner: W,
    pub(crate) count: u64,
    sha256: Option<Sha256>,
}

impl<W: Write> Tally<W> {
    pub(crate) fn new(inner: W, sha256: bool) -> Tally<W> {
        Tally {
            inner,
            count: 0,
            sha256: sha256.then(Sha256::new),
        }
    }

    /// The inner writer, the byte count and the sha256 (if asked for).
    pub(crate) fn into_parts(self) -> (W, u64, Option<[u8; 32]>) {
        (
            self.inner,
            self.count,
            self.sha256.map(|h| h.finalize().into()),
        )
    }
}

impl<W: EntryWrite> EntryWrite for Tally<W> {
    fn entry_end(&mut self) -> io::Result<()> {
        self.inner.entry_end()
    }
}

impl<W: Write> Write for Tally<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        if let Some(h) = &mut self.sha256 {
            h.update(&buf[..n]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
