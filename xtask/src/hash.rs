//! sha256 of bytes and of files, the one way every stage computes it.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
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
pub fn read_blocks(path: &Path, mut each: impl FnMut(&[u8])) -> Result<u64> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(size);
        }
        size += n as u64;
        each(&buf[..n]);
    }
}
