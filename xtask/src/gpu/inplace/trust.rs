//! What a rewrite record must be before anything it names is read, hashed
//! or restored, for every reader (the rewrite, `--check`, `--undo`, doctor):
//! `.patchkit/`, its `originals/` and `inplace.json` each ours (no symlink,
//! owned by the library's owner or by this user), the record a regular file
//! of bounded size, every key a kernel file's path inside the library (not
//! absolute, no `..`, no symlinked folder on the way, not in `.patchkit/`),
//! and every original where this tool keeps it. A record that is not is
//! refused whole, naming it, as the patch state record is (`state::read`).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{anyhow, Result};

use crate::gpu::codeobj::files::{is_kernel_name, kind_of, open_regular, Unopened};

/// The hidden folder beside the kernel files. No kernel scan takes what is
/// in it: the originals end in `.orig`, never `.co` or `.hsaco`.
pub(crate) const DIR: &str = ".patchkit";
/// The record's file name inside [`DIR`].
pub(crate) const FILE: &str = "inplace.json";
/// The folder inside [`DIR`] that keeps the originals.
pub(crate) const ORIGINALS: &str = "originals";
/// Where the original of `rel` is kept, relative to the library folder.
pub(crate) fn original_of(rel: &str) -> String {
    format!("{DIR}/{ORIGINALS}/{rel}.orig")
}

/// No record this tool writes comes near this (about 400 bytes a file).
pub(crate) const MAX_RECORD: u64 = 64 << 20;

/// The one refusal every reader gives for `what` (the record, or the
/// folder of ours that is not).
pub(crate) fn refusal(what: &Path, why: &str) -> anyhow::Error {
    anyhow!(
        "refusing the rewrite record {}: {why}; nothing it names was read, hashed or restored. \
         rewrite-hipblaslt never writes that: if you did not make it, move {} away (the kernel \
         files are as they are now) and run again",
        what.display(),
        what.display()
    )
}

/// Checks the folder of ours at `path` (`.patchkit/`, `originals/`): a real
/// folder owned by the library's owner or this user; `false` when absent.
pub(crate) fn our_dir(path: &Path, library_uid: u32) -> Result<bool> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(refusal(path, &format!("cannot be read ({e})"))),
    };
    if !meta.is_dir() {
        let what = kind_of(meta.file_type());
        let target = std::fs::read_link(path)
            .map(|t| format!(" to {}", t.display()))
            .unwrap_or_default();
        return Err(refusal(
            path,
            &format!("it is {what}{target}, not a folder of this tool"),
        ));
    }
    ours(path, meta.uid(), library_uid)?;
    Ok(true)
}

/// Refuses what neither the library's owner nor this user owns.
fn ours(path: &Path, uid: u32, library_uid: u32) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if uid != library_uid && uid != me {
        return Err(refusal(
            path,
            &format!(
                "it is owned by uid {uid}, neither the library's owner (uid {library_uid}) nor you (uid {me})"
            ),
        ));
    }
    Ok(())
}

/// The bytes of the record at `path`: a regular file (never a symlink, a
/// FIFO or a device, never opened before its type is known) of at most
/// [`MAX_RECORD`] bytes; `None` when there is none.
pub(crate) fn read_record(path: &Path, library_uid: u32) -> Result<Option<Vec<u8>>> {
    let (file, meta) = match open_regular(path, MAX_RECORD, false) {
        Ok(opened) => opened,
        Err(Unopened::Missing) => return Ok(None),
        Err(Unopened::Not(what)) => {
            return Err(refusal(
                path,
                &format!("it is {what}, not a regular file this tool wrote"),
            ))
        }
        Err(Unopened::TooLarge(len, limit)) => {
            return Err(refusal(
                path,
                &format!(
                    "it is {}, more than any record this tool writes ({})",
                    crate::shared::report::human_size(len),
                    crate::shared::report::human_size(limit)
                ),
            ))
        }
        Err(e @ Unopened::Io(_)) => return Err(refusal(path, &e.to_string())),
    };
    ours(path, meta.uid(), library_uid)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_RECORD + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refusal(path, &format!("cannot be read ({e})")))?;
    if bytes.len() as u64 > MAX_RECORD {
        return Err(refusal(path, "it grew past any record this tool writes"));
    }
    Ok(Some(bytes))
}

/// Checks every key and its original of a record read from `path`
/// against the library folder `kernels`.
pub(crate) fn check_entries<'a>(
    kernels: &Path,
    path: &Path,
    entries: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<()> {
    for (key, original) in entries {
        let shown = key.escape_debug();
        check_key(key).map_err(|why| refusal(path, &format!("the key `{shown}` {why}")))?;
        if original != original_of(key) {
            return Err(refusal(
                path,
                &format!(
                    "the original of `{shown}` is `{}`, not `{}` where this tool keeps it",
                    original.escape_debug(),
                    original_of(key).escape_debug()
                ),
            ));
        }
        for rel in [key, original] {
            if let Some(link) = symlink_on_the_way(kernels, rel) {
                return Err(refusal(
                    path,
                    &format!(
                        "`{}` is below `{}`, which is a symlink: it may lead out of the library",
                        rel.escape_debug(),
                        link.escape_debug()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Why `key` is not a kernel file's path inside the library.
fn check_key(key: &str) -> Result<(), &'static str> {
    if key.starts_with('/') {
        return Err("is an absolute path");
    }
    if key.chars().any(|c| c.is_control()) {
        return Err("holds a control character");
    }
    let parts: Vec<&str> = key.split('/').collect();
    if parts.iter().any(|p| matches!(*p, "" | "." | "..")) {
        return Err("has an empty, `.` or `..` component");
    }
    if parts[0] == DIR {
        return Err("is inside .patchkit/, where no kernel file is");
    }
    if !is_kernel_name(key) {
        return Err("is not a kernel file's name (*.co, *.hsaco)");
    }
    Ok(())
}

/// The first folder of `rel` (below `kernels`) that is a symlink, if any;
/// a missing one ends the search (nothing is below it).
fn symlink_on_the_way(kernels: &Path, rel: &str) -> Option<String> {
    let parts: Vec<&str> = rel.split('/').collect();
    for end in 1..parts.len() {
        let above = parts[..end].join("/");
        match std::fs::symlink_metadata(kernels.join(&above)) {
            Ok(meta) if meta.file_type().is_symlink() => return Some(above),
            Ok(meta) if meta.is_dir() => {}
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_leave_the_library_are_refused() {
        assert!(check_key("TensileLibrary_gfx1201.co").is_ok());
        assert!(check_key("sub/Kernels.so-000-gfx1201.hsaco").is_ok());
        for (evil, why) in [
            ("/etc/x.co", "absolute"),
            ("../x.co", "`..`"),
            ("a/../../x.co", "`..`"),
            ("a//x.co", "empty"),
            ("./x.co", "`.`"),
            (".patchkit/inplace.co", ".patchkit"),
            ("x.so", "kernel file"),
            ("/dev/zero", "absolute"),
            ("a\nb.co", "control"),
        ] {
            let got = check_key(evil).unwrap_err();
            assert!(got.contains(why), "{evil}: {got}");
        }
    }
}
