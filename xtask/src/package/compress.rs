//! Compressors behind one streaming writer, configured for byte-identical
//! output: every compressed stream is written in chunks cut at entry
//! boundaries ([`super::chunked`]), so the bytes depend on the codec, its
//! level and the payload only (never on the thread count), and a rebuild
//! takes unchanged chunks from the [`ChunkCache`]. Also the settings a
//! build passes to the writers ([`Packing`]), the `--compression` value,
//! and the digests writers need on the way.

use std::cell::RefCell;
use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

pub use super::chunk_cache::ChunkCache;
use super::chunked::{Chunked, Codec};
pub use crate::hash::memo::{Digests, Want};

/// A compressor and its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    /// gzip, as `gzip -n -<level>` (1..=9).
    Gzip(u32),
    /// xz preset (0..=6), CRC64 check, as `xz -<level>`.
    Xz(u32),
    /// zstd level (1..=19), with content checksum and long-distance
    /// matching, as `zstd -<level> --long=27`.
    Zstd(i32),
}

impl Compression {
    /// The `.deb` members: xz, which every dpkg reads and lintian 2.116
    /// accepts (it calls zstd members malformed), at preset 2: on the
    /// amdgpu tree 38% larger than dpkg-deb's xz -6 for a ninth of its
    /// time (README, "Compressors").
    pub const DEB: Compression = Compression::Xz(2);
    /// The rpm payload: zstd with a 2^27 window, which rpm >= 4.14 reads
    /// (`rpmlib(PayloadIsZstd)`) without options; at -9 with long matching
    /// the knee of size against time on the amdgpu tree: 2.4% larger than
    /// -12 in 0.63x its time, 4.4% smaller than -6 (README, "Compressors").
    pub const RPM: Compression = Compression::Zstd(9);
    /// Arch packages: makepkg's `.pkg.tar.zst`, as the rpm payload.
    pub const ARCH: Compression = Compression::Zstd(9);
    /// Source tarballs (`.tar.gz`, `.dkms.tar.gz`): `gzip -n`, gzip's
    /// default level, as `tar -czf` writes them.
    pub const TARBALL: Compression = Compression::Gzip(6);

    /// A compressing writer over `inner`, using the chunk cache of the
    /// current [`Packing`]; call [`Encoder::finish`].
    pub fn encoder<W: Write>(self, inner: W) -> Result<Encoder<W>> {
        let cache = Packing::current().cache;
        Ok(match self.codec() {
            None => Encoder::Plain(inner),
            Some(codec) => Encoder::Chunked(Box::new(Chunked::new(inner, codec, cache))),
        })
    }

    fn codec(self) -> Option<Codec> {
        match self {
            Compression::None => None,
            Compression::Gzip(l) => Some(Codec::Gzip(l)),
            Compression::Xz(l) => Some(Codec::Xz(l)),
            Compression::Zstd(l) => Some(Codec::Zstd(l)),
        }
    }

    /// The file name extension: `xz`, `zst`, `gz` (empty for none).
    pub fn extension(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip(_) => "gz",
            Compression::Xz(_) => "xz",
            Compression::Zstd(_) => "zst",
        }
    }
}

/// `xz:6`, `zstd:19`, `gzip:9`; `none`.
impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Gzip(l) => write!(f, "gzip:{l}"),
            Compression::Xz(l) => write!(f, "xz:{l}"),
            Compression::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

impl serde::Serialize for Compression {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The value of `--compression` and of a recipe's `package.compression`:
/// `xz`, `zstd` or `gzip`, with `:<level>` or alone (our level for it:
/// xz:2, zstd:12, gzip:9).
impl FromStr for Compression {
    type Err = String;

    fn from_str(text: &str) -> Result<Compression, String> {
        let (name, level) = match text.split_once(':') {
            Some((name, level)) => (name, Some(level)),
            None => (text, None),
        };
        let level = |default: u32, max: u32, min: u32| -> Result<u32, String> {
            let Some(level) = level else {
                return Ok(default);
            };
            level
                .parse::<u32>()
                .ok()
                .filter(|l| (min..=max).contains(l))
                .ok_or_else(|| {
                    format!("`{text}`: the {name} level must be a number from {min} to {max}")
                })
        };
        match name {
            "xz" => Ok(Compression::Xz(level(2, 6, 0)?)),
            "zstd" => Ok(Compression::Zstd(level(12, 19, 1)? as i32)),
            "gzip" => Ok(Compression::Gzip(level(9, 9, 1)?)),
            _ => Err(format!(
                "`{text}` is not a compression: use xz[:0-6], zstd[:1-19] or gzip[:1-9] \
                 (xz presets above 6 need more memory than a build may take)"
            )),
        }
    }
}

/// The compression settings of one build, read by the package writers:
/// the `.deb`'s compression and the chunk cache. A build runs its writers
/// inside [`Packing::scope`] (on each thread that runs one).
#[derive(Debug, Clone, Default)]
pub struct Packing {
    /// The `.deb` members' compression; [`Compression::DEB`] when unset.
    pub deb: Option<Compression>,
    /// Where compressed chunks are kept between builds; none: compress all.
    pub cache: Option<ChunkCache>,
}

thread_local! {
    static CURRENT: RefCell<Packing> = RefCell::new(Packing::default());
}

impl Packing {
    /// The settings of the build running on this thread (the defaults and
    /// no cache outside any [`Packing::scope`]).
    pub fn current() -> Packing {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Runs `f` with these settings as this thread's current ones.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _current = self.enter();
        f()
    }

