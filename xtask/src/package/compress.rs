//! Compressors behind one streaming writer, configured for byte-identical
//! output: gzip without a file name and with mtime 0, deflated in
//! parallel in fixed chunks ([`super::pgz`]), xz and zstd always
//! through their multithreaded encoders (whose output does not depend on
//! the number of threads), and the digests writers need on the way.

use std::io::{self, Read, Write};

use anyhow::{Context, Result};
use md5::Md5;
use sha2::{Digest, Sha256};

use super::pgz::ParGz;

/// A compressor and its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    /// gzip, as `gzip -n -<level>`.
    Gzip(u32),
    /// xz preset (0..=9), CRC64 check, as `xz -<level>`.
    Xz(u32),
    /// zstd level (1..=19), with content checksum, as `zstd -<level>`.
    Zstd(i32),
}

impl Compression {
    /// The `.deb` members: dpkg-deb's default on Debian 12 (xz -6); dpkg
    /// 1.21 cannot read zstd members.
    pub const DEB: Compression = Compression::Xz(6);
    /// The rpm payload: zstd, which rpm >= 4.14 reads (`rpmlib(PayloadIsZstd)`);
    /// level 12 is smaller than rpmbuild's gzip -9 default on Debian and
    /// several times faster than zstd -19.
    pub const RPM: Compression = Compression::Zstd(12);
    /// Arch packages: makepkg's `.pkg.tar.zst`, at a level that stays small
    /// and fast.
    pub const ARCH: Compression = Compression::Zstd(12);
    /// Source tarballs (`.tar.gz`, `.dkms.tar.gz`): `gzip -n`, gzip's
    /// default level, as `tar -czf` writes them.
    pub const TARBALL: Compression = Compression::Gzip(6);

    /// A compressing writer over `inner`; call [`Encoder::finish`].
    pub fn encoder<W: Write>(self, inner: W) -> Result<Encoder<W>> {
        Ok(match self {
            Compression::None => Encoder::Plain(inner),
            Compression::Gzip(level) => Encoder::Gzip(ParGz::new(inner, level, threads() as usize)),
            Compression::Xz(level) => {
                let stream = xz2::stream::MtStreamBuilder::new()
                    .threads(threads().min(XZ_MAX_THREADS))
                    .block_size(XZ_BLOCK)
                    .preset(level)
                    .check(xz2::stream::Check::Crc64)
                    .encoder()
                    .context("setting up the xz encoder")?;
                Encoder::Xz(xz2::write::XzEncoder::new_stream(inner, stream))
            }
            Compression::Zstd(level) => {
                let mut enc =
                    zstd::Encoder::new(inner, level).context("setting up the zstd encoder")?;
                enc.multithread(threads())
                    .context("setting zstd worker threads")?;
                enc.include_checksum(true)
                    .context("setting the zstd checksum")?;
                Encoder::Zstd(enc)
            }
        })
    }
}

/// xz blocks of 24 MiB, xz's (and so dpkg-deb's) default for -6, pinned
/// here because the output depends on the block size (never on the
/// thread count). Two threads then peak near 250 MiB; 8 MiB blocks would
/// use ~100 MiB less but made amdgpu's data.tar.xz 19% larger.
const XZ_BLOCK: u64 = 24 << 20;
const XZ_MAX_THREADS: u32 = 2;

/// Worker threads for xz and zstd: the output is the same for any count
/// of at least one, so this only changes speed.
fn threads() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
        .clamp(1, 8)
}

/// A streaming compressor.
pub enum Encoder<W: Write> {
    Plain(W),
    Gzip(ParGz<W>),
    Xz(xz2::write::XzEncoder<W>),
    Zstd(zstd::Encoder<'static, W>),
}

impl<W: Write> Encoder<W> {
    /// Flushes the compressed stream's end and returns the inner writer.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Plain(w) => Ok(w),
            Encoder::Gzip(e) => e.finish(),
            Encoder::Xz(e) => e.finish(),
            Encoder::Zstd(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Plain(w) => w.write(buf),
            Encoder::Gzip(e) => e.write(buf),
            Encoder::Xz(e) => e.write(buf),
            Encoder::Zstd(e) => e.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Plain(w) => w.flush(),
            Encoder::Gzip(e) => e.flush(),
            Encoder::Xz(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
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

/// Which digests to take of each file's bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Want {
    pub md5: bool,
    pub sha256: bool,
}

/// The digests of one file.
#[derive(Debug, Clone, Default)]
pub struct Digests {
    pub md5: Option<[u8; 16]>,
    pub sha256: Option<[u8; 32]>,
}

/// Copies all of `src` to `dst`, hashing as asked; returns the bytes copied.
pub fn copy_hashed(
    src: &mut dyn Read,
    dst: &mut dyn Write,
    want: Want,
) -> io::Result<(u64, Digests)> {
    let mut md5 = want.md5.then(Md5::new);
    let mut sha = want.sha256.then(Sha256::new);
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        if let Some(h) = &mut md5 {
            h.update(chunk);
        }
        if let Some(h) = &mut sha {
            h.update(chunk);
        }
        dst.write_all(chunk)?;
        total += n as u64;
    }
    let digests = Digests {
        md5: md5.map(|h| h.finalize().into()),
        sha256: sha.map(|h| h.finalize().into()),
    };
    Ok((total, digests))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (0..1_000_000u32)
            .flat_map(|i| format!("line {} {}\n", i % 977, i / 13).into_bytes())
            .collect()
    }

    #[test]
    fn gzip_header_has_no_time_and_no_name() {
        let out = compress_bytes(Compression::Gzip(9), b"hello").unwrap();
        assert_eq!(&out[..4], &[0x1f, 0x8b, 8, 0], "no FNAME flag");
        assert_eq!(&out[4..8], &[0, 0, 0, 0], "mtime 0");
    }

    #[test]
    fn parallel_output_does_not_depend_on_thread_count() {
        let data = sample();
        for c in [Compression::Xz(1), Compression::Zstd(3)] {
            let one = {
                let out = match c {
                    Compression::Xz(l) => {
                        let s = xz2::stream::MtStreamBuilder::new()
                            .threads(1)
                            .block_size(XZ_BLOCK)
                            .preset(l)
                            .check(xz2::stream::Check::Crc64)
                            .encoder()
                            .unwrap();
                        let mut e = xz2::write::XzEncoder::new_stream(Vec::new(), s);
                        e.write_all(&data).unwrap();
                        e.finish().unwrap()
                    }
                    Compression::Zstd(l) => {
                        let mut e = zstd::Encoder::new(Vec::new(), l).unwrap();
                        e.multithread(1).unwrap();
                        e.include_checksum(true).unwrap();
                        e.write_all(&data).unwrap();
                        e.finish().unwrap()
                    }
                    _ => unreachable!(),
                };
                out
            };
            let many = {
                let mut e = c.encoder(Vec::new()).unwrap();
                e.write_all(&data).unwrap();
                e.finish().unwrap()
            };
            assert!(one == many, "{c:?} output changed with the thread count");
        }
    }
}
