//! What a build hands its package writers ([`Packing`]): the `.deb`'s
//! compression, the chunk cache and the build's digest memo, passed to
//! every writer as a value.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::chunk_cache::ChunkCache;
use super::compress::Compression;
use super::encoder::{encoder, Encoder};
use crate::shared::hash::memo::Memo;

/// What a build hands its package writers: the `.deb`'s compression,
/// the chunk cache and the build's digest memo. A value the build makes
/// and passes to every writer it runs (never a thread's or the process's
/// ambient state).
#[derive(Debug, Clone, Default)]
pub struct Packing {
    /// The `.deb` members' compression; [`Compression::DEB`] when unset.
    pub(crate) deb: Option<Compression>,
    /// Where compressed chunks are kept between builds; none: compress all.
    pub(crate) cache: Option<ChunkCache>,
    /// The digests this build took of its files (see `hash::memo`).
    pub(crate) digests: Arc<Memo>,
}

impl Packing {
    /// The `.deb` members' compression.
    pub(crate) fn deb(&self) -> Compression {
        self.deb.unwrap_or(Compression::DEB)
    }

    /// A `compression` writer over `inner` using this build's chunk
    /// cache; call [`Encoder::finish`].
    pub fn encoder<W: Write>(&self, compression: Compression, inner: W) -> Result<Encoder<W>> {
        Ok(encoder(compression, inner, self.cache.clone()))
    }

    /// Compresses a small in-memory buffer.
    pub(crate) fn compress(&self, compression: Compression, bytes: &[u8]) -> Result<Vec<u8>> {
        let mut enc = self.encoder(compression, Vec::new())?;
        enc.write_all(bytes).context("compressing in memory")?;
        enc.finish().context("compressing in memory")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_header_has_no_time_and_no_name() {
        let out = Packing::default()
            .compress(Compression::Gzip(9), b"hello")
            .unwrap();
        assert_eq!(&out[..4], &[0x1f, 0x8b, 8, 0], "no FNAME flag");
        assert_eq!(&out[4..8], &[0, 0, 0, 0], "mtime 0");
        assert_eq!(out[8], 2, "XFL of -9");
    }

    #[test]
    fn the_packing_passed_is_the_one_used() {
        let dir = tempfile::tempdir().unwrap();
        let packing = Packing {
            deb: Some(Compression::Zstd(3)),
            cache: Some(ChunkCache::new(dir.path())),
            digests: Arc::default(),
        };
        assert_eq!(packing.deb(), Compression::Zstd(3));
        assert_eq!(Packing::default().deb(), Compression::DEB);
        let _ = packing
            .compress(Compression::Xz(0), &[7u8; 10_000])
            .unwrap();
        let _ = Packing::default()
            .compress(Compression::Xz(0), &[7u8; 10_000])
            .unwrap();
        assert_eq!(
            packing.cache.unwrap().misses(),
            1,
            "the encoder did not use the cache it was given, or another one did"
        );
    }
}
