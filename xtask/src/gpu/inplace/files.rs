//! How the in-place rewrite touches files: a new file is written hidden
//! beside the one it replaces, synced, given that file's owner, mode (with
//! setuid and setgid), extended attributes and times, then renamed over
//! it; a recorded file is hashed only when it is a regular file of the
//! recorded size (never through a symlink, never a FIFO or a device); a
//! failed write says what happened (no space, a read-only filesystem).

use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::gpu::codeobj::files::{open_regular, Unopened, MAX_FILE};

/// Suffixes of our files on their way somewhere (all hidden, none a kernel name).
pub(crate) const NEW: &str = "patchkit-new";
pub(crate) const UNDO: &str = "patchkit-undo";
pub(crate) const TMP: &str = "patchkit-tmp";

/// A hidden name beside `path` for a file on its way there:
/// `.<name>.<suffix>`, which no kernel scan takes.
pub(crate) fn staging_of(path: &Path, suffix: &str) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.{suffix}"))
}

/// What went wrong writing, in words a user acts on: no space and a
/// read-only filesystem said as such.
pub(crate) fn why_not_written(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => "no space left on its filesystem".to_owned(),
        Some(libc::EDQUOT) => "the disk quota of this user is used up".to_owned(),
        Some(libc::EROFS) => "its filesystem is mounted read-only".to_owned(),
        _ => e.to_string(),
    }
}

/// Whether an error (anywhere in its chain) is a full disk or quota.
pub(crate) fn is_no_space(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(|e| e.raw_os_error())
            .is_some_and(|n| n == libc::ENOSPC || n == libc::EDQUOT)
    })
}

/// Creates `path` (replacing a leftover) with `bytes` and syncs it; when
/// `like` is given, the new file takes its owner (when this process is
/// root), mode, extended attributes and times, so a rewrite changes only
/// the bytes.
pub(crate) fn write_synced(path: &Path, bytes: &[u8], like: Option<&Path>) -> Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    match like {
        Some(like) => take_attributes(&file, path, like)?,
        None => file
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("setting the mode of {}", path.display()))?,
    }
    file.sync_all()
        .with_context(|| format!("writing {}", path.display()))
}

/// Gives the open `file` at `path` what `like` has besides its bytes:
/// owner first (a change of owner clears setuid and setgid), then the mode,
/// the extended attributes (`user.*` must follow; others where this
/// process may read and write them) and the access and modification times.
fn take_attributes(file: &File, path: &Path, like: &Path) -> Result<()> {
    let meta = std::fs::metadata(like).with_context(|| format!("reading {}", like.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid())).with_context(|| {
            format!("giving {} the owner of {}", path.display(), like.display())
        })?;
    }
    file.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o7777))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    copy_xattrs(file, path, like)?;
    let times = std::fs::FileTimes::new()
        .set_accessed(meta.accessed().unwrap_or(std::time::SystemTime::now()))
        .set_modified(meta.modified().unwrap_or(std::time::SystemTime::now()));
    file.set_times(times)
        .with_context(|| format!("setting the times of {}", path.display()))
}

/// Copies the extended attributes of `like` onto `file`.
fn copy_xattrs(file: &File, path: &Path, like: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let c = std::ffi::CString::new(like.as_os_str().as_bytes())?;
    let names = xattr_call(|buf, len| {
        // SAFETY: `c` is a valid C string; `buf` has room for `len` bytes.
        unsafe { libc::listxattr(c.as_ptr(), buf.cast(), len) }
    });
    let Ok(names) = names else {
        return Ok(()); // no attributes here (or none this filesystem keeps)
    };
    for name in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let key = std::ffi::CString::new(name)?;
        let shown = String::from_utf8_lossy(name);
        let must = name.starts_with(b"user.");
        let value = xattr_call(|buf, len| {
            // SAFETY: valid C strings; `buf` has room for `len` bytes.
            unsafe { libc::getxattr(c.as_ptr(), key.as_ptr(), buf.cast(), len) }
        });
        let value = match value {
            Ok(v) => v,
            Err(_) if !must => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("reading the attribute {shown} of {}", like.display())
                })
            }
        };
        // SAFETY: an open descriptor, a valid C string and `value` alive.
        let rc = unsafe {
            libc::fsetxattr(
                file.as_raw_fd(),
                key.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        if rc != 0 && must {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("setting the attribute {shown} of {}", path.display()));
        }
    }
    Ok(())
}

