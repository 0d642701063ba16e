//! Every place a program loads ROCm's libraries from, as the folders doctor
//! searches: ROCm's (`/opt/rocm*/lib`; TheRock's system packages and
//! tarballs, ROCm 7.13 on, in `/opt/rocm/core*/lib` and
//! `/opt/rocm-*/core*/lib`, where `/opt/rocm/lib` is only a compatibility
//! link that a tarball install lacks), the distribution's
//! (`/usr/lib/<triplet>`, `/usr/lib64`), ours
//! (`/opt/rocm-patchkit/hipblaslt-*/lib`), and in every Python environment
//! doctor sees the PyTorch wheels' `torch/lib` and TheRock's `rocm[libraries]`
//! wheels (`site-packages/_rocm_sdk_libraries*/lib`, with the runtime and
//! comgr in `_rocm_sdk_core*/lib`). Each folder comes with its kind and the
//! ROCm release its layout names. Reads only, below the root, through
//! [`super::fsread`]: bounded listings, small files, no walk.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fsread::{self, Root};

/// Where a library a program can load comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LibraryKind {
    /// The distribution's (`/usr/lib/<triplet>`, `/usr/lib64`).
    Distribution,
    /// ROCm's (`/opt/rocm*/lib`, `/opt/rocm*/core*/lib`).
    Rocm,
    /// Our patched build (`/opt/rocm-patchkit/hipblaslt-*`).
    Ours,
    /// A PyTorch wheel's copy (`site-packages/torch/lib`).
    Pytorch,
    /// TheRock's Python packages (`site-packages/_rocm_sdk_libraries*/lib`),
    /// which TheRock's PyTorch wheels load.
    #[serde(rename = "rocm-sdk wheel")]
    RocmSdk,
    /// The one a running program mapped (`doctor --pid`).
    #[serde(rename = "in use")]
    InUse,
    /// rocBLAS, judged like hipBLASLt.
    Rocblas,
    /// hipSPARSELt, judged like hipBLASLt.
    Hipsparselt,
}

impl LibraryKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LibraryKind::Distribution => "distribution",
            LibraryKind::Rocm => "rocm",
            LibraryKind::Ours => "ours",
            LibraryKind::Pytorch => "pytorch",
            LibraryKind::RocmSdk => "rocm-sdk wheel",
            LibraryKind::InUse => "in use",
            LibraryKind::Rocblas => "rocblas",
            LibraryKind::Hipsparselt => "hipsparselt",
        }
    }

    /// A package's files, which only root changes (and its next upgrade
    /// puts back).
    pub(crate) fn is_system(self) -> bool {
        matches!(self, LibraryKind::Distribution | LibraryKind::Rocm)
    }
}

impl std::fmt::Display for LibraryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where to look beyond the fixed places.
#[derive(Debug, Clone, Default)]
pub(crate) struct Places {
    /// Python environments or site-packages folders (`--python`,
    /// `$VIRTUAL_ENV`, `$CONDA_PREFIX`), as paths on the machine.
    pub(crate) pythons: Vec<PathBuf>,
    /// The user's home, for user site-packages.
    pub(crate) home: Option<PathBuf>,
    /// Threads for reading kernels.
    pub(crate) threads: usize,
}

impl Places {
    /// `--python` folders, then `$VIRTUAL_ENV`, `$CONDA_PREFIX` and `$HOME`
    /// of `env`.
    pub(crate) fn from_env(
        pythons: &[PathBuf],
        env: &crate::shared::settings::Environment,
    ) -> Places {
        let mut all = pythons.to_vec();
        for name in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
            if let Some(dir) = env.path(name) {
                all.push(dir);
            }
        }
        Places {
            pythons: all,
            home: env.get("HOME").map(PathBuf::from),
            threads: crate::shared::par::cores(),
        }
    }

    /// Every Python environment to search: the named ones, the user's
    /// site-packages (`~/.local`), the system's (`/usr`, `/usr/local`).
    fn envs(&self) -> Vec<PathBuf> {
        let mut envs = self.pythons.clone();
        if let Some(home) = &self.home {
            envs.push(home.join(".local"));
        }
        envs.extend([PathBuf::from("/usr"), PathBuf::from("/usr/local")]);
        envs
    }
}

/// The ROCm release a library came with, as its layout names it. Not
/// hipBLASLt's own version: TheRock's releases (7.9 on, 10.x) and the
/// legacy ones (7.0 - 7.2) are two streams whose numbers do not order them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RocmRelease {
    /// `7.10.0` (a TheRock wheel's dist-info), `7.13` (`/opt/rocm/core-7.13`),
    /// `7.1.1-53` (`.info/version`).
    pub(crate) version: String,
    /// Where it was read: the file, or the folder whose name carries it.
    pub(crate) from: String,
}

