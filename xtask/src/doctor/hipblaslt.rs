//! Every hipBLASLt a program on the machine can load, and what its kernels
//! say: ROCm's (`/opt/rocm*/lib`), the distribution's (`/usr/lib/<triplet>`,
//! `/usr/lib64`), ours (`/opt/rocm-patchkit/hipblaslt-*`) and the copies
//! PyTorch wheels bring (`site-packages/torch/lib`) in the Python
//! environments doctor can see. Each is judged by its gfx12 kernels
//! ([`crate::codeobj`]), not by its version. Reads only, below the root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fsread::{self, Root, Unread};
use crate::codeobj::{self, Cache, Judgement};

/// Where a library a program can load comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LibraryKind {
    /// The distribution's (`/usr/lib/<triplet>`, `/usr/lib64`).
    Distribution,
    /// ROCm's (`/opt/rocm*/lib`).
    Rocm,
    /// Our patched build (`/opt/rocm-patchkit/hipblaslt-*`).
    Ours,
    /// A PyTorch wheel's copy (`site-packages/torch/lib`).
    Pytorch,
    /// The one a running program mapped (`doctor --pid`).
    #[serde(rename = "in use")]
    InUse,
    /// rocBLAS, judged like hipBLASLt.
    Rocblas,
    /// hipSPARSELt, judged like hipBLASLt.
    Hipsparselt,
}

impl LibraryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LibraryKind::Distribution => "distribution",
            LibraryKind::Rocm => "rocm",
            LibraryKind::Ours => "ours",
            LibraryKind::Pytorch => "pytorch",
            LibraryKind::InUse => "in use",
            LibraryKind::Rocblas => "rocblas",
            LibraryKind::Hipsparselt => "hipsparselt",
        }
    }

    /// A package's files, which only root changes (and its next upgrade
    /// puts back).
    pub fn is_system(self) -> bool {
        matches!(self, LibraryKind::Distribution | LibraryKind::Rocm)
    }
}

impl std::fmt::Display for LibraryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One hipBLASLt library file and the verdict on its kernels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HipblasltLibrary {
    /// The library file as the machine sees it (`/usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.1`).
    pub path: String,
    pub kind: LibraryKind,
    /// The library's version from its file name, or the PyTorch wheel's
    /// version and the ROCm it was built for.
    pub version: Option<String>,
    /// The kernel library folder it loads its kernels from.
    pub kernels: String,
    /// Our patched build this library resolves to (a PyTorch wheel's copy
    /// replaced by a link to ours), if any.
    pub ours: Option<String>,
    /// Our in-place rewrite of its kernels (`cargo xtask rewrite-hipblaslt`),
    /// when its record matches the files.
    pub rewritten: Option<String>,
    pub judgement: Judgement,
}

/// Where to look beyond the fixed places.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// Python environments or site-packages folders (`--python`,
    /// `$VIRTUAL_ENV`, `$CONDA_PREFIX`), as paths on the machine.
    pub pythons: Vec<PathBuf>,
    /// The user's home, for user site-packages.
    pub home: Option<PathBuf>,
    /// Threads for reading kernels.
    pub threads: usize,
}