/// Runs an xattr call that fills a buffer: asks the size, then the bytes.
fn xattr_call(call: impl Fn(*mut u8, usize) -> isize) -> std::io::Result<Vec<u8>> {
    for _ in 0..4 {
        let size = call(std::ptr::null_mut(), 0);
        if size < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut buf = vec![0u8; size as usize];
        let got = call(buf.as_mut_ptr(), buf.len());
        if got >= 0 {
            buf.truncate(got as usize);
            return Ok(buf);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ERANGE) {
            return Err(e);
        }
    }
    Err(std::io::Error::other(
        "the attributes kept changing while read",
    ))
}

/// Renames `from` over `to` and syncs `to`'s folder.
pub(crate) fn rename_synced(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to)
        .with_context(|| format!("renaming {} to {}", from.display(), to.display()))?;
    sync_dir(to.parent().unwrap_or(Path::new(".")))
}

/// Syncs a folder, so the names changed in it survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing the folder {}", dir.display()))
}

/// Gives `path` the owner and group of `like` when this process is root
/// (a user's venv rewritten by root stays the user's); else nothing.
pub(crate) fn same_owner(path: &Path, like: &Path) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let meta = std::fs::metadata(like).with_context(|| format!("reading {}", like.display()))?;
    std::os::unix::fs::lchown(path, Some(meta.uid()), Some(meta.gid()))
        .with_context(|| format!("giving {} the owner of {}", path.display(), like.display()))
}

/// What is at a recorded path now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing, or not a regular file (a symlink, a FIFO, a device).
    Gone,
    /// A regular file whose size is none of those asked: not hashed.
    OtherSize(u64),
    /// A regular file of one of the sizes asked, and its sha256.
    File { sha256: String, size: u64 },
}

/// The regular file at `path` (a symlink there is not followed), hashed
/// only when its size is one of `sizes`: a recorded file is never read
/// past what the record says it holds.
pub(crate) fn digest(path: &Path, sizes: &[u64]) -> Result<Found> {
    let limit = sizes.iter().copied().max().unwrap_or(0).min(MAX_FILE);
    let (file, meta) = match open_regular(path, u64::MAX, false) {
        Ok(opened) => opened,
        Err(Unopened::Missing | Unopened::Not(_)) => return Ok(Found::Gone),
        Err(e) => anyhow::bail!("{}: {e}", path.display()),
    };
    if !sizes.contains(&meta.len()) || meta.len() > limit {
        return Ok(Found::OtherSize(meta.len()));
    }
    let mut reader = std::io::Read::take(file, limit + 1);
    let (sha256, size) = crate::shared::hash::copy_hashed(&mut reader, &mut std::io::sink())
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(Found::File { sha256, size })
}

/// Removes what killed runs left on its way (`.<name>.patchkit-*` files)
/// in the library and its own folders (symlinked ones not followed).
pub(crate) fn clean_staging(kernels: &Path) -> Result<()> {
    let mut stack = vec![(kernels.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && depth < 4 {
                stack.push((path, depth + 1));
            } else if !is_dir
                && name.starts_with('.')
                && [NEW, UNDO, TMP]
                    .iter()
                    .any(|s| name.ends_with(&format!(".{s}")))
            {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// Whether this process may create files in `dir`; the error when not.
fn access_w(dir: &Path) -> std::io::Result<()> {
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Refuses a folder nothing can be written in, saying why: a read-only
/// filesystem (which root does not change), or a user's lack of rights
/// (a system library, which needs root).
pub(crate) fn ensure_writable(kernels: &Path) -> Result<()> {
    let dir = kernels.join(super::trust::DIR);
    let denied = access_w(kernels)
        .err()
        .or_else(|| dir.is_dir().then(|| access_w(&dir).err()).flatten());
    let Some(e) = denied else {
        return Ok(());
    };
    if e.raw_os_error() == Some(libc::EROFS) {
        anyhow::bail!(
            "{} is on a read-only filesystem: no kernel file there can be replaced, by any user; \
             remount it read-write (or rewrite a copy of the library and use that)",
            kernels.display()
        );
    }
    anyhow::bail!(
        "{} is not writable by this user: it is a system library, so the rewrite needs root (sudo); \
         the package manager puts the original kernel files back at its next upgrade or reinstall of \
         that package (doctor then says affected again, and this command can be run again)",
        kernels.display()
    )
}
