//! The other libraries built with Tensile / tensilelite that carry GEMM
//! kernels of their own: rocBLAS (`rocblas/library`, Debian's
//! `rocblas/<N>/library`) and hipSPARSELt (`hipsparselt/library`). Where
//! their kernel folder holds gfx12 kernels, they are judged for expert
//! scheduling like hipBLASLt; without gfx12 kernels they are left out.

use std::path::{Path, PathBuf};

use super::hipblaslt::{HipblasltLibrary, LibraryKind, Places};
use crate::codeobj::{self, Cache, Judgement};

/// (library file prefix, kernel folder name beside it)
/// Each library family: its file name, its kernel folder's name and kind.
const FAMILIES: [(&str, &str, LibraryKind); 2] = [
    ("librocblas", "rocblas", LibraryKind::Rocblas),
    ("libhipsparselt", "hipsparselt", LibraryKind::Hipsparselt),
];

/// A path on the machine taken below `root`.
fn below(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The folder names of `dir` (below the root) starting with `prefix`, sorted.
fn names(root: &Path, dir: &Path, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(below(root, dir))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    out.sort();
    out
}

/// The kernel folders of a library family in `dir`: `<kind>/library` and
/// `<kind>/<version>/library`.
fn kernel_dirs(root: &Path, dir: &Path, kind: &str) -> Vec<PathBuf> {
    let base = dir.join(kind);
    let mut out = vec![base.join("library")];
    for sub in names(root, &base, "") {
        out.push(base.join(sub).join("library"));
    }
    out.into_iter()
        .filter(|d| below(root, d).is_dir())
        .collect()
}

/// The library of `family` a program would load from `dir`, and its
/// kernel folders judged; `None` without gfx12 kernels.
pub fn judge_in(
    root: &Path,
    lib: &Path,
    family: &str,
    places: &Places,
    cache: &mut Cache,
) -> Option<HipblasltLibrary> {
    let dir = lib.parent()?;
    let (_, folder, kind) = *FAMILIES.iter().find(|(f, _, _)| *f == family)?;
    for kernels in kernel_dirs(root, dir, folder) {
        let judgement = codeobj::judge_library(&below(root, &kernels), cache, places.threads);
        let gfx12 = match &judgement {
            Judgement::CannotTell { why } => !why.starts_with("no gfx12 kernel files"),
            Judgement::NoGfx12 { .. } => false,
            _ => true,
        };
        if !gfx12 {
            continue;
        }
        let file = lib.file_name()?.to_string_lossy().into_owned();
        return Some(HipblasltLibrary {
            path: lib.display().to_string(),
            kind,
            version: file.split_once(".so.").map(|(_, v)| v.to_owned()),
            kernels: kernels.display().to_string(),
            ours: None,
            rewritten: None,
            judgement: judgement
                .map_file(|file| Path::new("/").join(file.strip_prefix(root).unwrap_or(file))),
        });
    }
    None
}

/// rocBLAS and hipSPARSELt with gfx12 kernels in ROCm's and the
/// distribution's library folders below `root`.
pub fn find(root: &Path, places: &Places, cache: &mut Cache) -> Vec<HipblasltLibrary> {
    let mut dirs: Vec<PathBuf> = names(root, Path::new("/opt"), "rocm")
        .into_iter()
        .filter(|n| n != "rocm-patchkit")
        .map(|n| Path::new("/opt").join(n).join("lib"))
        .collect();
    for n in names(root, Path::new("/usr/lib"), "") {
        if n.contains("-linux-") {
            dirs.push(Path::new("/usr/lib").join(n));
        }
    }
    dirs.push(PathBuf::from("/usr/lib64"));
    let mut found = Vec::new();
    for dir in dirs {
        for (family, _, _) in FAMILIES {
            // the longest name is the real file (librocblas.so.5.2)
            let Some(name) = names(root, &dir, family)
                .into_iter()
                .filter(|n| n[family.len()..].starts_with(".so"))
                .max_by_key(|n| n.len())
            else {
                continue;
            };
            if let Some(lib) = judge_in(root, &dir.join(name), family, places, cache) {
                found.push(lib);
            }
        }
    }
    found
}