impl Places {
    /// `--python` folders, then `$VIRTUAL_ENV`, `$CONDA_PREFIX` and `$HOME`.
    pub fn from_env(pythons: &[PathBuf]) -> Places {
        let mut all = pythons.to_vec();
        for name in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
            if let Some(dir) = std::env::var_os(name).filter(|v| !v.is_empty()) {
                all.push(PathBuf::from(dir));
            }
        }
        Places {
            pythons: all,
            home: std::env::var_os("HOME").map(PathBuf::from),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Why a `--python` folder (a path on the machine) cannot be searched:
/// missing, a symlink loop, not a folder; `None` when it is a folder.
pub fn unreadable_python(root: &Path, python: &Path) -> Option<Unread> {
    let why = match Root::new(root).meta(python) {
        Ok(meta) if meta.kind == fsread::Kind::Dir => return None,
        Ok(meta) => format!("is {}, not a folder", meta.kind.describe()),
        Err(u) => u.why,
    };
    Some(Unread {
        path: fsread::shown(python),
        why: format!("--python: {why}: no Python environment searched there"),
    })
}

/// `rel` (a path on the machine) below `root`.
fn below(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The machine path of `path` (below `root`), symlinks followed inside the
/// root as the machine would see them ([`Root::resolve`]); `path` itself
/// when it cannot be resolved (a loop).
fn resolve(root: &Path, path: &Path) -> PathBuf {
    let path = path.strip_prefix(root).unwrap_or(path);
    Root::new(root)
        .resolve(path)
        .unwrap_or_else(|_| Path::new("/").join(path))
}

/// The `libhipblaslt.so*` files of a folder (below the root), most specific
/// name first per real file.
fn libraries_in(root: &Path, dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = Root::new(root).list(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| n.starts_with("libhipblaslt") && n.contains(".so"))
        .filter(|n| !n.starts_with("libhipblaslt-d") && !n.starts_with("libhipblaslt_"))
        .collect();
    // the unversioned name of a distribution is a development link: keep
    // one name per target file, the longest (libhipblaslt.so.1.1).
    names.sort_by_key(|n| std::cmp::Reverse((n.len(), n.clone())));
    let mut seen = BTreeSet::new();
    names
        .into_iter()
        .map(|n| dir.join(n))
        .filter(|p| seen.insert(resolve(root, p)))
        .collect()
}

/// Subfolders of `dir` (below the root) whose names start with `prefix`, sorted.
fn subdirs(root: &Path, dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let fs = Root::new(root);
    let mut out: Vec<PathBuf> = fs
        .list(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .map(|n| dir.join(n))
        .filter(|p| fs.is_dir(p))
        .collect();
    out.sort();
    out
}

/// The site-packages folders of a Python environment (or the folder itself
/// when it is one).
fn site_packages(root: &Path, env: &Path) -> Vec<PathBuf> {
    if Root::new(root).is_dir(&env.join("torch")) {
        return vec![env.to_path_buf()];
    }
    let mut out = Vec::new();
    for lib in ["lib", "lib64"] {
        for python in subdirs(root, &env.join(lib), "python3") {
            for site in ["site-packages", "dist-packages"] {
                let dir = python.join(site);
                if Root::new(root).is_dir(&dir) {
                    out.push(dir);
                }
            }
        }
    }
    let debian = env.join("lib/python3/dist-packages");
    if Root::new(root).is_dir(&debian) {
        out.push(debian);
    }
    out
}

/// The `torch/lib` folders of the PyTorch wheels of a Python environment
/// (a venv, conda env or site-packages folder), below `root`.
pub fn torch_libs(root: &Path, env: &Path) -> Vec<PathBuf> {
    site_packages(root, env)
        .into_iter()
        .map(|site| site.join("torch/lib"))
        .filter(|lib| below(root, lib).is_dir())
        .collect()
}

/// `libhipblaslt1 7.1.1+dfsg-4+patchkit1` when the library file `lib` (a
/// machine path) belongs to an installed Debian package of ours: a version
/// ending in `+patchkitN` (the rewritten package `build` makes).
fn patchkit_package(root: &Path, lib: &Path) -> Option<String> {
    let status = std::fs::read_to_string(below(root, Path::new("/var/lib/dpkg/status"))).ok()?;
    for stanza in status.split("\n\n") {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        let (Some(package), Some(version), Some(state)) =
            (field("Package:"), field("Version:"), field("Status:"))
        else {
            continue;
        };
        let ours = version
            .rsplit_once("+patchkit")
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !package.starts_with("libhipblaslt") || !state.ends_with(" installed") || !ours {
            continue;
        }
        let mut lists = vec![format!("{package}.list")];
        if let Some(arch) = field("Architecture:") {
            lists.insert(0, format!("{package}:{arch}.list"));
        }
        let owns = lists.iter().any(|list| {
            std::fs::read_to_string(below(root, &Path::new("/var/lib/dpkg/info").join(list)))
                .is_ok_and(|text| text.lines().any(|l| Path::new(l) == lib))
        });
        if owns {
            return Some(format!("{package} {version}"));
        }
    }
    None
}

/// `2.9.0+rocm7.1, HIP 7.1.25424` from `torch/version.py`.
fn torch_version(root: &Path, site: &Path) -> Option<String> {
    let text = Root::new(root)
        .read_text(&site.join("torch/version.py"), fsread::SMALL)
        .ok()?;
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| {
                v.split('#')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .trim_matches(['\'', '"'])
                    .to_owned()
            })
        })
    };
    let version = value("__version__")?;
    Some(
        match value("hip").filter(|h| !h.is_empty() && h != "None") {
            Some(hip) => format!("PyTorch {version}, HIP {hip}"),
            None => format!("PyTorch {version}"),
        },
    )
}

