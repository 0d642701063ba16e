//! The streaming compressor every writer writes through: the bytes as
//! they are (no compression) or the chunked compressor
//! ([`super::chunked`]).

use std::io::{self, Write};

use super::chunk_cache::ChunkCache;
use super::chunked::Chunked;
use super::compress::Compression;
use super::entry_write::EntryWrite;

/// A `compression` writer over `inner`, taking chunks from `cache` when
/// given; call [`Encoder::finish`].
pub(crate) fn encoder<W: Write>(
    compression: Compression,
    inner: W,
    cache: Option<ChunkCache>,
) -> Encoder<W> {
    match compression {
        Compression::None => Encoder::Plain(inner),
        _ => Encoder::Chunked(Box::new(Chunked::new(inner, compression, cache))),
    }
}

/// A streaming compressor.
pub enum Encoder<W: Write> {
    Plain(W),
    Chunked(Box<Chunked<W>>),
}

impl<W: Write> Encoder<W> {
    /// Flushes the compressed stream's end and returns the inner writer.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Plain(w) => Ok(w),
            Encoder::Chunked(c) => c.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Plain(w) => w.write(buf),
            Encoder::Chunked(c) => c.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Plain(w) => w.flush(),
            Encoder::Chunked(c) => c.flush(),
        }
    }
}

impl<W: Write> EntryWrite for Encoder<W> {
    fn entry_end(&mut self) -> io::Result<()> {
        match self {
            Encoder::Plain(_) => Ok(()),
            Encoder::Chunked(c) => c.entry_end(),
        }
    }
}