    /// Makes these settings this thread's current ones until the guard
    /// is dropped (then the earlier ones are back).
    pub fn enter(&self) -> PackingGuard {
        PackingGuard(Some(CURRENT.with(|c| c.replace(self.clone()))))
    }

    /// The `.deb` members' compression.
    pub fn deb(&self) -> Compression {
        self.deb.unwrap_or(Compression::DEB)
    }
}

/// Restores the settings [`Packing::enter`] replaced.
#[must_use = "the settings apply only while the guard lives"]
pub struct PackingGuard(Option<Packing>);

impl Drop for PackingGuard {
    fn drop(&mut self) {
        if let Some(old) = self.0.take() {
            CURRENT.with(|c| *c.borrow_mut() = old);
        }
    }
}

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

impl<W: Write> EntryWrite for Chunked<W> {
    fn entry_end(&mut self) -> io::Result<()> {
        Chunked::entry_end(self)
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

/// Compresses a small in-memory buffer.
pub fn compress_bytes(compression: Compression, bytes: &[u8]) -> Result<Vec<u8>> {
    let mut enc = compression.encoder(Vec::new())?;
    enc.write_all(bytes).context("compressing in memory")?;
    enc.finish().context("compressing in memory")
}

/// A writer that counts bytes and hashes them on the way to `inner`.
pub struct Tally<W: Write> {
    inner: W,
    pub count: u64,
    sha256: Option<Sha256>,
}

impl<W: Write> Tally<W> {
    pub fn new(inner: W, sha256: bool) -> Tally<W> {
        Tally {
            inner,
            count: 0,
            sha256: sha256.then(Sha256::new),
        }
    }

    /// The inner writer, the byte count and the sha256 (if asked for).
    pub fn into_parts(self) -> (W, u64, Option<[u8; 32]>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_header_has_no_time_and_no_name() {
        let out = compress_bytes(Compression::Gzip(9), b"hello").unwrap();
        assert_eq!(&out[..4], &[0x1f, 0x8b, 8, 0], "no FNAME flag");
        assert_eq!(&out[4..8], &[0, 0, 0, 0], "mtime 0");
        assert_eq!(out[8], 2, "XFL of -9");
    }

    #[test]
    fn compression_values_parse_and_print_back() {
        for text in ["xz:0", "xz:6", "zstd:1", "zstd:19", "gzip:9"] {
            let c: Compression = text.parse().unwrap();
            assert_eq!(c.to_string(), text);
        }
        assert_eq!("xz".parse(), Ok(Compression::DEB));
        assert_eq!("zstd".parse(), Ok(Compression::Zstd(12)));
        let err = "xz:9".parse::<Compression>().unwrap_err();
        assert!(err.contains("from 0 to 6"), "{err}");
        let err = "lz4".parse::<Compression>().unwrap_err();
        assert!(err.contains("xz[:0-6], zstd[:1-19] or gzip[:1-9]"), "{err}");
    }

    #[test]
    fn packing_is_scoped_to_its_thread_and_closure() {
        let dir = tempfile::tempdir().unwrap();
        let packing = Packing {
            deb: Some(Compression::Zstd(3)),
            cache: Some(ChunkCache::new(dir.path())),
        };
        assert_eq!(Packing::current().deb(), Compression::DEB);
        packing.scope(|| {
            assert_eq!(Packing::current().deb(), Compression::Zstd(3));
            let other = std::thread::spawn(|| Packing::current().deb())
                .join()
                .unwrap();
            assert_eq!(
                other,
                Compression::DEB,
                "another thread saw this build's settings"
            );
            let _ = compress_bytes(Compression::Xz(0), &[7u8; 10_000]).unwrap();
        });
        assert_eq!(Packing::current().deb(), Compression::DEB);
        assert!(Packing::current().cache.is_none());
        assert_eq!(
            packing.cache.unwrap().misses(),
            1,
            "the encoder did not use the scope's cache"
        );
    }
}
