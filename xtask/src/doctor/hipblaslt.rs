//! Every hipBLASLt a program on the machine can load, and what its kernels
//! say, in every place [`super::layouts`] lists: ROCm's (`/opt/rocm*/lib`,
//! `/opt/rocm*/core*/lib`), the distribution's, ours, and in the Python
//! environments doctor can see the copies PyTorch wheels bring
//! (`site-packages/torch/lib`) and TheRock's wheels
//! (`site-packages/_rocm_sdk_libraries*/lib`). Each is judged by its gfx12
//! kernels ([`crate::gpu::codeobj`]), not by its version. Reads only, below the
//! root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fsread::{self, Root, Unread};
pub(crate) use super::layouts::{python_libs, LibraryKind, Places, RocmRelease};
use crate::gpu::codeobj::{self, Judgement, VerdictCache};

/// One hipBLASLt library file and the verdict on its kernels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct HipblasltLibrary {
    /// The library file as the machine sees it (`/usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.1`).
    pub(crate) path: String,
    pub(crate) kind: LibraryKind,
    /// The library's version from its file name, or the PyTorch wheel's
    /// version and the ROCm it was built for.
    pub(crate) version: Option<String>,
    /// The ROCm release the library came with, where its layout names it
    /// (TheRock's wheel dist-info, `/opt/rocm/core-7.13`, `.info/version`),
    /// else the one its PyTorch wheel was built for (`torch/version.py`).
    /// The one ROCm release a library is judged by
    /// ([`HipblasltLibrary::hipblaslt_version`]).
    pub(crate) rocm: Option<RocmRelease>,
    /// The kernel library folder it loads its kernels from.
    pub(crate) kernels: String,
    /// Our patched build this library resolves to (a PyTorch wheel's copy
    /// replaced by a link to ours), if any.
    pub(crate) ours: Option<String>,
    /// Our in-place rewrite of its kernels (`cargo xtask rewrite-hipblaslt`),
    /// when its record matches the files.
    pub(crate) rewritten: Option<String>,
    /// The in-place record beside its kernels when it was refused (not one
    /// this tool wrote: a key outside the library, a link, a FIFO...), and
    /// why; nothing it names was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) record_refused: Option<String>,
    pub(crate) judgement: Judgement,
}

/// Why a `--python` folder (a path on the machine) cannot be searched:
/// missing, a symlink loop, not a folder; `None` when it is a folder.
pub(crate) fn unreadable_python(root: &Path, python: &Path) -> Option<Unread> {
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

/// What a PyTorch wheel's `torch/version.py` in `site` says: the note
/// `PyTorch 2.9.0+rocm7.1, HIP 7.1.25424`, and the ROCm release it was built
/// for (`+rocm7.1` in its version, else the major and minor of its HIP).
fn torch_wheel(root: &Path, site: &Path) -> Option<(String, Option<RocmRelease>)> {
    let file = site.join("torch/version.py");
    let text = Root::new(root).read_text(&file, fsread::SMALL).ok()?;
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
    let hip = value("hip").filter(|h| !h.is_empty() && h != "None");
    let rocm = version
        .split_once("+rocm")
        .map(|(_, r)| r.to_owned())
        .or_else(|| {
            let mut parts = hip.as_deref()?.split('.');
            Some(format!("{}.{}", parts.next()?, parts.next()?))
        })
        .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        .map(|r| RocmRelease {
            version: r,
            from: file.display().to_string(),
        });
    let note = match hip {
        Some(hip) => format!("PyTorch {version}, HIP {hip}"),
        None => format!("PyTorch {version}"),
    };
    Some((note, rocm))
}

/// Every hipBLASLt below `root`, each judged by its kernels.
pub(crate) fn find(
    root: &Path,
    places: &Places,
    cache: &mut VerdictCache,
) -> Vec<HipblasltLibrary> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for place in super::layouts::library_dirs(root, places) {
        let kind = place.kind;
        let wheel = place.site.as_deref().and_then(|s| torch_wheel(root, s));
        let note = wheel.as_ref().map(|(note, _)| note.as_str());
        // the release the layout names, else the one the PyTorch wheel was built for
        let rocm = place
            .rocm
            .clone()
            .or_else(|| wheel.as_ref().and_then(|(_, r)| r.clone()));
        for lib in libraries_in(root, &place.dir) {
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
            let (kernels, judgement) = beside(root, &place.dir, cache, places.threads);
            let (rewritten, record_refused) = rewritten(root, &kernels, kind, &real);
            found.push(HipblasltLibrary {
                path: lib.display().to_string(),
                kind,
                version: version(&lib, &real, note),
                rocm: rocm.clone(),
                kernels: kernels.display().to_string(),
                ours,
                rewritten,
                record_refused,
                judgement,
            });
        }
    }
    found
}

