//! The one way doctor reads the machine below its root: every path resolved
//! as a chroot would (an absolute symlink starts again at the root, `..`
//! stops there), every file read only when it is a regular file within the
//! size doctor expects of it (never a FIFO or a device, never opened before
//! its type is known), every folder listed with a bound on its entries and
//! walked with loop detection. What cannot be read is an [`Unread`] with the
//! reason; nothing here blocks, panics, or reads outside the root.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

/// Something doctor could not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Unread {
    pub(crate) path: String,
    pub(crate) why: String,
}

/// A one-line file of the kernel (`/proc/sys/kernel/osrelease`, a sysfs
/// attribute, `/opt/rocm/.info/version`).
pub(crate) const LINE: u64 = 4 << 10;
/// `/proc/cmdline` (COMMAND_LINE_SIZE is at most 4 KiB; room to spare).
pub(crate) const CMDLINE: u64 = 64 << 10;
/// A small text or binary file (a KFD node's properties, an efivar, a
/// key, a header, `torch/version.py`).
pub(crate) const SMALL: u64 = 1 << 20;
/// `modules.dep`, `/var/lib/dpkg/status` and other lists of a whole system.
pub(crate) const LIST: u64 = 64 << 20;
/// A kernel module file as it is on disk (amdgpu.ko is ~40 MB stripped,
/// 655 MB with debug info: 6.18.3 with Debian's config); it is read as a
/// stream, so the bound is one of time, not memory.
pub(crate) const MODULE: u64 = 1 << 30;
/// A GPU kernel file of a hipBLASLt kernel library.
pub(crate) const KERNEL_FILE: u64 = crate::gpu::codeobj::MAX_FILE;
/// Entries of one folder listed at most.
pub(crate) const DIR_ENTRIES: usize = 100_000;
/// Entries one walk looks at in all.
pub(crate) const WALK_ENTRIES: usize = 500_000;
/// Symlinks followed while resolving one path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// What a path is, symlinks followed inside the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    Symlink,
}

impl Kind {
    fn of(t: std::fs::FileType) -> Kind {
        if t.is_symlink() {
            Kind::Symlink
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_char_device() {
            Kind::CharDevice
        } else if t.is_block_device() {
            Kind::BlockDevice
        } else if t.is_socket() {
            Kind::Socket
        } else {
            Kind::File
        }
    }

    /// `a FIFO`, for "is a FIFO, not a file".
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::File => "a file",
            Kind::Dir => "a folder",
            Kind::Fifo => "a FIFO",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Socket => "a socket",
            Kind::Symlink => "a symlink",
        }
    }
}

/// A path's kind, size and identity, symlinks followed inside the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The machine path it resolved to (absolute, no symlink in it).
    pub(crate) real: PathBuf,
    pub(crate) kind: Kind,
    pub(crate) len: u64,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

/// A path's kind, owner and permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) kind: Kind,
    /// The permission bits (`0o660`), setuid/setgid/sticky included.
    pub(crate) mode: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) name: OsString,
    /// The machine path of the entry (its folder resolved, the entry not).
    pub(crate) path: PathBuf,
    /// The entry itself, a symlink not followed.
    pub(crate) kind: Kind,
}

/// What a walk found.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Entries whose name was wanted, in walk order (a folder's own entries,
    /// sorted, before those of its subfolders), of any kind: reading one
    /// says what it is.
    pub(crate) found: Vec<Entry>,
    /// Folders it could not list, loops and the bound, with the reason.
    pub(crate) unread: Vec<Unread>,
}

/// The machine below a folder of this host (`/` for this machine).
#[derive(Debug, Clone)]
pub(crate) struct Root {
    host: PathBuf,
}

/// `/a/b` for a machine path given with or without its leading `/`.
pub(crate) fn shown(path: &Path) -> String {
    let mut out = PathBuf::from("/");
    out.push(path.strip_prefix("/").unwrap_or(path));
    out.display().to_string()
}

