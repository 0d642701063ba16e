//! A small deterministic tar writer (GNU format, as dpkg-deb and GNU tar
//! write it): uid/gid 0 with names root/root, fixed modes, one mtime,
//! `././@LongLink` records for names over 100 bytes, digests of each file
//! taken while it streams through.

use anyhow::{bail, Context, Result};

use super::entry_write::EntryWrite;
use super::tree::{Entry, Kind};
use crate::shared::hash::memo::{Digests, Memo, Want};

const BLOCK: usize = 512;

/// How entry names are spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// `./usr/src/x/` (dpkg data.tar, DKMS tarballs), with a `./` entry first.
    DotSlash,
    /// `usr/src/x/` (Arch packages, source tarballs).
    Plain,
}

/// A tar stream being written to `W`.
pub(crate) struct TarWriter<W: EntryWrite> {
    out: W,
    mtime: u64,
    names: Names,
}

impl<W: EntryWrite> TarWriter<W> {
    pub(crate) fn new(out: W, mtime: u64, names: Names) -> TarWriter<W> {
        TarWriter { out, mtime, names }
    }

    /// The `./` entry that dpkg-deb and `tar -C dir .` put first.
    pub(crate) fn root(&mut self) -> Result<()> {
        self.header("./", b'5', 0o755, 0, "")?;
        self.entry_end()
    }

    /// Appends one entry of a tree, streaming a file's content and taking
    /// the digests asked for.
    pub(crate) fn entry(&mut self, entry: &Entry, want: Want, memo: &Memo) -> Result<Digests> {
        let digests = self.record(entry, want, memo)?;
        self.entry_end()?;
        Ok(digests)
    }

    /// Tells the stream that an entry ended (a compressor may cut there).
    fn entry_end(&mut self) -> Result<()> {
        self.out.entry_end().context("writing a tar stream")
    }

    fn record(&mut self, entry: &Entry, want: Want, memo: &Memo) -> Result<Digests> {
        let name = self.name(&entry.path, entry.is_dir());
        match &entry.kind {
            Kind::Dir => {
                self.header(&name, b'5', entry.mode, 0, "")?;
                Ok(Digests::default())
            }
            Kind::Symlink(target) => {
                self.header(&name, b'2', 0o777, 0, target)?;
                Ok(Digests::default())
            }
            Kind::File(_) => {
                self.header(&name, b'0', entry.mode, entry.size, "")?;
                let digests = entry.copy_to(&mut self.out, want, memo)?;
                self.pad(entry.size)?;
                Ok(digests)
            }
        }
    }

    /// A regular file from memory at a literal name (`.PKGINFO`).
    pub(crate) fn bytes(&mut self, name: &str, mode: u32, bytes: &[u8]) -> Result<()> {
        self.header(name, b'0', mode, bytes.len() as u64, "")?;
        self.out.write_all(bytes).context("writing a tar stream")?;
        self.pad(bytes.len() as u64)?;
        self.entry_end()
    }

    /// Writes the end-of-archive blocks and returns the writer.
    pub(crate) fn finish(mut self) -> Result<W> {
        self.out
            .write_all(&[0u8; BLOCK * 2])
            .context("writing the end of a tar stream")?;
        Ok(self.out)
    }

    /// Entries without the end-of-archive blocks (a stream continued
    /// elsewhere).
    pub(crate) fn into_inner(self) -> W {
        self.out
    }

    fn name(&self, path: &str, dir: bool) -> String {
        let slash = if dir { "/" } else { "" };
        match self.names {
            Names::DotSlash => format!("./{path}{slash}"),
            Names::Plain => format!("{path}{slash}"),
        }
    }

    fn pad(&mut self, n: u64) -> Result<()> {
        let rem = (n % BLOCK as u64) as usize;
        if rem != 0 {
            self.out
                .write_all(&[0u8; BLOCK][..BLOCK - rem])
                .context("writing a tar stream")?;
        }
        Ok(())
    }

    fn header(&mut self, name: &str, kind: u8, mode: u32, size: u64, link: &str) -> Result<()> {
        if name.len() > 100 {
            self.long(b'L', name)?;
        }
        if link.len() > 100 {
            self.long(b'K', link)?;
        }
        let block = header_block(name, kind, mode, size, self.mtime, link)?;
        self.out.write_all(&block).context("writing a tar stream")
    }

    fn long(&mut self, kind: u8, text: &str) -> Result<()> {
        let mut data = text.as_bytes().to_vec();
        data.push(0);
        let block = header_block("././@LongLink", kind, 0o644, data.len() as u64, 0, "")?;
        self.out.write_all(&block).context("writing a tar stream")?;
        self.out.write_all(&data).context("writing a tar stream")?;
        self.pad(data.len() as u64)
    }
}

/// One 512-byte GNU header; names and link targets longer than their
/// fields are truncated here and carried by a preceding long record.
fn header_block(
    name: &str,
    kind: u8,
    mode: u32,
    size: u64,
    mtime: u64,
    link: &str,
) -> Result<[u8; BLOCK]> {
    if size >= 8 << 30 {
        bail!("{name} is {size} bytes; tar entries here are limited to 8 GiB");
    }
    let mut h = [0u8; BLOCK];
    put(&mut h[0..100], name.as_bytes());
    octal(&mut h[100..108], mode as u64);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], mtime);
    h[156] = kind;
    put(&mut h[157..257], link.as_bytes());
    h[257..265].copy_from_slice(b"ustar  \0");
    put(&mut h[265..297], b"root");
    put(&mut h[297..329], b"root");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    Ok(h)
}

fn put(field: &mut [u8], bytes: &[u8]) {
    let n = bytes.len().min(field.len());
    field[..n].copy_from_slice(&bytes[..n]);
}

/// Zero-padded octal filling the field but its last byte (a NUL).
fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let text = format!("{value:0width$o}");
    field[..width].copy_from_slice(text.as_bytes());
    field[width] = 0;
}

/// Writes a whole tree as a tar stream to `out`, returning it after the
/// end-of-archive blocks.
pub fn write_tree<W: EntryWrite>(
    out: W,
    tree: &super::tree::FileTree,
    mtime: u64,
    names: Names,
) -> Result<W> {
    let mut tar = TarWriter::new(out, mtime, names);
    if names == Names::DotSlash {
        tar.root()?;
    }
    for entry in tree.entries() {
        tar.entry(entry, Want::default(), &Memo::default())?;
    }
    tar.finish()
}