/// The version of the library `lib` (its real file `real`): the numbers
/// after `.so.` in its name (or its real file's), after the PyTorch wheel's
/// note when there is one.
fn version(lib: &Path, real: &Path, note: Option<&str>) -> Option<String> {
    let so_version = |p: &Path| {
        let name = p.file_name()?.to_string_lossy().into_owned();
        name.split_once(".so.").map(|(_, v)| v.to_owned())
    };
    match (note, so_version(lib).or_else(|| so_version(real))) {
        (Some(n), Some(v)) => Some(format!("{n}; libhipblaslt.so.{v}")),
        (Some(n), None) => Some(n.to_owned()),
        (None, v) => v,
    }
}

/// [`codeobj::judge_library`] on the kernel library at `kernels` (a
/// resolved machine path), when reading it on the host reads what the
/// machine holds (no symlink out of the root, no FIFO or device named like a
/// kernel file, no loop, no file larger than [`fsread::KERNEL_FILE`]);
/// "cannot tell" naming what stands in the way otherwise.
pub(super) fn judge_kernels(
    root: &Path,
    kernels: &Path,
    cache: &mut VerdictCache,
    threads: usize,
) -> Judgement {
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
pub(crate) fn kernel_library_problems(root: &Path, kernels: &Path) -> Vec<Unread> {
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
/// distribution library, our package that owns `real`; and, when the
/// in-place record was refused, why (its paths as the machine sees them).
fn rewritten(
    root: &Path,
    kernels: &Path,
    kind: LibraryKind,
    real: &Path,
) -> (Option<String>, Option<String>) {
    use crate::gpu::inplace::record::{self, Status};
    match record::status(&below(root, kernels)) {
        Status::Rewritten { files, sites } => (
            Some(format!(
                "expert scheduling rewritten off in place ({files} kernel files, {sites} sites; record {})",
                record::path(kernels).display()
            )),
            None,
        ),
        Status::Refused { why } => {
            let why = match root {
                r if r == Path::new("/") => why,
                r => why.replace(&r.display().to_string(), ""),
            };
            (None, Some(why))
        }
        _ if kind == LibraryKind::Distribution => (
            patchkit_package(root, real)
                .map(|p| format!("expert scheduling rewritten off by our package {p}")),
            None,
        ),
        _ => (None, None),
    }
}

/// The kernel library of the hipBLASLt in `dir` (its `hipblaslt/library`,
/// resolved inside the root) and its judgement.
fn beside(
    root: &Path,
    dir: &Path,
    cache: &mut VerdictCache,
    threads: usize,
) -> (PathBuf, Judgement) {
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
pub(crate) fn in_use(
    root: &Path,
    lib: &Path,
    places: &Places,
    cache: &mut VerdictCache,
) -> HipblasltLibrary {
    let dir = lib.parent().unwrap_or(Path::new("/"));
    let (kernels, judgement) = beside(root, dir, cache, places.threads);
    let file = lib.file_name().unwrap_or_default().to_string_lossy();
    let (rewritten, record_refused) = rewritten(root, &kernels, LibraryKind::InUse, lib);
    HipblasltLibrary {
        path: lib.display().to_string(),
        kind: LibraryKind::InUse,
        version: file.split_once(".so.").map(|(_, v)| v.to_owned()),
        rocm: super::layouts::release_of(root, dir).or_else(|| {
            // a PyTorch wheel's torch/lib: the ROCm it was built for
            let site = dir.ends_with("torch/lib").then(|| dir.parent()?.parent());
            torch_wheel(root, site.flatten()?)?.1
        }),
        rewritten,
        record_refused,
        kernels: kernels.display().to_string(),
        ours: None,
        judgement,
    }
}
