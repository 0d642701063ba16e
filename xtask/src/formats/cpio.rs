//! The rpm payload's cpio archive ("newc", `070701`): `./`-prefixed
//! names (plain names in a source rpm), uid/gid 0, one mtime, inode
//! numbers in file-list order.

use std::io::Write;

use anyhow::{Context, Result};

use super::entry_write::EntryWrite;
use super::tree::{Entry, Kind};
use crate::shared::hash::memo::{Memo, Want};

pub(crate) fn rpm_mode(entry: &Entry) -> u32 {
    match entry.kind {
        Kind::Dir => 0o040000 | entry.mode,
        Kind::File(_) => 0o100000 | entry.mode,
        Kind::Symlink(_) => 0o120000 | 0o777,
    }
}

/// One newc record named `./<path>`; returns the sha256 of a file's bytes
/// (from `memo` when the build took it already).
pub(crate) fn cpio_entry(
    out: &mut dyn EntryWrite,
    entry: &Entry,
    ino: u32,
    mtime: u32,
    memo: &Memo,
) -> Result<Option<[u8; 32]>> {
    cpio_entry_named(out, entry, &format!("./{}", entry.path), ino, mtime, memo)
}

/// One newc record under `name`; returns the sha256 of a file's bytes.
pub(crate) fn cpio_entry_named(
    out: &mut dyn EntryWrite,
    entry: &Entry,
    name: &str,
    ino: u32,
    mtime: u32,
    memo: &Memo,
) -> Result<Option<[u8; 32]>> {
    let (nlink, size) = match &entry.kind {
        Kind::Dir => (2, 0),
        Kind::File(_) => (1, entry.size),
        Kind::Symlink(t) => (1, t.len() as u64),
    };
    let size32 = u32::try_from(size).map_err(|_| {
        anyhow::anyhow!(
            "{} is over 4 GiB; rpm's cpio format cannot hold it",
            entry.path
        )
    })?;
    let what = || format!("adding {} to the rpm payload", entry.origin());
    cpio_header(out, ino, rpm_mode(entry), nlink, mtime, size32, name).with_context(what)?;
    let digest = match &entry.kind {
        Kind::Dir => None,
        Kind::Symlink(t) => {
            out.write_all(t.as_bytes()).with_context(what)?;
            None
        }
        Kind::File(_) => {
            let d = entry.copy_to(out, Want::SHA256, memo)?;
            d.sha256
        }
    };
    out.write_all(&[0u8; 3][..pad4(size)]).with_context(what)?;
    out.entry_end().with_context(what)?;
    Ok(digest)
}

fn cpio_header(
    out: &mut dyn Write,
    ino: u32,
    mode: u32,
    nlink: u32,
    mtime: u32,
    size: u32,
    name: &str,
) -> std::io::Result<()> {
    let namesize = name.len() + 1;
    let fields = [
        ino,
        mode,
        0,
        0,
        nlink,
        mtime,
        size,
        0,
        0,
        0,
        0,
        namesize as u32,
        0,
    ];
    let mut h = String::with_capacity(110 + namesize + 3);
    h.push_str("070701");
    for f in fields {
        h.push_str(&format!("{f:08x}"));
    }
    h.push_str(name);
    h.push('\0');
    out.write_all(h.as_bytes())?;
    out.write_all(&[0u8; 3][..pad4(110 + namesize as u64)])
}

pub(crate) fn cpio_trailer(out: &mut dyn EntryWrite) -> std::io::Result<()> {
    cpio_header(out, 0, 0, 1, 0, 0, "TRAILER!!!")?;
    out.entry_end()
}

fn pad4(n: u64) -> usize {
    ((4 - n % 4) % 4) as usize
}
