//! comgr's on-disk cache (`$AMD_COMGR_CACHE_DIR`, else `~/.cache/comgr`;
//! on unless `AMD_COMGR_CACHE=0`) keeps what it unbundled from compressed
//! kernel files, keyed by the bundle header's hash (some comgr releases by
//! less), so it can serve the old code of a rewritten file. Its entries are
//! LLVM `localCache` files, `llvmcache-<key>`: a u64 length and the command's
//! output (for an unbundle, each output file as a u32 length and its bytes),
//! then a u64 length and the log. Each entry is judged by the code objects
//! in it; one that holds gfx12 code switching expert scheduling on goes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use std::io::Read;

use crate::gpu::codeobj::files::open_regular;
use crate::gpu::codeobj::{self, FileVerdict};

/// Entries larger than this are not read (comgr's own limit is 5 GiB in all).
const MAX_ENTRY: u64 = 1 << 30;

/// The comgr cache folders of this user, as comgr picks them: the one
/// `AMD_COMGR_CACHE_DIR` names, the default one (where earlier runs without
/// that variable wrote), and under sudo the invoking user's default one;
/// the variables are those of `env`.
pub(crate) fn dirs(env: &crate::shared::settings::Environment) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = env.path("AMD_COMGR_CACHE_DIR") {
        out.push(dir);
    }
    let base = crate::input::workspace::user_cache_home(env);
    // under sudo, the caches of the user who ran it are the ones that matter
    let sudo_home = env
        .get("SUDO_USER")
        .and_then(|user| user.to_str())
        .and_then(home_of)
        .map(|home| home.join(".cache"));
    for base in [base, sudo_home].into_iter().flatten() {
        let dir = base.join("comgr");
        if !out.contains(&dir) {
            out.push(dir);
        }
    }
    out
}

/// `user`'s home folder from `/etc/passwd`.
fn home_of(user: &str) -> Option<PathBuf> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7 && fields[0] == user && fields[5].starts_with('/'))
            .then(|| PathBuf::from(fields[5]))
    })
}

/// The output blobs of one cache entry: the unbundled files when the
/// output reads as u32-length-prefixed pieces, else the output itself.
fn outputs(entry: &[u8]) -> Vec<&[u8]> {
    let Some(len) = entry
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
    else {
        return Vec::new();
    };
    let Some(output) = usize::try_from(len)
        .ok()
        .and_then(|n| entry.get(8..8usize.checked_add(n)?))
    else {
        return vec![entry];
    };
    let mut pieces = Vec::new();
    let mut rest = output;
    while rest.len() >= 4 {
        let n = u32::from_le_bytes(rest[..4].try_into().expect("4")) as usize;
        match rest.get(4..4 + n) {
            Some(piece) => pieces.push(piece),
            None => return vec![output],
        }
        rest = &rest[4 + n..];
    }
    if rest.is_empty() && !pieces.is_empty() {
        pieces
    } else {
        vec![output]
    }
}

/// Whether a cache entry holds gfx12 code that switches expert scheduling on.
pub(crate) fn serves_old_code(entry: &[u8]) -> bool {
    outputs(entry)
        .into_iter()
        .any(|piece| matches!(codeobj::judge_bytes(piece), FileVerdict::On { .. }))
}

/// The entries of `dir` that can serve code with expert scheduling on.
pub(crate) fn stale_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("llvmcache-") {
            continue;
        }
        // a regular file within the bound, never a link, FIFO or device
        let Ok((file, meta)) = open_regular(&entry.path(), MAX_ENTRY, false) else {
            continue;
        };
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_ENTRY)
            .read_to_end(&mut bytes)
            .with_context(|| format!("reading {}", entry.path().display()))?;
        if serves_old_code(&bytes) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unbundle entry as comgr writes it: each output as a u32 length and
    /// its bytes, the whole behind a u64 length, then the log.
    fn entry(outputs: &[&[u8]]) -> Vec<u8> {
        let mut output = Vec::new();
        for o in outputs {
            output.extend_from_slice(&(o.len() as u32).to_le_bytes());
            output.extend_from_slice(o);
        }
        let mut out = (output.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&output);
        out.extend_from_slice(&4u64.to_le_bytes());
        out.extend_from_slice(b"log\n");
        out
    }

    #[test]
    fn an_entry_is_split_into_its_output_files() {
        let e = entry(&[b"first", b"", b"third"]);
        assert_eq!(outputs(&e), vec![&b"first"[..], b"", b"third"]);
        // an output that does not read as pieces is taken whole
        let mut whole = 3u64.to_le_bytes().to_vec();
        whole.extend_from_slice(b"abc");
        assert_eq!(outputs(&whole), vec![&b"abc"[..]]);
        // a length past the end: the whole file
        let mut bad = 99u64.to_le_bytes().to_vec();
        bad.extend_from_slice(b"abc");
        assert_eq!(outputs(&bad).len(), 1);
        assert!(outputs(b"short").is_empty());
        assert!(!serves_old_code(&e));
    }
}