/// One folder a library may be loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LibDir {
    /// The folder as the machine names it (`/opt/rocm/core/lib`).
    pub(crate) dir: PathBuf,
    pub(crate) kind: LibraryKind,
    /// The site-packages folder of a PyTorch wheel's `torch/lib`.
    pub(crate) site: Option<PathBuf>,
    pub(crate) rocm: Option<RocmRelease>,
}

/// Subfolders of `dir` (a machine path) whose names start with `prefix`,
/// sorted; symlinks to folders count.
pub(crate) fn subdirs(root: &Path, dir: &Path, prefix: &str) -> Vec<PathBuf> {
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

/// Whether `dir` is itself a site-packages folder: named so, or holding a
/// PyTorch wheel or TheRock's packages.
fn is_site_packages(root: &Path, dir: &Path) -> bool {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    name == "site-packages"
        || name == "dist-packages"
        || Root::new(root).is_dir(&dir.join("torch"))
        || !subdirs(root, dir, "_rocm_sdk_").is_empty()
}

/// The site-packages folders of a Python environment (or the folder itself
/// when it is one).
pub(crate) fn site_packages(root: &Path, env: &Path) -> Vec<PathBuf> {
    if is_site_packages(root, env) {
        return vec![env.to_path_buf()];
    }
    let fs = Root::new(root);
    let mut out = Vec::new();
    for lib in ["lib", "lib64"] {
        for python in subdirs(root, &env.join(lib), "python3") {
            for site in ["site-packages", "dist-packages"] {
                let dir = python.join(site);
                if fs.is_dir(&dir) {
                    out.push(dir);
                }
            }
        }
    }
    let debian = env.join("lib/python3/dist-packages");
    if fs.is_dir(&debian) {
        out.push(debian);
    }
    out
}

/// The library folders of one site-packages folder: its PyTorch wheel's
/// `torch/lib` and TheRock's `_rocm_sdk_libraries*/lib`.
fn python_dirs(root: &Path, site: &Path) -> Vec<LibDir> {
    let fs = Root::new(root);
    let mut out = Vec::new();
    let torch = site.join("torch/lib");
    if fs.is_dir(&torch) {
        out.push(LibDir {
            dir: torch,
            kind: LibraryKind::Pytorch,
            site: Some(site.to_path_buf()),
            rocm: None,
        });
    }
    for package in subdirs(root, site, "_rocm_sdk_libraries") {
        let lib = package.join("lib");
        if fs.is_dir(&lib) {
            out.push(LibDir {
                rocm: wheel_release(root, &package),
                dir: lib,
                kind: LibraryKind::RocmSdk,
                site: None,
            });
        }
    }
    out
}

/// The folders of a Python environment (a venv, conda env or site-packages
/// folder) that hold the libraries its programs load: PyTorch wheels'
/// `torch/lib` and TheRock's `_rocm_sdk_libraries*/lib`.
pub(crate) fn python_libs(root: &Path, env: &Path) -> Vec<PathBuf> {
    site_packages(root, env)
        .iter()
        .flat_map(|site| python_dirs(root, site))
        .map(|d| d.dir)
        .collect()
}

/// ROCm's library folders below one `/opt/rocm*` prefix: its `lib` and the
/// `lib` of every `core*` folder in it (TheRock's `/opt/rocm/core-7.13`,
/// its `/opt/rocm/core` link, a tarball unpacked there).
fn rocm_dirs(root: &Path, prefix: &Path) -> Vec<LibDir> {
    let mut libs = vec![prefix.join("lib")];
    libs.extend(
        subdirs(root, prefix, "core")
            .into_iter()
            .map(|core| core.join("lib")),
    );
    libs.into_iter()
        .filter(|lib| Root::new(root).is_dir(lib))
        .map(|dir| LibDir {
            rocm: prefix_release(root, &dir),
            dir,
            kind: LibraryKind::Rocm,
            site: None,
        })
        .collect()
}

/// Every folder a hipBLASLt, rocBLAS or hipSPARSELt may be loaded from,
/// each with its kind: ROCm's and ours, the distribution's, then those of
/// the Python environments.
pub(crate) fn library_dirs(root: &Path, places: &Places) -> Vec<LibDir> {
    let mut dirs = Vec::new();
    for rocm in subdirs(root, Path::new("/opt"), "rocm") {
        if rocm.file_name().is_some_and(|n| n == "rocm-patchkit") {
            for ours in subdirs(root, &rocm, "hipblaslt-") {
                dirs.push(LibDir {
                    dir: ours.join("lib"),
                    kind: LibraryKind::Ours,
                    site: None,
                    rocm: None,
                });
            }
        } else {
            dirs.extend(rocm_dirs(root, &rocm));
        }
    }
    let mut system = subdirs(root, Path::new("/usr/lib"), "");
    system.retain(|d| {
        d.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .contains("-linux-")
    });
    system.push(PathBuf::from("/usr/lib64"));
    dirs.extend(system.into_iter().map(|dir| LibDir {
        dir,
        kind: LibraryKind::Distribution,
        site: None,
        rocm: None,
    }));
    for env in places.envs() {
        for site in site_packages(root, &env) {
            dirs.extend(python_dirs(root, &site));
        }
    }
    dirs
}

/// The folders comgr (`libamd_comgr.so*`) may be loaded from, beyond the
/// distribution's: ROCm's (`/opt/rocm/lib` first) and TheRock's wheels'
/// `_rocm_sdk_core*/lib`.
pub(crate) fn comgr_dirs(root: &Path, places: &Places) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = subdirs(root, Path::new("/opt"), "rocm")
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "rocm-patchkit"))
        .flat_map(|prefix| rocm_dirs(root, prefix))
        .map(|d| d.dir)
        .collect();
    for env in places.envs() {
        for site in site_packages(root, &env) {
            for core in subdirs(root, &site, "_rocm_sdk_core") {
                if Root::new(root).is_dir(&core.join("lib")) {
                    dirs.push(core.join("lib"));
                }
            }
        }
    }
    dirs
}

