//! `doctor --pid PID`: what a running program actually uses, read from
//! `/proc/PID` below the root: the ROCm libraries it mapped (`maps`), its
//! environment (`environ`) and the GPU device nodes it holds open (`fd`).
//! What it may not read is said, with the reason.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

/// The library families doctor looks for in a process's maps.
pub const LIBRARIES: [&str; 5] = [
    "libhipblaslt",
    "libamdhip64",
    "libamd_comgr",
    "librocblas",
    "libhipsparselt",
];

/// A running program as doctor saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Process {
    pub pid: u32,
    /// The program (`/proc/PID/exe`), when readable.
    pub exe: Option<String>,
    /// Library family (`libhipblaslt`) -> the files of it the process mapped.
    pub libraries: BTreeMap<String, Vec<String>>,
    /// GPU device nodes it holds open (`/dev/kfd`, `/dev/dri/renderD128`).
    pub gpu_nodes: Vec<String>,
    /// What could not be read, and why (`/proc/PID/environ: permission denied ...`).
    pub unread: Vec<String>,
}

/// The process is not there (exited, or a wrong id).
#[derive(Debug)]
pub struct Gone(pub u32);

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
pub fn read(root: &Path, pid: u32) -> Result<(Process, BTreeMap<String, String>), Gone> {
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
    match read_bytes(root, &format!("{base}/maps")) {
        Ok(bytes) => p.libraries = mapped(&String::from_utf8_lossy(&bytes)),
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

/// The ROCm library files of a maps text, by family.
pub fn mapped(maps: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in maps.lines() {
        // address perms offset dev inode path (the path may hold spaces)
        let Some(path) = line.splitn(6, char::is_whitespace).nth(5).map(str::trim) else {
            continue;
        };
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        let file = path.rsplit('/').next().unwrap_or("");
        let Some(family) = LIBRARIES
            .iter()
            .find(|l| file.starts_with(**l) && file[l.len()..].starts_with(".so"))
        else {
            continue;
        };
        let files = out.entry((*family).to_owned()).or_default();
        if !files.iter().any(|f| f == path) {
            files.push(path.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_the_rocm_libraries_by_family() {
        let maps = "\
7f00-7f10 r--p 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.2
7f10-7f20 r-xp 00010000 08:01 123 /usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.2
7f20-7f30 r--p 00000000 08:01 124 /opt/my env/lib/libamdhip64.so.7.2.70204
7f30-7f40 r--p 00000000 08:01 125 /tmp/librocblas.so.5.2 (deleted)
7f40-7f50 r--p 00000000 08:01 126 /usr/lib/libhipblaslt-d.so
7f50-7f60 rw-p 00000000 00:00 0
";
        let m = mapped(maps);
        assert_eq!(
            m["libhipblaslt"],
            vec!["/usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.2"]
        );
        assert_eq!(
            m["libamdhip64"],
            vec!["/opt/my env/lib/libamdhip64.so.7.2.70204"]
        );
        assert_eq!(m["librocblas"], vec!["/tmp/librocblas.so.5.2"]);
        assert_eq!(m.len(), 3);
    }
}
