//! The other libraries built with Tensile / tensilelite that carry GEMM
//! kernels of their own: rocBLAS (`rocblas/library`, Debian's
//! `rocblas/<N>/library`) and hipSPARSELt (`hipsparselt/library`), in every
//! place [`super::layouts`] lists but ours. Where their kernel folder holds
//! gfx12 kernels, they are judged for expert scheduling like hipBLASLt;
//! without gfx12 kernels they are left out. Reads only, through
//! [`super::fsread`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::fsread::Root;
use super::hipblaslt::{HipblasltLibrary, LibraryKind, Places};
use super::layouts::{self, RocmRelease};
use crate::gpu::codeobj::{Judgement, VerdictCache};

/// Each library family: its file name, its kernel folder's name and kind.
const FAMILIES: [(&str, &str, LibraryKind); 2] = [
    ("librocblas", "rocblas", LibraryKind::Rocblas),
    ("libhipsparselt", "hipsparselt", LibraryKind::Hipsparselt),
];

/// The names in `dir` (a machine path) starting with `prefix`, sorted; none
/// when it cannot be listed.
fn names(root: &Path, dir: &Path, prefix: &str) -> Vec<String> {
    Root::new(root)
        .list(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// The kernel folders of a library family in `dir`: `<kind>/library` and
/// `<kind>/<version>/library`, resolved inside the root.
fn kernel_dirs(root: &Path, dir: &Path, kind: &str) -> Vec<PathBuf> {
    let fs = Root::new(root);
    let base = dir.join(kind);
    let mut out = vec![base.join("library")];
    for sub in names(root, &base, "") {
        out.push(base.join(sub).join("library"));
    }
    out.into_iter()
        .filter(|d| fs.is_dir(d))
        .map(|d| fs.resolve(&d).unwrap_or(d))
        .collect()
}

/// The library `lib` of `family` (from a layout of ROCm release `rocm`),
/// its kernel folders judged; `None` without gfx12 kernels.
fn judge_in(
    root: &Path,
    lib: &Path,
    family: &str,
    rocm: Option<RocmRelease>,
    places: &Places,
    cache: &mut VerdictCache,
) -> Option<HipblasltLibrary> {
    let dir = lib.parent()?;
    let (_, folder, kind) = *FAMILIES.iter().find(|(f, _, _)| *f == family)?;
    for kernels in kernel_dirs(root, dir, folder) {
        let judgement = super::hipblaslt::judge_kernels(root, &kernels, cache, places.threads);
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
            rocm,
            kernels: kernels.display().to_string(),
            ours: None,
            rewritten: None,
            record_refused: None,
            judgement: match judgement {
                Judgement::On { file, gfx, offset } => Judgement::On {
                    file: Path::new("/").join(file.strip_prefix(root).unwrap_or(&file)),
                    gfx,
                    offset,
                },
                other => other,
            },
        });
    }
    None
}

/// rocBLAS and hipSPARSELt with gfx12 kernels in every place a program
/// loads them from below `root` (ROCm's, the distribution's, the Python
/// environments'), each real file once.
pub(crate) fn find(
    root: &Path,
    places: &Places,
    cache: &mut VerdictCache,
) -> Vec<HipblasltLibrary> {
    let fs = Root::new(root);
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for place in layouts::library_dirs(root, places) {
        if place.kind == LibraryKind::Ours {
            continue;
        }
        for (family, _, _) in FAMILIES {
            // the longest name is the real file (librocblas.so.5.2)
            let Some(name) = names(root, &place.dir, family)
                .into_iter()
                .filter(|n| n[family.len()..].starts_with(".so"))
                .max_by_key(|n| n.len())
            else {
                continue;
            };
            let lib = place.dir.join(name);
            if !seen.insert(fs.resolve(&lib).unwrap_or_else(|_| lib.clone())) {
                continue;
            }
            if let Some(lib) = judge_in(root, &lib, family, place.rocm.clone(), places, cache) {
                found.push(lib);
            }
        }
    }
    found
}