fn unread(path: &Path, why: impl Into<String>) -> Unread {
    Unread {
        path: shown(path),
        why: why.into(),
    }
}

fn io_why(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => match err.raw_os_error() {
            Some(libc::ENOTDIR) => "does not exist (a part of its path is not a folder)".to_owned(),
            Some(libc::ELOOP) => "symlink loop".to_owned(),
            _ => err.to_string(),
        },
    }
}

impl Root {
    pub(crate) fn new(host: &Path) -> Root {
        Root {
            host: host.to_path_buf(),
        }
    }

    /// Where a machine path with no symlink in it lies on this host.
    pub(crate) fn on_host(&self, machine: &Path) -> PathBuf {
        let mut out = self.host.clone();
        for c in machine.components() {
            if let Component::Normal(n) = c {
                out.push(n);
            }
        }
        out
    }

    /// The machine path `path` (absolute or from `/`) names, every symlink
    /// followed as a chroot into the root would: an absolute target starts
    /// again at the root and `..` never climbs above it. A part that does
    /// not exist is kept as written (reading it says so).
    pub(crate) fn resolve(&self, path: &Path) -> Result<PathBuf, Unread> {
        self.resolve_with(path, true)
    }

    /// Like [`Root::resolve`], the last part not followed when a symlink.
    fn resolve_with(&self, path: &Path, follow_last: bool) -> Result<PathBuf, Unread> {
        let mut real: Vec<OsString> = Vec::new();
        let mut pending: Vec<OsString> = Vec::new();
        push_parts(&mut pending, path);
        let mut links = 0;
        while let Some(part) = pending.pop() {
            if part == ".." {
                real.pop();
                continue;
            }
            real.push(part);
            if pending.is_empty() && !follow_last {
                break;
            }
            let host = self.on_host(&machine(&real));
            let Ok(meta) = std::fs::symlink_metadata(&host) else {
                continue; // missing: kept as written
            };
            if !meta.file_type().is_symlink() {
                continue;
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(unread(
                    path,
                    format!(
                        "symlink loop: more than {MAX_LINKS} symlinks followed (at {})",
                        machine(&real).display()
                    ),
                ));
            }
            let target = std::fs::read_link(&host).map_err(|e| unread(path, io_why(&e)))?;
            real.pop();
            if target.is_absolute() {
                real.clear();
            }
            push_parts(&mut pending, &target);
        }
        Ok(machine(&real))
    }

    /// The target of the symlink `path` (its folders resolved inside the
    /// root), or `None` when it is no symlink.
    pub(crate) fn read_link(&self, path: &Path) -> Option<PathBuf> {
        let real = self.resolve_with(path, false).ok()?;
        std::fs::read_link(self.on_host(&real)).ok()
    }

    /// What `path` is, symlinks followed inside the root.
    pub(crate) fn meta(&self, path: &Path) -> Result<Meta, Unread> {
        let real = self.resolve(path)?;
        let meta =
            std::fs::symlink_metadata(self.on_host(&real)).map_err(|e| unread(path, io_why(&e)))?;
        Ok(Meta {
            kind: Kind::of(meta.file_type()),
            len: meta.len(),
            dev: meta.dev(),
            ino: meta.ino(),
            real,
        })
    }

    /// Who owns `path` and its permission bits (symlinks followed inside
    /// the root): stat only, never opened, whatever it is.
    pub(crate) fn owner(&self, path: &Path) -> Result<Owner, Unread> {
        let real = self.resolve(path)?;
        let meta =
            std::fs::symlink_metadata(self.on_host(&real)).map_err(|e| unread(path, io_why(&e)))?;
        Ok(Owner {
            kind: Kind::of(meta.file_type()),
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        })
    }

    pub(crate) fn is_dir(&self, path: &Path) -> bool {
        self.meta(path).is_ok_and(|m| m.kind == Kind::Dir)
    }

