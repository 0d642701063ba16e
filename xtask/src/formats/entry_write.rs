//! The writer trait the archive writers stream into: told where each
//! entry (a tar or cpio record) ends, so that a compressor may end a chunk
//! there.

use std::io::{self, Write};

/// A writer told where the entries of an archive end (tar and cpio
/// records), so that a compressor may end a chunk there.
pub trait EntryWrite: Write {
    /// One whole entry (header, content, padding) has been written.
    fn entry_end(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl EntryWrite for Vec<u8> {}
impl EntryWrite for std::fs::File {}
impl EntryWrite for io::Sink {}
impl<W: Write> EntryWrite for io::BufWriter<W> {}

impl<W: EntryWrite + ?Sized> EntryWrite for &mut W {
    fn entry_end(&mut self) -> io::Result<()> {
        (**self).entry_end()
    }
}
