//! `/proc/PID/maps` read as the kernel writes it (`show_map_vma` in
//! fs/proc/task_mmu.c): five fields, spaces up to a column, then the path
//! of a mapped file as `seq_path` prints it, where only the newline is
//! escaped (`\012`; a backslash is not, so `\012` may also be four bytes of
//! a name) and `d_path` appends ` (deleted)` to a file unlinked since it
//! was mapped (which a name may also end with). Where the text is
//! ambiguous, the inode of the line decides, and `/proc/PID/map_files/`
//! where it is readable. Lines are bytes: a name need not be UTF-8.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::fsread::{Kind, Root};

/// The mark `d_path` appends to the path of an unlinked file.
const DELETED: &[u8] = b" (deleted)";
/// The one escape `show_map_vma` writes: the newline.
const NEWLINE: &[u8] = b"\\012";

/// A line of maps that names a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    /// `7f00-7f10`: also the name of its `map_files` entry.
    pub(crate) range: &'a str,
    /// The mapped file's inode.
    pub(crate) inode: u64,
    /// The path as written, escapes and mark included.
    pub(crate) written: &'a [u8],
}

/// The lines of a maps text that name a file (a path from `/`).
pub(crate) fn lines(maps: &[u8]) -> impl Iterator<Item = Line<'_>> {
    maps.split(|b| *b == b'\n').filter_map(|line| {
        // address perms offset dev inode, then spaces, then the path
        let mut fields = line.splitn(6, |b| *b == b' ');
        let range = std::str::from_utf8(fields.next()?).ok()?;
        let inode = std::str::from_utf8(fields.nth(3)?).ok()?.parse().ok()?;
        let rest = fields.next()?;
        let written = &rest[rest.iter().position(|b| *b != b' ')?..];
        written.starts_with(b"/").then_some(Line {
            range,
            inode,
            written,
        })
    })
}

/// `\012` read back as the newline it stands for.
pub(crate) fn unescape(written: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(written.len());
    let mut rest = written;
    while !rest.is_empty() {
        if rest.starts_with(NEWLINE) {
            out.push(b'\n');
            rest = &rest[NEWLINE.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

/// What a path of maps may name, the kernel's meaning first: each path
/// with whether it was read as carrying the deleted mark. `raw` says the
/// path holds no escapes (a `map_files` link's target).
pub(crate) fn readings(written: &[u8], raw: bool) -> Vec<(PathBuf, bool)> {
    let mut texts = vec![if raw {
        written.to_vec()
    } else {
        unescape(written)
    }];
    if texts[0] != written {
        texts.push(written.to_vec());
    }
    let mut out = Vec::new();
    for text in texts {
        if let Some(stripped) = text.strip_suffix(DELETED) {
            out.push((path_of(stripped), true));
        }
        out.push((path_of(&text), false));
    }
    out
}

fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// A file a process mapped, as it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapped {
    /// Its path in the process's view (escapes undone, mark removed).
    pub(crate) path: PathBuf,
    /// Unlinked since it was mapped: what is at `path` now, if anything, is
    /// not what the process uses.
    pub(crate) deleted: bool,
}

/// What the mapped file of `line` is without looking at any file: the
/// kernel's meaning of the text.
pub(crate) fn as_written(line: &Line) -> Mapped {
    let (path, deleted) = readings(line.written, false).swap_remove(0);
    Mapped { path, deleted }
}

/// What the mapped file of `line` is, its path taken below `fs` (the
/// process's root) once `prefix` (that root as the machine names it, `/`
/// for most) is taken off. `link` is the target of its `map_files` entry
/// and `nlink` the link count of the file it leads to, where readable.
pub(crate) fn resolve(
    fs: &Root,
    prefix: &Path,
    line: &Line,
    link: Option<&[u8]>,
    nlink: Option<u64>,
) -> Mapped {
    let readings: Vec<(PathBuf, bool)> = match link {
        Some(target) => readings(target, true),
        None => readings(line.written, false),
    }
    .into_iter()
    .map(|(path, marked)| match path.strip_prefix(prefix) {
        Ok(rest) => (Path::new("/").join(rest), marked),
        Err(_) => (path, marked),
    })
    .collect();
    // a reading that names the very inode mapped is the file
    let same = readings.iter().find(|(path, _)| {
        fs.meta(path)
            .is_ok_and(|m| m.kind == Kind::File && m.ino == line.inode)
    });
    let (path, marked) = match same {
        Some((path, _)) => (path.clone(), false),
        None => readings[0].clone(),
    };
    Mapped {
        path,
        deleted: marked || nlink == Some(0),
    }
}

impl serde::Serialize for Mapped {
    /// Its path, as text (a byte that is not UTF-8 replaced).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.path.to_string_lossy())
    }
}

impl std::fmt::Display for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.path.to_string_lossy())
    }
}

