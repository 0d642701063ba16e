//! Dist: publish a build atomically and check a published one.
//!
//! A build is written into a staging folder beside the destination
//! (`<out>.staging-<pid>`), `manifest.json` then `SHA256SUMS` last, and the
//! staging folder then takes the destination's place in one atomic
//! `renameat2(RENAME_EXCHANGE)`. A failed or killed run leaves the previous
//! publication exactly as it was; its leftovers are removed by the next run.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The name of the checksum file, written last.
pub(crate) const SUMS: &str = "SHA256SUMS";
/// The name of the machine-readable record of a build.
pub(crate) const MANIFEST: &str = "manifest.json";

/// One published file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

/// A publication being assembled; dropped without [`Staging::publish`], it
/// removes itself.
pub struct Staging {
    out: PathBuf,
    dir: PathBuf,
    published: bool,
}

/// Refuses an output folder that holds anything but a publication of ours
/// (a `manifest.json` of this tool) or nothing: replacing it would delete
/// the user's files. Call it before fetching; [`Staging::begin`] calls it
/// again.
pub(crate) fn check_replaceable(out: &Path) -> Result<()> {
    let meta = match fs::symlink_metadata(out) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", out.display())),
    };
    let refuse = |what: &str| -> Result<()> {
        Err(crate::shared::diag::UsageError(format!(
            "the output folder {} {what}; a build replaces the whole folder, so it only replaces \
             an empty folder or an earlier publication (with its {MANIFEST}): give `--out` a new \
             or empty folder, or move the files away first",
            out.display()
        ))
        .into())
    };
    if !meta.is_dir() {
        return refuse("is not a folder");
    }
    let mut entries = fs::read_dir(out).with_context(|| format!("listing {}", out.display()))?;
    if entries.next().is_none() {
        return Ok(());
    }
    let manifest = out.join(MANIFEST);
    let ours = fs::read(&manifest)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|v| v.get("outputs").is_some());
    if ours {
        Ok(())
    } else {
        refuse(&format!(
            "holds files that are not a publication of rocm-patchkit (no {MANIFEST} of ours)"
        ))
    }
}

impl Staging {
    /// Starts a publication to `out`, clearing what killed runs left behind.
    /// Refuses an `out` that holds anything but an earlier publication.
    pub fn begin(out: &Path) -> Result<Staging> {
        let out = std::path::absolute(out)?;
        check_replaceable(&out)?;
        let parent = out
            .parent()
            .context("the output folder needs a parent folder")?;
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        remove_leftovers(&out)?;
        let dir = sibling(&out, &format!("staging-{}", std::process::id()));
        fs::create_dir(&dir)
            .with_context(|| format!("creating staging folder {}", dir.display()))?;
        Ok(Staging {
            out,
            dir,
            published: false,
        })
    }

