//! sha256 of bytes, of files and of streams, the one way every stage
//! computes it.

pub mod memo;

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A sha256 fed piece by piece (a download, a listing), finished as
/// lower-case hex.
#[derive(Default)]
pub(crate) struct Hasher(Sha256);

impl Hasher {
    pub(crate) fn new() -> Hasher {
        Hasher::default()
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest as lower-case hex.
    pub(crate) fn hex(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// Copies `from` into `to` and returns the sha256 and length of what passed.
pub(crate) fn copy_hashed(
    from: &mut impl Read,
    to: &mut impl Write,
) -> std::io::Result<(String, u64)> {
    let mut hasher = Hasher::new();
    let size = each_block(from, 256 * 1024, |block| {
        hasher.update(block);
        to.write_all(block)
    })?;
    Ok((hasher.hex(), size))
}

/// Lower-case hex sha256 of a file's content, read in 1 MiB blocks.
pub fn sha256_file(path: &Path) -> Result<String> {
    Ok(sha256_file_sized(path)?.0)
}

/// sha256 and size of a file, in one read.
pub fn sha256_file_sized(path: &Path) -> Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let size = read_blocks(path, |block| hasher.update(block))?;
    Ok((hex::encode(hasher.finalize()), size))
}

/// Feeds a file's content to `each` in 1 MiB blocks; returns its size.
/// Every digest of a whole file goes through here.
pub(crate) fn read_blocks(path: &Path, mut each: impl FnMut(&[u8])) -> Result<u64> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    each_block(&mut file, 1 << 20, |block| {
        each(block);
        Ok(())
    })
    .with_context(|| format!("reading {}", path.display()))
}

/// Feeds everything `from` yields to `each`, `size` bytes at a time at the
/// most; returns how many bytes there were.
pub(crate) fn each_block(
    from: &mut (impl Read + ?Sized),
    size: usize,
    mut each: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; size];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        each(&buf[..n])?;
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sha256("abc"), FIPS 180-2 appendix B.1.
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn every_way_in_gives_the_same_digest() {
        assert_eq!(sha256_hex(b"abc"), ABC);
        let mut h = Hasher::new();
        h.update(b"a");
        h.update(b"bc");
        assert_eq!(h.hex(), ABC);
        let mut out = Vec::new();
        let (hex, size) = copy_hashed(&mut &b"abc"[..], &mut out).unwrap();
        assert_eq!((hex.as_str(), size, out.as_slice()), (ABC, 3, &b"abc"[..]));
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"abc").unwrap();
        assert_eq!(sha256_file_sized(file.path()).unwrap(), (ABC.to_owned(), 3));
    }
}