/// The ROCm release of the library folder `dir` as its layout names it:
/// TheRock's wheel dist-info for `_rocm_sdk_*/lib`, else the prefix it
/// resolves into (`.info/version`, or a `core-7.13` / `rocm-7.1.1` folder
/// name) below `/opt`.
pub(crate) fn release_of(root: &Path, dir: &Path) -> Option<RocmRelease> {
    let package = dir.parent()?;
    let name = package.file_name()?.to_string_lossy();
    if name.starts_with("_rocm_sdk_") {
        return wheel_release(root, package);
    }
    prefix_release(root, dir)
}

/// The release of a ROCm prefix below `/opt` that `lib` resolves into: its
/// `.info/version` (ROCm's own installs), else the version its folder is
/// named for (`/opt/rocm/core-10.0`: `10.0`; `/opt/rocm-7.1.1`: `7.1.1`).
fn prefix_release(root: &Path, lib: &Path) -> Option<RocmRelease> {
    let fs = Root::new(root);
    let real = fs.resolve(lib).ok()?;
    let prefix = real.parent()?;
    if !prefix.starts_with("/opt") {
        return None;
    }
    let info = prefix.join(".info/version");
    if let Ok(text) = fs.read_text(&info, fsread::LINE) {
        let version = text.trim();
        if !version.is_empty() {
            return Some(RocmRelease {
                version: version.to_owned(),
                from: info.display().to_string(),
            });
        }
    }
    let name = prefix.file_name()?.to_string_lossy();
    let (_, version) = name.split_once('-')?;
    let numbered = version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.');
    numbered.then(|| RocmRelease {
        version: version.to_owned(),
        from: prefix.display().to_string(),
    })
}

/// The version of the wheel that installed TheRock's platform package
/// `package` (`site-packages/_rocm_sdk_libraries_gfx120X_all`): the
/// `Version:` of the dist-info whose name the package's starts with
/// (`rocm_sdk_libraries_gfx120x_all-7.10.0.dist-info`, names compared as
/// pip writes them, lower case), the longest such name when several do.
fn wheel_release(root: &Path, package: &Path) -> Option<RocmRelease> {
    let site = package.parent()?;
    let wanted = package
        .file_name()?
        .to_string_lossy()
        .trim_start_matches('_')
        .to_lowercase();
    let (info, _, named) = Root::new(root)
        .list(site)
        .ok()?
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .filter_map(|n| {
            let stem = n.strip_suffix(".dist-info")?;
            let (dist, version) = stem.split_once('-')?;
            let dist = dist.to_lowercase();
            (dist.starts_with("rocm_sdk_") && wanted.starts_with(&dist))
                .then(|| (site.join(&n), dist, version.to_owned()))
        })
        .max_by_key(|(_, dist, _)| dist.len())?;
    let metadata = info.join("METADATA");
    let from_metadata = Root::new(root)
        .read_text(&metadata, fsread::SMALL)
        .ok()
        .and_then(|text| {
            text.lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix("Version:"))
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        });
    Some(match from_metadata {
        Some(version) => RocmRelease {
            version,
            from: metadata.display().to_string(),
        },
        None => RocmRelease {
            version: named,
            from: info.display().to_string(),
        },
    })
}

#[cfg(test)]
#[path = "layouts_tests.rs"]
mod tests;
