//! The record of an in-place rewrite, kept in the kernel library folder
//! (`.patchkit/inplace.json`) beside the originals (`.patchkit/originals/`):
//! per kernel file its sizes, sha256 before and after, sites and state.
//! Written whole to a temporary file, synced and renamed, so a reader sees
//! the old record or the new one; `reconcile` makes it agree with the files.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The hidden folder beside the kernel files. No kernel scan takes what is
/// in it: the originals end in `.orig`, never `.co` or `.hsaco`.
pub const DIR: &str = ".patchkit";
/// The record's file name inside [`DIR`].
pub const FILE: &str = "inplace.json";
/// Bump when the record's meaning changes.
const FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The original is kept and the rewritten file may or may not have
    /// replaced it yet (a run killed at the rename): the file's sha256 says.
    Intent,
    /// The rewritten file is in place.
    Done,
}

/// One kernel file rewritten in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub state: State,
    pub size_before: u64,
    pub sha256_before: String,
    pub size_after: u64,
    pub sha256_after: String,
    /// `s_setreg_imm32_b32 hwreg(26, 0, 2), 2` instructions whose 2 became 0.
    pub sites: usize,
    /// The original, relative to the kernel library folder.
    pub original: String,
}

/// Every kernel file of one library rewritten in place, by path relative to
/// the library folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub format: u32,
    /// The program that wrote it (`rocm-patchkit 0.1.0`).
    pub tool: String,
    pub files: BTreeMap<String, Entry>,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            format: FORMAT,
            tool: format!("rocm-patchkit {}", env!("CARGO_PKG_VERSION")),
            files: BTreeMap::new(),
        }
    }
}

/// The record's path for the kernel library folder `kernels`.
pub fn path(kernels: &Path) -> PathBuf {
    kernels.join(DIR).join(FILE)
}

/// Where the original of `rel` is kept, relative to the library folder.
pub fn original_of(rel: &str) -> String {
    format!("{DIR}/originals/{rel}.orig")
}

impl Record {
    /// The record of `kernels`, `None` when there is none.
    pub fn load(kernels: &Path) -> Result<Option<Record>> {
        let path = path(kernels);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let record: Record = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not a rewrite record of this version (move it away to start over)",
                path.display()
            )
        })?;
        anyhow::ensure!(
            record.format == FORMAT,
            "{} has format {}, this program reads format {FORMAT}",
            path.display(),
            record.format
        );
        Ok(Some(record))
    }

    /// Writes the record for `kernels`: a temporary file synced, renamed over
    /// the record, then the folder synced.
    pub fn save(&self, kernels: &Path) -> Result<()> {
        let path = path(kernels);
        let dir = path.parent().expect("the record is in a folder");
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut text = serde_json::to_string_pretty(self).context("serialising the record")?;
        text.push('\n');
        same_owner(dir, kernels)?;
        let tmp = staging_of(&path, "patchkit-tmp");
        write_synced(&tmp, text.as_bytes(), None)?;
        same_owner(&tmp, kernels)?;
        rename_synced(&tmp, &path)
    }
}

/// Gives `path` the owner and group of `like` when this process is root
/// (a user's venv rewritten by root stays the user's); else nothing.
pub fn same_owner(path: &Path, like: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let meta = std::fs::metadata(like).with_context(|| format!("reading {}", like.display()))?;
    std::os::unix::fs::lchown(path, Some(meta.uid()), Some(meta.gid()))
        .with_context(|| format!("giving {} the owner of {}", path.display(), like.display()))
}

/// A hidden name beside `path` for a file on its way there:
/// `.<name>.<suffix>`, which no kernel scan takes.
pub fn staging_of(path: &Path, suffix: &str) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.{suffix}"))
}

/// Creates `path` with `bytes` and syncs it.
pub fn write_synced(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode.unwrap_or(0o644))
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|_| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    if let Some(mode) = mode {
        // the umask narrowed what `open` set
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
    }
    Ok(())
}

/// Renames `from` over `to` and syncs `to`'s folder.
pub fn rename_synced(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to)
        .with_context(|| format!("renaming {} to {}", from.display(), to.display()))?;
    sync_dir(to.parent().unwrap_or(Path::new(".")))
}

/// Syncs a folder, so the names changed in it survive a crash.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing the folder {}", dir.display()))
}

/// sha256 and size of a file, `None` when it does not exist.
pub fn digest(path: &Path) -> Result<Option<(String, u64)>> {
    if !path.exists() {
        return Ok(None);
    }
    crate::hash::sha256_file_sized(path).map(Some)
}

/// What a recorded file is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Now {
    /// As the rewrite left it.
    Rewritten,
    /// As it was before the rewrite.
    Original,
    /// Neither (a package upgrade, a reinstall, an edit), or gone.
    Changed,
}

/// Compares a file with its entry.
pub fn now(kernels: &Path, rel: &str, entry: &Entry) -> Result<Now> {
    Ok(match digest(&kernels.join(rel))? {
        Some((sha, size)) if size == entry.size_after && sha == entry.sha256_after => {
            Now::Rewritten
        }
        Some((sha, size)) if size == entry.size_before && sha == entry.sha256_before => {
            Now::Original
        }
        _ => Now::Changed,
    })
}

/// What the record of a kernel library says about it, for doctor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// No record (or an empty one).
    None,
    /// Every recorded file is as the rewrite left it.
    Rewritten { files: usize, sites: usize },
    /// A record whose files are not all as the rewrite left it: these.
    Stale { changed: Vec<String> },
}

/// Reads the record of `kernels` and checks every file it names by sha256.
pub fn status(kernels: &Path) -> Status {
    let record = match Record::load(kernels) {
        Ok(Some(r)) if !r.files.is_empty() => r,
        Ok(_) => return Status::None,
        Err(e) => {
            return Status::Stale {
                changed: vec![format!("{e:#}")],
            }
        }
    };
    let mut changed = Vec::new();
    let mut sites = 0;
    for (rel, entry) in &record.files {
        sites += entry.sites;
        if !matches!(now(kernels, rel, entry), Ok(Now::Rewritten)) {
            changed.push(rel.clone());
        }
    }
    if changed.is_empty() {
        Status::Rewritten {
            files: record.files.len(),
            sites,
        }
    } else {
        Status::Stale { changed }
    }
}