/// The folders a hipBLASLt may be in, each with its kind and, for a
/// PyTorch wheel, its version note.
fn library_dirs(root: &Path, places: &Places) -> Vec<(PathBuf, LibraryKind, Option<String>)> {
    let mut dirs: Vec<(PathBuf, LibraryKind, Option<String>)> = Vec::new();
    for rocm in subdirs(root, Path::new("/opt"), "rocm") {
        let name = rocm.file_name().unwrap_or_default().to_string_lossy();
        if name == "rocm-patchkit" {
            for ours in subdirs(root, &rocm, "hipblaslt-") {
                dirs.push((ours.join("lib"), LibraryKind::Ours, None));
            }
        } else {
            dirs.push((rocm.join("lib"), LibraryKind::Rocm, None));
        }
    }
    for triplet in subdirs(root, Path::new("/usr/lib"), "") {
        let name = triplet.file_name().unwrap_or_default().to_string_lossy();
        if name.contains("-linux-") {
            dirs.push((triplet, LibraryKind::Distribution, None));
        }
    }
    dirs.push((PathBuf::from("/usr/lib64"), LibraryKind::Distribution, None));
    let mut envs: Vec<PathBuf> = places.pythons.clone();
    if let Some(home) = &places.home {
        envs.push(home.join(".local"));
    }
    envs.extend([PathBuf::from("/usr"), PathBuf::from("/usr/local")]);
    for env in &envs {
        for site in site_packages(root, env) {
            let torch_lib = site.join("torch/lib");
            if Root::new(root).is_dir(&torch_lib) {
                dirs.push((torch_lib, LibraryKind::Pytorch, torch_version(root, &site)));
            }
        }
    }
    dirs
}

/// Every hipBLASLt below `root`, each judged by its kernels.
pub fn find(root: &Path, places: &Places, cache: &mut Cache) -> Vec<HipblasltLibrary> {
    let dirs = library_dirs(root, places);
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for (dir, kind, note) in dirs {
        for lib in libraries_in(root, &dir) {
            let real = resolve(root, &lib);
            // one entry per real file, except that a PyTorch wheel's copy is
            // always its own entry: it is what a training job loads.
            let key = if kind == LibraryKind::Pytorch {
                lib.clone()
            } else {
                real.clone()
            };
            if !seen.insert(key) {
                continue;
            }
            let ours = real
                .strip_prefix("/opt/rocm-patchkit")
                .ok()
                .and_then(|rest| rest.components().next())
                .map(|c| format!("/opt/rocm-patchkit/{}", c.as_os_str().to_string_lossy()))
                .filter(|_| kind != LibraryKind::Ours);
            let file = lib
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let so_version = file
                .split_once(".so.")
                .map(|(_, v)| v.to_owned())
                .or_else(|| {
                    let real_name = real.file_name()?.to_string_lossy().into_owned();
                    real_name.split_once(".so.").map(|(_, v)| v.to_owned())
                });
            let version = match (&note, so_version) {
                (Some(n), Some(v)) => Some(format!("{n}; libhipblaslt.so.{v}")),
                (Some(n), None) => Some(n.clone()),
                (None, v) => v,
            };
            let (kernels, judgement) = beside(root, &dir, cache, places.threads);
            let rewritten = rewritten(root, &kernels, kind, &real);
            found.push(HipblasltLibrary {
                path: lib.display().to_string(),
                kind,
                version,
                kernels: kernels.display().to_string(),
                ours,
                rewritten,
                judgement,
            });
        }
    }
    found
}

