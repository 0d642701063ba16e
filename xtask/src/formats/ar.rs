//! The `ar` container of a `.deb`, written as dpkg-deb writes it: member
//! names without a trailing `/`, uid/gid 0, mode 100644, one mtime.

use std::io::{self, Write};

/// The global header of every ar archive.
pub(crate) const MAGIC: &[u8; 8] = b"!<arch>\n";

/// The 60-byte header of a member of `size` bytes.
pub(crate) fn member_header(name: &str, mtime: u64, size: u64) -> [u8; 60] {
    let text = format!(
        "{name:<16}{mtime:<12}{:<6}{:<6}{:<8o}{size:<10}`\n",
        0, 0, 0o100644
    );
    let mut h = [0u8; 60];
    h.copy_from_slice(&text.as_bytes()[..60]);
    h
}

/// Writes a whole member held in memory (header, bytes, padding).
pub(crate) fn member(out: &mut dyn Write, name: &str, mtime: u64, bytes: &[u8]) -> io::Result<()> {
    out.write_all(&member_header(name, mtime, bytes.len() as u64))?;
    out.write_all(bytes)?;
    pad(out, bytes.len() as u64)
}

/// Members start at even offsets: odd-sized data is followed by `\n`.
pub(crate) fn pad(out: &mut dyn Write, size: u64) -> io::Result<()> {
    if size % 2 == 1 {
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_dpkg_layout() {
        let h = member_header("debian-binary", 1700000000, 4);
        assert_eq!(
            std::str::from_utf8(&h).unwrap(),
            "debian-binary   1700000000  0     0     100644  4         `\n"
        );
    }
}
