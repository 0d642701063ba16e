//! The one way kernel files are listed and opened, by doctor (through
//! [`super::judge_library`]) and by the in-place rewrite alike: a regular
//! file only (a FIFO, a device or a socket is never opened for reading,
//! and is looked at without blocking), never more than [`MAX_FILE`] bytes;
//! a library listed without following a symlinked folder, so nothing below
//! one is read, judged or renamed into.

use std::fmt;
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest kernel file read (Debian's largest gfx12 one is 3 MB
/// compressed; hipBLASLt's largest of any target is a few tens of MB).
pub const MAX_FILE: u64 = 512 << 20;

/// Folders deeper are not listed.
const MAX_DEPTH: usize = 3;
/// The most folder entries one listing of a kernel library looks at.
pub(crate) const MAX_ENTRIES: usize = 200_000;

/// Why a file was not opened.
#[derive(Debug)]
pub(crate) enum Unopened {
    /// Nothing is there.
    Missing,
    /// Something other than a regular file: `a FIFO`, `a symlink`...
    Not(&'static str),
    /// A regular file larger than the bound, with its size.
    TooLarge(u64, u64),
    /// The system refused (permission, I/O).
    Io(std::io::Error),
}

impl fmt::Display for Unopened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unopened::Missing => f.write_str("does not exist"),
            Unopened::Not(kind) => {
                write!(f, "is {kind}, not a regular file: not read")
            }
            Unopened::TooLarge(len, limit) => write!(
                f,
                "is {}, more than the {} such a file may hold: not read",
                crate::shared::report::human_size(*len),
                crate::shared::report::human_size(*limit)
            ),
            Unopened::Io(e) => write!(f, "cannot read: {e}"),
        }
    }
}

/// What a file type is, in words: `a FIFO`.
pub(crate) fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a file"
    }
}

/// Opens the regular file at `path` of at most `limit` bytes for reading,
/// with its metadata; `follow` says whether a symlink at `path` itself is
/// followed (one in the folders above it always is). Anything else is
/// refused before it is opened, and the file opened must be the one looked
/// at (nothing swapped between).
pub(crate) fn open_regular(
    path: &Path,
    limit: u64,
    follow: bool,
) -> Result<(File, Metadata), Unopened> {
    let looked = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    let meta = match looked {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unopened::Missing),
        Err(e) => return Err(Unopened::Io(e)),
    };
    if !meta.is_file() {
        return Err(Unopened::Not(kind_of(meta.file_type())));
    }
    if meta.len() > limit {
        return Err(Unopened::TooLarge(meta.len(), limit));
    }
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Unopened::Not("a symlink"),
            _ => Unopened::Io(e),
        })?;
    let opened = file.metadata().map_err(Unopened::Io)?;
    if !opened.is_file() || opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(Unopened::Not("a file that changed while it was opened"));
    }
    Ok((file, opened))
}

/// Reads the kernel file at `path` into `buf` (reused): a regular file
/// only (a symlink to one is followed), never more than [`MAX_FILE`] bytes.
pub fn read_kernel_file(path: &Path, buf: &mut Vec<u8>) -> Result<(), String> {
    buf.clear();
    let (file, _) = open_regular(path, MAX_FILE, true).map_err(|e| e.to_string())?;
    file.take(MAX_FILE + 1)
        .read_to_end(buf)
        .map_err(|e| format!("cannot read: {e}"))?;
    if buf.len() as u64 > MAX_FILE {
        return Err(Unopened::TooLarge(buf.len() as u64, MAX_FILE).to_string());
    }
    Ok(())
}

/// Whether a file name says it holds only targets other than gfx12
/// (`..._gfx1100.co`); a name without a target says nothing.
pub(crate) fn named_for_other_targets(name: &str) -> bool {
    let targets: Vec<&str> = name
        .match_indices("gfx")
        .map(|(i, _)| {
            let rest = &name[i..];
            let end = rest[3..]
                .find(|c: char| !c.is_ascii_alphanumeric())
                .map_or(rest.len(), |e| e + 3);
            &rest[..end]
        })
        .filter(|t| t.len() > 3)
        .collect();
    !targets.is_empty() && targets.iter().all(|t| !t.starts_with("gfx120"))
}

/// Whether `name` is a kernel file's (`*.co`, `*.hsaco`).
pub(crate) fn is_kernel_name(name: &str) -> bool {
    name.ends_with(".co") || name.ends_with(".hsaco")
}

/// The kernel files of a kernel library folder (and its subfolders, three
/// deep; our `.patchkit/` left out), gfx12 candidates only, sorted. A
/// symlinked subfolder is refused, naming it: what is below it is not the
/// library's own. A symlink to a file is listed (reading it says what it is).
pub fn kernel_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((dir, depth)) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(std::io::Error::other(format!(
                    "more than {MAX_ENTRIES} entries below it"
                )));
            }
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type()?;
            if kind.is_symlink() && path.is_dir() {
                return Err(std::io::Error::other(format!(
                    "{} is a symlink to a folder: a kernel library is read only through its own \
                     folders (put the folder there instead of the link)",
                    path.display()
                )));
            }
            if kind.is_dir() {
                if depth < MAX_DEPTH && name != ".patchkit" {
                    stack.push((path, depth + 1));
                }
            } else if is_kernel_name(&name) && !named_for_other_targets(&name) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_of_other_targets_are_skipped_unread() {
        assert!(named_for_other_targets(
            "TensileLibrary_HH_Contraction_l_Alik_Bljk_gfx1100.co"
        ));
        assert!(named_for_other_targets("Kernels.so-000-gfx90a.hsaco"));
        assert!(!named_for_other_targets("extop_gfx1201.co"));
        assert!(!named_for_other_targets("Kernels.so-000-gfx1200.hsaco"));
        assert!(!named_for_other_targets("hipblasltTransform.hsaco"));
    }

    #[test]
    fn a_fifo_a_device_a_huge_file_and_a_folder_link_are_named_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo_gfx1201.co");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let zero = dir.path().join("zero_gfx1201.co");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let mut buf = Vec::new();
        for path in [&fifo, &zero] {
            let err = read_kernel_file(path, &mut buf).unwrap_err();
            assert!(err.contains("not a regular file"), "{err}");
        }
        let huge = dir.path().join("huge_gfx1201.co");
        File::create(&huge).unwrap().set_len(MAX_FILE + 1).unwrap();
        let err = read_kernel_file(&huge, &mut buf).unwrap_err();
        assert!(err.contains("more than the 512.0 MiB"), "{err}");
        assert!(matches!(
            open_regular(&zero, 10, false),
            Err(Unopened::Not("a symlink"))
        ));
        assert_eq!(kernel_files(dir.path()).unwrap().len(), 3);
        std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
        let err = kernel_files(dir.path()).unwrap_err().to_string();
        assert!(err.contains("loop is a symlink to a folder"), "{err}");
    }
}