    /// A regular file of at most `limit` bytes, open for reading, and its
    /// size on disk. Anything else (a FIFO, a device, a folder, a larger
    /// file) is refused before it is opened.
    pub(crate) fn open(&self, path: &Path, limit: u64) -> Result<(std::fs::File, u64), Unread> {
        let meta = self.meta(path)?;
        if meta.kind != Kind::File {
            return Err(unread(
                path,
                format!("is {}, not a file: not read", meta.kind.describe()),
            ));
        }
        if meta.len > limit {
            return Err(too_large(path, limit, Some(meta.len)));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(self.on_host(&meta.real))
            .map_err(|e| unread(path, io_why(&e)))?;
        // the file opened must be the one looked at (nothing swapped between)
        let opened = file.metadata().map_err(|e| unread(path, io_why(&e)))?;
        if !opened.file_type().is_file() || opened.dev() != meta.dev || opened.ino() != meta.ino {
            return Err(unread(path, "changed while doctor read it: not read"));
        }
        Ok((file, meta.len))
    }

    /// The bytes of a regular file of at most `limit` bytes. A file whose
    /// size the kernel does not state (procfs, sysfs) is read to `limit` and
    /// refused beyond it.
    pub(crate) fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, Unread> {
        let (file, len) = self.open(path, limit)?;
        let mut out = Vec::with_capacity(len.min(limit) as usize);
        file.take(limit.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| unread(path, format!("cannot read: {}", io_why(&e))))?;
        if out.len() as u64 > limit {
            return Err(too_large(path, limit, None));
        }
        Ok(out)
    }

    /// [`Root::read`] as UTF-8 text.
    pub(crate) fn read_text(&self, path: &Path, limit: u64) -> Result<String, Unread> {
        String::from_utf8(self.read(path, limit)?)
            .map_err(|_| unread(path, "is not UTF-8 text: not read"))
    }

    /// The entries of a folder, sorted by name; more than [`DIR_ENTRIES`]
    /// is refused.
    pub(crate) fn list(&self, dir: &Path) -> Result<Vec<Entry>, Unread> {
        let meta = self.meta(dir)?;
        if meta.kind != Kind::Dir {
            return Err(unread(
                dir,
                format!("is {}, not a folder", meta.kind.describe()),
            ));
        }
        let read =
            std::fs::read_dir(self.on_host(&meta.real)).map_err(|e| unread(dir, io_why(&e)))?;
        let mut out = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| unread(dir, format!("cannot list: {}", io_why(&e))))?;
            if out.len() == DIR_ENTRIES {
                return Err(unread(
                    dir,
                    format!("holds more than {DIR_ENTRIES} entries: not listed"),
                ));
            }
            let kind = entry
                .file_type()
                .map_err(|e| unread(dir, format!("cannot list: {}", io_why(&e))))?;
            out.push(Entry {
                path: meta.real.join(entry.file_name()),
                name: entry.file_name(),
                kind: Kind::of(kind),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The entries below `dir` whose names `want` (any kind), at most
    /// `depth` folders down, symlinked folders followed inside the root; a
    /// folder seen before (a symlink loop, or two ways to one folder) is not
    /// walked again, and no more than [`WALK_ENTRIES`] entries are looked at.
    pub(crate) fn walk(&self, dir: &Path, depth: usize, want: impl Fn(&str) -> bool) -> Walk {
        let mut walk = Walk::default();
        let mut seen = BTreeSet::new();
        let mut looked = 0usize;
        self.walk_in(dir, depth, &want, &mut seen, &mut looked, &mut walk);
        walk
    }

    /// Why a reader that knows nothing of the root (it follows the host's
    /// symlinks, as [`crate::gpu::codeobj`] reads a kernel library) would not read
    /// below `dir` what the machine holds there: a symlink that leads
    /// elsewhere on the host than inside the root, a loop, a folder not
    /// listed, or an entry whose name `want`s it read that is not a regular
    /// file of at most `limit` bytes. Empty when the two readings agree.
    pub(crate) fn host_reading_differs(
        &self,
        dir: &Path,
        depth: usize,
        want: impl Fn(&str) -> bool,
        limit: u64,
    ) -> Vec<Unread> {
        let walk = self.walk(dir, depth, |_| true);
        let mut problems = walk.unread;
        for entry in walk.found {
            if entry.kind == Kind::Symlink {
                // the same file both ways, by identity: a path compared as
                // text would break below a root that is the kernel's link
                // (`/proc/PID/root`), where the host follows an absolute
                // target from its own root
                let host = std::fs::metadata(self.on_host(&entry.path))
                    .ok()
                    .map(|m| (m.dev(), m.ino()));
                let machine = self.meta(&entry.path).ok().map(|m| (m.dev, m.ino));
                // dangling both ways: nothing is read through it (a wanted
                // name is named below, with the reason)
                if host != machine {
                    problems.push(unread(
                        &entry.path,
                        "is a symlink that leads out of the machine's tree: not read",
                    ));
                    continue;
                }
            }
            if entry.name.to_str().is_some_and(&want) {
                match self.meta(&entry.path) {
                    Ok(m) if m.kind != Kind::File => problems.push(unread(
                        &entry.path,
                        format!("is {}, not a file: not read", m.kind.describe()),
                    )),
                    Ok(m) if m.len > limit => {
                        problems.push(too_large(&entry.path, limit, Some(m.len)))
                    }
                    Ok(_) => {}
                    Err(u) => problems.push(u),
                }
            }
        }
        problems
    }

    fn walk_in(
        &self,
        dir: &Path,
        depth: usize,
        want: &dyn Fn(&str) -> bool,
        seen: &mut BTreeSet<(u64, u64)>,
        looked: &mut usize,
        walk: &mut Walk,
    ) {
        let meta = match self.meta(dir) {
            Ok(meta) => meta,
            Err(why) => return walk.unread.push(why),
        };
        if !seen.insert((meta.dev, meta.ino)) {
            return walk.unread.push(unread(
                dir,
                format!(
                    "is {}, a folder already searched (a symlink loop?): not searched again",
                    meta.real.display()
                ),
            ));
        }
        let entries = match self.list(dir) {
            Ok(entries) => entries,
            Err(why) => return walk.unread.push(why),
        };
        if *looked + entries.len() > WALK_ENTRIES {
            return walk.unread.push(unread(
                dir,
                format!("more than {WALK_ENTRIES} entries searched in all: the rest not searched"),
            ));
        }
        *looked += entries.len();
        let mut subdirs = Vec::new();
        for entry in entries {
            if entry.name.to_str().is_some_and(want) {
                walk.found.push(entry.clone());
            }
            let is_dir = match entry.kind {
                Kind::Dir => true,
                Kind::Symlink => match self.meta(&entry.path) {
                    Ok(meta) => meta.kind == Kind::Dir,
                    Err(u) if u.why == "does not exist" => false,
                    Err(u) => {
                        walk.unread.push(u); // a loop: named, not followed
                        false
                    }
                },
                _ => false,
            };
            if is_dir && depth > 0 {
                subdirs.push(entry.path);
            }
        }
        for sub in subdirs {
            self.walk_in(&sub, depth - 1, want, seen, looked, walk);
        }
    }
}

/// The machine path of resolved parts.
fn machine(parts: &[OsString]) -> PathBuf {
    let mut out = PathBuf::from("/");
    out.extend(parts);
    out
}

/// Pushes the parts of `path` onto `pending` so that the first part pops first.
fn push_parts(pending: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

fn too_large(path: &Path, limit: u64, len: Option<u64>) -> Unread {
    let size = match len {
        Some(n) => format!(" ({})", crate::shared::report::human_size(n)),
        None => String::new(),
    };
    unread(
        path,
        format!(
            "is larger than doctor expects here{size}, over {}: not read",
            crate::shared::report::human_size(limit)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), "text").unwrap();
        (dir, root)
    }

    #[test]
    fn symlinks_resolve_inside_the_root_as_a_chroot_would() {
        let (dir, root) = tree();
        let d = dir.path();
        symlink("/a/b/f", d.join("abs")).unwrap();
        symlink("../../../../../../a/b", d.join("a/up")).unwrap();
        symlink("/etc/hostname", d.join("host")).unwrap();
        assert_eq!(
            root.resolve(Path::new("/abs")).unwrap(),
            Path::new("/a/b/f")
        );
        assert_eq!(root.read_text(Path::new("abs"), 10).unwrap(), "text");
        assert_eq!(root.read_text(Path::new("/a/up/f"), 10).unwrap(), "text");
        assert_eq!(
            root.resolve(Path::new("/../../a/b/../b/f")).unwrap(),
            Path::new("/a/b/f")
        );
        let err = root.read(Path::new("/host"), 100).unwrap_err();
        assert_eq!(err.why, "does not exist");
        symlink("loop2", d.join("loop1")).unwrap();
        symlink("loop1", d.join("loop2")).unwrap();
        let err = root.read(Path::new("/loop1"), 100).unwrap_err();
        assert!(err.why.contains("symlink loop"), "{err:?}");
    }

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let (dir, root) = tree();
        let d = dir.path();
        let err = root.read(Path::new("/a/b/f"), 3).unwrap_err();
        assert!(err.why.contains("larger than"), "{err:?}");
        let err = root.read(Path::new("/a"), 3).unwrap_err();
        assert!(err.why.contains("is a folder, not a file"), "{err:?}");
        let fifo =
            std::ffi::CString::new(d.join("fifo").into_os_string().into_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let err = root.read(Path::new("/fifo"), 3).unwrap_err();
        assert!(err.why.contains("FIFO"), "{err:?}");
        let dev = Root::new(Path::new("/"));
        let err = dev.read(Path::new("/dev/zero"), 3).unwrap_err();
        assert!(err.why.contains("character device"), "{err:?}");
        // a file whose size is not stated is cut at the limit
        let err = dev.read(Path::new("/proc/self/environ"), 0).unwrap_err();
        assert!(err.why.contains("larger than"), "{err:?}");
    }

    #[test]
    fn a_host_reader_is_trusted_only_where_it_reads_the_machine() {
        let (dir, root) = tree();
        let d = dir.path();
        let co = |n: &str| n.ends_with(".co");
        symlink("f", d.join("a/b/inside.co")).unwrap();
        symlink("gone", d.join("a/b/dangling.dat")).unwrap();
        assert_eq!(root.host_reading_differs(Path::new("/a"), 3, co, 100), []);
        symlink("/dev/zero", d.join("a/b/zero.co")).unwrap();
        let problems = root.host_reading_differs(Path::new("/a"), 3, co, 100);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "/a/b/zero.co");
        assert!(problems[0].why.contains("leads out"), "{problems:?}");
        std::fs::remove_file(d.join("a/b/zero.co")).unwrap();
        std::fs::write(d.join("a/big.co"), vec![0u8; 101]).unwrap();
        let problems = root.host_reading_differs(Path::new("/a"), 3, co, 100);
        assert!(problems[0].why.contains("larger than"), "{problems:?}");
    }

    #[test]
    fn walks_stop_at_loops() {
        let (dir, root) = tree();
        let d = dir.path();
        symlink("/a", d.join("a/b/again")).unwrap();
        symlink("..", d.join("a/b/up")).unwrap();
        let walk = root.walk(Path::new("/a"), 40, |n| n == "f");
        let found: Vec<_> = walk.found.iter().map(|e| e.path.clone()).collect();
        assert_eq!(found, [PathBuf::from("/a/b/f")]);
        assert_eq!(walk.unread.len(), 2, "{:?}", walk.unread);
        assert!(walk
            .unread
            .iter()
            .all(|u| u.why.contains("already searched")));
    }
}