    /// The folder to write the artifacts into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `manifest.json` from `manifest` (given every output's size and
    /// sha256), then `SHA256SUMS`, then swaps the folder into place.
    pub fn publish<M: Serialize>(
        mut self,
        manifest: impl FnOnce(BTreeMap<String, Output>) -> M,
    ) -> Result<PathBuf> {
        let outputs = hash_tree(&self.dir, &[])?;
        let mut sums = outputs.clone();
        let manifest = serde_json::to_value(manifest(outputs))?;
        let text = serde_json::to_string_pretty(&manifest)? + "\n";
        write_synced(&self.dir.join(MANIFEST), text.as_bytes())?;
        // Every file but the manifest was hashed a moment ago.
        sums.insert(MANIFEST.to_owned(), hash_file(&self.dir.join(MANIFEST))?);
        let sums_text: String = sums
            .iter()
            .map(|(name, o)| format!("{}  {name}\n", o.sha256))
            .collect();
        write_synced(&self.dir.join(SUMS), sums_text.as_bytes())?;
        fs::File::open(&self.dir)?.sync_all()?;
        swap_into_place(&self.dir, &self.out)?;
        self.published = true;
        Ok(self.out.clone())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    out.with_file_name(name)
}

/// Removes `<out>.staging-*` and `<out>.old-*` of runs that are gone; puts a
/// previous publication back if a run died between the two renames of the
/// fallback path.
fn remove_leftovers(out: &Path) -> Result<()> {
    let (Some(parent), Some(name)) = (out.parent(), out.file_name()) else {
        return Ok(());
    };
    let prefix = format!("{}.", name.to_string_lossy());
    for entry in fs::read_dir(parent)? {
        let entry = entry?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        let pid = rest
            .strip_prefix("staging-")
            .or_else(|| rest.strip_prefix("old-"));
        let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() && pid != std::process::id() {
            continue;
        }
        if rest.starts_with("old-") && !out.exists() {
            fs::rename(entry.path(), out)?;
        } else {
            fs::remove_dir_all(entry.path())
                .with_context(|| format!("removing leftover {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Puts `new` at `out` atomically: exchanged with the old folder in one
/// system call where the file system allows it, else by two renames.
fn swap_into_place(new: &Path, out: &Path) -> Result<()> {
    if !out.exists() {
        fs::rename(new, out)
            .with_context(|| format!("moving {} to {}", new.display(), out.display()))?;
        return Ok(());
    }
    let a = CString::new(new.as_os_str().as_bytes())?;
    let b = CString::new(out.as_os_str().as_bytes())?;
    // SAFETY: both paths are valid NUL-terminated strings for the duration of the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        // `new` now holds the previous publication.
        fs::remove_dir_all(new)
            .with_context(|| format!("removing the previous publication {}", new.display()))?;
        return Ok(());
    }
    let old = sibling(out, &format!("old-{}", std::process::id()));
    fs::rename(out, &old).with_context(|| format!("moving {} aside", out.display()))?;
    fs::rename(new, out)
        .with_context(|| format!("moving {} to {}", new.display(), out.display()))?;
    fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}

/// Size and sha256 of every file below `dir`, by relative path with `/`,
/// leaving out the names in `skip`.
pub fn hash_tree(dir: &Path, skip: &[&str]) -> Result<BTreeMap<String, Output>> {
    fn walk(
        dir: &Path,
        rel: &str,
        skip: &[&str],
        out: &mut BTreeMap<String, Output>,
    ) -> Result<()> {
        for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if skip.contains(&child.as_str()) {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                walk(&entry.path(), &child, skip, out)?;
            } else if kind.is_file() {
                out.insert(child, hash_file(&entry.path())?);
            } else {
                bail!(
                    "{} is neither a file nor a folder: dist/ holds only regular files",
                    entry.path().display()
                );
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, "", skip, &mut out)?;
    Ok(out)
}

/// Size and sha256 of one file.
pub(crate) fn hash_file(path: &Path) -> Result<Output> {
    let (sha256, size) = crate::shared::hash::sha256_file_sized(path)?;
    Ok(Output { size, sha256 })
}

/// Times a publication may be replaced under one `verify` before it gives up.
const VERIFY_TRIES: usize = 20;

/// What `verify` found wrong with a published folder; empty when it is
/// exactly as published. The folder is opened once and every file read
/// through that one folder, so `SHA256SUMS`, `manifest.json` and the files
/// are one publication's; when a build published again meanwhile (the
/// path now names another folder), the new one is read from the start.
pub fn verify(dir: &Path) -> Result<Vec<String>> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..VERIFY_TRIES {
        let held = fs::File::open(dir).with_context(|| {
            format!("opening {}: is it a published dist folder?", dir.display())
        })?;
        let meta = held
            .metadata()
            .with_context(|| format!("reading {}", dir.display()))?;
        // this process's name of the folder it holds, whatever is renamed
        let at = {
            use std::os::fd::AsRawFd;
            PathBuf::from(format!("/proc/self/fd/{}", held.as_raw_fd()))
        };
        let read = if meta.is_dir() && at.is_dir() {
            verify_at(&at, dir).map_err(|e| {
                anyhow::anyhow!(
                    "{}",
                    format!("{e:#}").replace(&at.display().to_string(), &dir.display().to_string())
                )
            })
        } else {
            verify_at(dir, dir)
        };
        let same =
            fs::metadata(dir).is_ok_and(|now| now.dev() == meta.dev() && now.ino() == meta.ino());
        if same {
            return read;
        }
    }
    bail!(
        "{} was replaced by a new publication {VERIFY_TRIES} times while it was read: run verify \
         again once the build publishing there is done",
        dir.display()
    )
}

/// [`verify`] of the folder read at `root`, named `dir` in messages.
fn verify_at(root: &Path, dir: &Path) -> Result<Vec<String>> {
    let sums_path = dir.join(SUMS);
    let sums_text = fs::read_to_string(root.join(SUMS)).with_context(|| {
        format!(
            "reading {}: is {} a published dist folder?",
            sums_path.display(),
            dir.display()
        )
    })?;
    let mut problems = Vec::new();
    let mut listed = BTreeMap::new();
    for (i, line) in sums_text.lines().enumerate() {
        match line.split_once("  ") {
            Some((sha, name)) if sha.len() == 64 => {
                listed.insert(name.to_owned(), sha.to_owned());
            }
            _ => problems.push(format!(
                "{}:{}: not a `<sha256>  <file>` line",
                sums_path.display(),
                i + 1
            )),
        }
    }
    let actual = hash_tree(root, &[SUMS])?;
    for (name, sha) in &listed {
        match actual.get(name) {
            None => problems.push(format!("{name}: listed in {SUMS} but missing")),
            Some(o) if &o.sha256 != sha => {
                problems.push(format!("{name}: sha256 {} but {SUMS} says {sha}", o.sha256))
            }
            Some(_) => {}
        }
    }
    for name in actual.keys().filter(|n| !listed.contains_key(*n)) {
        problems.push(format!("{name}: present but not listed in {SUMS}"));
    }
    let manifest_path = dir.join(MANIFEST);
    let manifest: serde_json::Value = match fs::read(root.join(MANIFEST)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("parsing {}", manifest_path.display()))?,
        Err(_) => {
            problems.push(format!("{MANIFEST}: missing"));
            return Ok(problems);
        }
    };
    let recorded: BTreeMap<String, Output> = serde_json::from_value(manifest["outputs"].clone())
        .with_context(|| {
            format!(
                "{}: `outputs` is not a map of size and sha256",
                manifest_path.display()
            )
        })?;
    for (name, output) in &recorded {
        match actual.get(name) {
            None => problems.push(format!("{name}: recorded in {MANIFEST} but missing")),
            Some(o) if o != output => problems.push(format!(
                "{name}: {} bytes, sha256 {}; {MANIFEST} records {} bytes, sha256 {}",
                o.size, o.sha256, output.size, output.sha256
            )),
            Some(_) => {}
        }
    }
    for name in actual
        .keys()
        .filter(|n| !recorded.contains_key(*n) && n.as_str() != MANIFEST)
    {
        problems.push(format!("{name}: present but not recorded in {MANIFEST}"));
    }
    Ok(problems)
}