/// [`codeobj::judge_library`] on the kernel library at `kernels` (a
/// resolved machine path), when reading it on the host reads what the
/// machine holds (no symlink out of the root, no FIFO or device named like a
/// kernel file, no loop, no file larger than [`fsread::KERNEL_FILE`]);
/// "cannot tell" naming what stands in the way otherwise.
fn judge_kernels(root: &Path, kernels: &Path, cache: &mut Cache, threads: usize) -> Judgement {
    let problems = kernel_library_problems(root, kernels);
    if let Some(first) = problems.first() {
        let more = match problems.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Judgement::CannotTell {
            why: format!("{}: {}{more}", first.path, first.why),
        };
    }
    relative_files(
        root,
        codeobj::judge_library(&below(root, kernels), cache, threads),
    )
}

/// What keeps the kernel library at `kernels` (a machine path) from being
/// read as the machine holds it ([`Root::host_reading_differs`]); empty when
/// nothing does, or when there is no such folder (that is said elsewhere).
pub fn kernel_library_problems(root: &Path, kernels: &Path) -> Vec<Unread> {
    if !Root::new(root).is_dir(kernels) {
        return Vec::new();
    }
    let kernel_file = |n: &str| n.ends_with(".co") || n.ends_with(".hsaco");
    // codeobj::kernel_files lists the library and three levels below it
    Root::new(root).host_reading_differs(kernels, 3, kernel_file, fsread::KERNEL_FILE)
}

/// File paths of a judgement as the machine sees them (without the root).
fn relative_files(root: &Path, judgement: Judgement) -> Judgement {
    let strip = |p: &Path| -> PathBuf {
        match p.strip_prefix(root) {
            Ok(rel) if root != Path::new("/") => Path::new("/").join(rel),
            _ => p.to_path_buf(),
        }
    };
    match judgement {
        Judgement::CannotTell { why } if root != Path::new("/") => Judgement::CannotTell {
            why: why.replace(&root.display().to_string(), ""),
        },
        other => other.map_file(strip),
    }
}

/// What says the kernels at `kernels` were rewritten by us: the in-place
/// record of `rewrite-hipblaslt` that matches its files, or, for a
/// distribution library, our package that owns `real`.
fn rewritten(root: &Path, kernels: &Path, kind: LibraryKind, real: &Path) -> Option<String> {
    match crate::inplace::record::status(&below(root, kernels)) {
        crate::inplace::record::Status::Rewritten { files, sites } => Some(format!(
            "expert scheduling rewritten off in place ({files} kernel files, {sites} sites; record {})",
            crate::inplace::record::path(kernels).display()
        )),
        _ if kind == LibraryKind::Distribution => patchkit_package(root, real)
            .map(|p| format!("expert scheduling rewritten off by our package {p}")),
        _ => None,
    }
}

/// The kernel library of the hipBLASLt in `dir` (its `hipblaslt/library`,
/// resolved inside the root) and its judgement.
fn beside(root: &Path, dir: &Path, cache: &mut Cache, threads: usize) -> (PathBuf, Judgement) {
    let kernels = resolve(root, &dir.join("hipblaslt/library"));
    let judgement = if Root::new(root).is_dir(&kernels) {
        judge_kernels(root, &kernels, cache, threads)
    } else {
        Judgement::CannotTell {
            why: format!(
                "no kernel library at {} (hipBLASLt loads its GEMM kernels from there)",
                dir.join("hipblaslt/library").display()
            ),
        }
    };
    (kernels, judgement)
}

/// The hipBLASLt library a running program mapped (`doctor --pid`), judged
/// by the kernel folder beside it.
pub fn in_use(root: &Path, lib: &Path, places: &Places, cache: &mut Cache) -> HipblasltLibrary {
    let dir = lib.parent().unwrap_or(Path::new("/"));
    let (kernels, judgement) = beside(root, dir, cache, places.threads);
    let file = lib.file_name().unwrap_or_default().to_string_lossy();
    HipblasltLibrary {
        path: lib.display().to_string(),
        kind: LibraryKind::InUse,
        version: file.split_once(".so.").map(|(_, v)| v.to_owned()),
        rewritten: rewritten(root, &kernels, LibraryKind::InUse, lib),
        kernels: kernels.display().to_string(),
        ours: None,
        judgement,
    }
}
