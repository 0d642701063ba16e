//! `doctor --pid PID`: what a running program actually uses, read from
//! `/proc/PID` below the root: the ROCm libraries it mapped (`maps`, read
//! as the kernel writes it by [`super::maps`]), its environment (`environ`)
//! and the GPU device nodes it holds open (`fd`). Its files are read as it
//! sees them: through its own root (`/proc/PID/root`) when it lives in
//! another mount namespace or a chroot. What it may not read is said, with
//! the reason.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fsread::{self, Kind, Root};
use super::maps::{self, Mapped};

/// The library families doctor looks for in a process's maps.
pub(crate) const LIBRARIES: [&str; 5] = [
    "libhipblaslt",
    "libamdhip64",
    "libamd_comgr",
    "librocblas",
    "libhipsparselt",
];

/// A running program as doctor saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Process {
    pub(crate) pid: u32,
    /// The program (`/proc/PID/exe`), when readable.
    pub(crate) exe: Option<String>,
    /// Library family (`libhipblaslt`) -> the files of it the process
    /// mapped, as it names them.
    pub(crate) libraries: BTreeMap<String, Vec<Mapped>>,
    /// The mapped files unlinked since the process mapped them (deleted, or
    /// replaced by another file of the same name): not what is on disk.
    pub(crate) deleted: Vec<String>,
    /// Where its files were read: `/` (as the machine sees them) or
    /// `/proc/PID/root` (its own root: another mount namespace, a chroot).
    pub(crate) root: String,
    /// The host folder its files are read below; `None` when its root could
    /// not be read (the reason is in `unread`).
    #[serde(skip)]
    pub(crate) files: Option<PathBuf>,
    /// GPU device nodes it holds open (`/dev/kfd`, `/dev/dri/renderD128`).
    pub(crate) gpu_nodes: Vec<String>,
    /// What could not be read, and why (`/proc/PID/environ: permission denied ...`).
    pub(crate) unread: Vec<String>,
}

/// The process is not there (exited, or a wrong id).
#[derive(Debug)]
pub(crate) struct Gone(pub u32);

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "process {} is not running (no /proc/{}): it has exited, or the id is wrong; run doctor --pid while the program runs",
            self.0, self.0
        )
    }
}

impl std::error::Error for Gone {}

/// The bytes of a file below the root: resolved inside the root, read only
/// when it is a regular file, at most [`fsread::LIST`] bytes (`maps` and
/// `environ` are far smaller). An `io::Error`, so that "permission denied"
/// and "gone" can be told apart.
fn read_bytes(root: &Path, rel: &str) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    let fs = super::fsread::Root::new(root);
    let real = fs
        .resolve(Path::new(rel))
        .map_err(|u| Error::new(ErrorKind::InvalidInput, u.why))?;
    let host = fs.on_host(&real);
    if !std::fs::symlink_metadata(&host)?.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let limit = super::fsread::LIST;
    let mut out = Vec::new();
    std::fs::File::open(&host)?
        .take(limit + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(out)
}

fn why(err: &std::io::Error, pid: u32) -> String {
    match err.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "permission denied: process {pid} belongs to another user; run doctor as that user or as root"
        ),
        _ => err.to_string(),
    }
}