/// The file name of a path, as bytes.
pub(crate) fn file_name(path: &Path) -> &[u8] {
    path.file_name().map_or(&[][..], OsStrExt::as_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_padding_are_read_as_the_kernel_writes_them() {
        let maps = b"7f00-7f10 r--p 00000000 08:01 123                        /usr/lib/libhipblaslt.so.1\n\
7f50-7f60 rw-p 00000000 00:00 0 \n\
7ffd-7ffe rw-p 00000000 00:00 0                          [stack]\n\
7f10-7f20 r--p 00000000 08:01 124                        /opt/my env /lib\\012x/libx.so (deleted)\n";
        let found: Vec<_> = lines(maps).collect();
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].range, "7f00-7f10");
        assert_eq!(found[0].inode, 123);
        assert_eq!(found[0].written, b"/usr/lib/libhipblaslt.so.1");
        assert_eq!(
            found[1].written,
            b"/opt/my env /lib\\012x/libx.so (deleted)"
        );
    }

    #[test]
    fn only_the_newline_escape_is_undone() {
        assert_eq!(unescape(b"/a\\012b\\134c\\"), b"/a\nb\\134c\\");
        let r = readings(b"/a\\012b (deleted)", false);
        let want: Vec<(PathBuf, bool)> = vec![
            (path_of(b"/a\nb"), true),
            (path_of(b"/a\nb (deleted)"), false),
            (path_of(b"/a\\012b"), true),
            (path_of(b"/a\\012b (deleted)"), false),
        ];
        assert_eq!(r, want);
        assert_eq!(
            readings(b"/a\\012b", true),
            vec![(path_of(b"/a\\012b"), false)]
        );
    }

    #[test]
    fn the_inode_decides_between_readings() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let fs = Root::new(dir.path());
        std::fs::write(dir.path().join("a\nb"), "newline").unwrap();
        std::fs::write(dir.path().join("a\\012b"), "literal").unwrap();
        std::fs::write(dir.path().join("x (deleted)"), "named so").unwrap();
        let ino = |n: &str| std::fs::metadata(dir.path().join(n)).unwrap().ino();
        let at = |written: &'static [u8], inode| Line {
            range: "1-2",
            inode,
            written,
        };
        let m = resolve(
            &fs,
            Path::new("/"),
            &at(b"/a\\012b", ino("a\\012b")),
            None,
            None,
        );
        assert_eq!(m.path, path_of(b"/a\\012b"));
        let m = resolve(
            &fs,
            Path::new("/"),
            &at(b"/a\\012b", ino("a\nb")),
            None,
            None,
        );
        assert_eq!(m.path, path_of(b"/a\nb"));
        assert!(!m.deleted);
        // a name that ends with the mark is not deleted
        let m = resolve(
            &fs,
            Path::new("/"),
            &at(b"/x (deleted)", ino("x (deleted)")),
            None,
            None,
        );
        assert_eq!((m.path, m.deleted), (path_of(b"/x (deleted)"), false));
        // the mark with nothing of that inode: deleted, the kernel's reading
        let m = resolve(
            &fs,
            Path::new("/"),
            &at(b"/a\\012b (deleted)", 1),
            None,
            None,
        );
        assert_eq!((m.path, m.deleted), (path_of(b"/a\nb"), true));
        // no mark, another inode at the path: the path, not called deleted
        let m = resolve(&fs, Path::new("/"), &at(b"/a\\012b", 1), None, None);
        assert_eq!((m.path, m.deleted), (path_of(b"/a\nb"), false));
        // map_files says unlinked
        let m = resolve(&fs, Path::new("/"), &at(b"/a\\012b", 1), None, Some(0));
        assert!(m.deleted);
        // a chroot's paths, as the machine names them, taken below its root
        let m = resolve(
            &fs,
            Path::new("/srv/jail"),
            &at(b"/srv/jail/a\\012b", ino("a\nb")),
            None,
            None,
        );
        assert_eq!((m.path, m.deleted), (path_of(b"/a\nb"), false));
    }
}