/// Reads process `pid` below `root`: the process and its environment
/// (empty when unreadable; the reason is in `unread`).
pub(crate) fn read(root: &Path, pid: u32) -> Result<(Process, BTreeMap<String, String>), Gone> {
    let base = format!("proc/{pid}");
    if !root.join(&base).is_dir() {
        return Err(Gone(pid));
    }
    let mut p = Process {
        pid,
        exe: std::fs::read_link(root.join(format!("{base}/exe")))
            .ok()
            .map(|e| e.display().to_string()),
        libraries: BTreeMap::new(),
        deleted: Vec::new(),
        root: "/".to_owned(),
        files: None,
        gpu_nodes: Vec::new(),
        unread: Vec::new(),
    };
    let mut env = BTreeMap::new();
    match read_bytes(root, &format!("{base}/environ")) {
        Ok(bytes) => {
            for entry in bytes.split(|b| *b == 0) {
                let text = String::from_utf8_lossy(entry);
                if let Some((k, v)) = text.split_once('=') {
                    env.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        Err(e) => p.unread.push(format!("/{base}/environ: {}", why(&e, pid))),
    }
    let view = view(root, pid, &mut p.unread);
    if let Some(v) = &view {
        p.root = v.shown.clone();
        p.files = Some(v.host.clone());
    }
    match read_bytes(root, &format!("{base}/maps")) {
        Ok(bytes) => mapped(root, pid, &bytes, view.as_ref(), &mut p),
        Err(e) => p.unread.push(format!("/{base}/maps: {}", why(&e, pid))),
    }
    match std::fs::read_dir(root.join(format!("{base}/fd"))) {
        Ok(entries) => {
            let mut nodes: Vec<String> = entries
                .flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|t| t.display().to_string())
                .filter(|t| t == "/dev/kfd" || t.starts_with("/dev/dri/"))
                .collect();
            nodes.sort();
            nodes.dedup();
            p.gpu_nodes = nodes;
        }
        Err(e) => p.unread.push(format!("/{base}/fd: {}", why(&e, pid))),
    }
    if env.is_empty()
        && p.libraries.is_empty()
        && !p.unread.is_empty()
        && !root.join(&base).is_dir()
    {
        return Err(Gone(pid));
    }
    Ok((p, env))
}

/// Where a process's files are read.
struct View {
    /// The host folder of its root (`/`, or `/proc/PID/root`).
    host: PathBuf,
    /// That folder as the report names it.
    shown: String,
    /// Its root as the machine names it (`/`, or a chroot's folder): the
    /// prefix the paths of its maps carry.
    prefix: PathBuf,
    /// `/proc` is the kernel's: `map_files` can be asked.
    procfs: bool,
}

/// The view of process `pid`'s files. On a live `/proc` its root is the
/// kernel's link (followed by the kernel, into its own mount namespace),
/// or the machine's root when the two are the same; in a copied tree,
/// `proc/PID/root` is a folder of the tree (a link to `/` is the tree's
/// root), the tree's root when absent.
fn view(root: &Path, pid: u32, unread: &mut Vec<String>) -> Option<View> {
    let link = root.join(format!("proc/{pid}/root"));
    let shown = format!("/proc/{pid}/root");
    if is_procfs(&root.join("proc")) {
        let own = match std::fs::read_link(&link) {
            Ok(own) => own,
            Err(e) => {
                unread.push(format!("{shown}: {}", why(&e, pid)));
                return None;
            }
        };
        let same = root == Path::new("/") && own == Path::new("/") && same_mount_ns(pid);
        return Some(View {
            host: if same { root.to_path_buf() } else { link },
            shown: if same { "/".to_owned() } else { shown },
            prefix: own,
            procfs: true,
        });
    }
    let fs = Root::new(root);
    let (host, shown) = match fs.meta(Path::new(&shown)) {
        Ok(m) if m.kind == Kind::Dir => (fs.on_host(&m.real), fsread::shown(&m.real)),
        _ => (root.to_path_buf(), "/".to_owned()),
    };
    Some(View {
        host,
        shown,
        prefix: PathBuf::from("/"),
        procfs: false,
    })
}

/// Whether `dir` is a mounted procfs.
fn is_procfs(dir: &Path) -> bool {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a zeroed statfs is a valid out-parameter; `c` is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    rc == 0 && st.f_type as i64 == PROC_SUPER_MAGIC
}

/// Whether process `pid` shares doctor's mount namespace.
fn same_mount_ns(pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    ns(&pid.to_string()).is_some_and(|theirs| Some(theirs) == ns("self"))
}

/// Puts the ROCm library files of a maps text in `p`, each as the process
/// sees it.
fn mapped(root: &Path, pid: u32, maps: &[u8], view: Option<&View>, p: &mut Process) {
    let mut seen = std::collections::BTreeSet::new();
    for line in maps::lines(maps) {
        // a cheap look at the written name first: most lines are not ours
        let name = line.written.rsplit(|b| *b == b'/').next().unwrap_or(&[]);
        let ours = LIBRARIES
            .iter()
            .any(|l| memchr::memmem::find(name, l.as_bytes()).is_some());
        if !ours || !seen.insert(line.written) {
            continue;
        }
        let file = match view {
            Some(v) => {
                let entry = root.join(format!("proc/{pid}/map_files/{}", line.range));
                let link = v.procfs.then(|| std::fs::read_link(&entry).ok()).flatten();
                let nlink = v
                    .procfs
                    .then(|| std::fs::metadata(&entry).ok().map(|m| m.nlink()))
                    .flatten();
                let link = link.as_ref().map(|l| l.as_os_str().as_bytes());
                maps::resolve(&Root::new(&v.host), &v.prefix, &line, link, nlink)
            }
            None => maps::as_written(&line),
        };
        let Some(family) = family(maps::file_name(&file.path)) else {
            continue;
        };
        let files = p.libraries.entry(family.to_owned()).or_default();
        if files.iter().any(|f| f.path == file.path) {
            continue;
        }
        if file.deleted {
            p.deleted.push(file.to_string());
        }
        files.push(file);
    }
}

/// The library family a file name belongs to (`libhipblaslt.so.1` ->
/// `libhipblaslt`).
fn family(file: &[u8]) -> Option<&'static str> {
    LIBRARIES.iter().copied().find(|l| {
        file.strip_prefix(l.as_bytes())
            .is_some_and(|rest| rest.starts_with(b".so"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_the_rocm_libraries_by_family() {
        let maps = b"\
7f00-7f10 r--p 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.2
7f10-7f20 r-xp 00010000 08:01 123 /usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.2
7f20-7f30 r--p 00000000 08:01 124 /opt/my env/lib/libamdhip64.so.7.2.70204
7f30-7f40 r--p 00000000 08:01 125 /tmp/librocblas.so.5.2 (deleted)
7f40-7f50 r--p 00000000 08:01 126 /usr/lib/libhipblaslt-d.so
7f50-7f60 rw-p 00000000 00:00 0
";
        let dir = tempfile::tempdir().unwrap();
        let mut p = Process {
            pid: 1,
            exe: None,
            libraries: BTreeMap::new(),
            deleted: Vec::new(),
            root: "/".to_owned(),
            files: None,
            gpu_nodes: Vec::new(),
            unread: Vec::new(),
        };
        mapped(dir.path(), 1, maps, None, &mut p);
        let shown = |family: &str| -> Vec<String> {
            p.libraries[family].iter().map(|m| m.to_string()).collect()
        };
        assert_eq!(
            shown("libhipblaslt"),
            ["/usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.2"]
        );
        assert_eq!(
            shown("libamdhip64"),
            ["/opt/my env/lib/libamdhip64.so.7.2.70204"]
        );
        assert_eq!(shown("librocblas"), ["/tmp/librocblas.so.5.2"]);
        assert_eq!(p.deleted, ["/tmp/librocblas.so.5.2"]);
        assert_eq!(p.libraries.len(), 3);
    }
}
