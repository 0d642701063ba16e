//! Finding a ROCm toolchain: the prefix (`--rocm`, else `$ROCM_PATH`, else
//! `/opt/rocm`, else a distribution's `/usr` when `/opt/rocm` is absent and
//! `/usr/bin/hipcc` is there), its compiler, its HIP CMake package (AMD's
//! `lib/cmake/hip` or a distribution's `lib/<triplet>/cmake/hip`) and its
//! version, plus `cmake` on PATH; or the list of what is missing.

use std::path::{Path, PathBuf};

use crate::shared::settings::Environment;

/// Where the prefix was taken from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Flag,
    Env,
    Default,
    /// `/usr`: a distribution's ROCm (Debian's and Ubuntu's `hipcc`).
    Distribution,
}

impl Origin {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Origin::Flag => "--rocm",
            Origin::Env => "ROCM_PATH",
            Origin::Default => "the default /opt/rocm",
            Origin::Distribution => "the distribution's /usr (no /opt/rocm)",
        }
    }
}

/// A ROCm prefix that can build hipBLASLt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Toolchain {
    pub(crate) prefix: PathBuf,
    pub(crate) origin: Origin,
    /// `amdclang++` when the prefix has it, else `hipcc`.
    pub(crate) cxx: PathBuf,
    /// `amdclang` beside `amdclang++`, when present.
    pub(crate) cc: Option<PathBuf>,
    pub(crate) cmake: PathBuf,
    /// The first line of `<prefix>/.info/version` (`7.1.1-0`), when present.
    pub(crate) version: Option<String>,
}

/// The prefix that was looked at and everything it lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing {
    pub(crate) prefix: PathBuf,
    pub(crate) origin: Origin,
    pub(crate) problems: Vec<String>,
}

impl Missing {
    /// One line: `no ROCm toolchain at /opt/rocm (the default /opt/rocm): ...`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "no usable ROCm toolchain at {} (from {}): {}",
            self.prefix.display(),
            self.origin.as_str(),
            self.problems.join("; ")
        )
    }
}

/// The prefix to look at: `flag`, else `$ROCM_PATH` of `env`, else
/// `/opt/rocm`. The first one given is the only one looked at, so a build
/// never picks up a toolchain the caller did not mean.
pub(crate) fn candidate(flag: Option<&Path>, env: &Environment) -> (PathBuf, Origin) {
    if let Some(path) = flag {
        return (absolute(path), Origin::Flag);
    }
    if let Some(path) = env.path("ROCM_PATH") {
        return (absolute(&path), Origin::Env);
    }
    let usr = Path::new("/usr");
    if !Path::new("/opt/rocm").exists() && is_executable(&usr.join("bin/hipcc")) {
        return (usr.to_path_buf(), Origin::Distribution);
    }
    (PathBuf::from("/opt/rocm"), Origin::Default)
}

/// The HIP CMake package folder: `lib/cmake/hip` (AMD's layout, and some
/// distributions') or `lib/<triplet>/cmake/hip` (Debian's multiarch layout).
fn hip_cmake_dir(prefix: &Path) -> Option<PathBuf> {
    let direct = prefix.join("lib/cmake/hip");
    if direct.is_dir() {
        return Some(direct);
    }
    let mut triplets: Vec<PathBuf> = std::fs::read_dir(prefix.join("lib"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("-linux-"))
        })
        .map(|p| p.join("cmake/hip"))
        .filter(|p| p.is_dir())
        .collect();
    triplets.sort();
    triplets.into_iter().next()
}

/// The ROCm release: `.info/version` (AMD's layout), else the HIP CMake
/// package's `PACKAGE_VERSION` (a distribution's, whose HIP is its ROCm).
fn version(prefix: &Path, hip_cmake: &Path) -> Option<String> {
    let info = std::fs::read_to_string(prefix.join(".info/version"))
        .ok()
        .and_then(|t| t.lines().next().map(|l| l.trim().to_owned()))
        .filter(|v| !v.is_empty());
    info.or_else(|| {
        let text = std::fs::read_to_string(hip_cmake.join("hip-config-version.cmake")).ok()?;
        text.lines().find_map(|l| {
            let rest = l.trim().strip_prefix("set(PACKAGE_VERSION")?;
            let v = rest.trim().trim_end_matches(')').trim().trim_matches('"');
            (!v.is_empty()).then(|| v.to_owned())
        })
    })
}

/// Looks for a toolchain at the candidate prefix (`cmake` on `env`'s
/// `PATH`).
pub(crate) fn find(flag: Option<&Path>, env: &Environment) -> Result<Toolchain, Missing> {
    let (prefix, origin) = candidate(flag, env);
    let mut problems = Vec::new();
    let cmake = env.which("cmake");
    if cmake.is_none() {
        problems.push("`cmake` is not on PATH (apt-get install cmake)".to_owned());
    }
    if !prefix.is_dir() {
        problems.insert(0, "the folder does not exist".to_owned());
        return Err(Missing {
            prefix,
            origin,
            problems,
        });
    }
    let amdclang = prefix.join("bin/amdclang++");
    let hipcc = prefix.join("bin/hipcc");
    let cxx = [amdclang, hipcc].into_iter().find(|p| is_executable(p));
    if cxx.is_none() {
        problems.push("no compiler: neither bin/amdclang++ nor bin/hipcc is executable".to_owned());
    }
    let hip_cmake = hip_cmake_dir(&prefix);
    if hip_cmake.is_none() {
        problems.push(
            "no HIP CMake package: neither lib/cmake/hip nor lib/<triplet>/cmake/hip exists (Debian: apt-get install libamdhip64-dev)"
                .to_owned(),
        );
    }
    match (cxx, cmake, hip_cmake) {
        (Some(cxx), Some(cmake), Some(hip_cmake)) if problems.is_empty() => {
            let cc = Some(prefix.join("bin/amdclang")).filter(|p| is_executable(p));
            let version = version(&prefix, &hip_cmake);
            Ok(Toolchain {
                prefix,
                origin,
                cxx,
                cc,
                cmake,
                version,
            })
        }
        _ => Err(Missing {
            prefix,
            origin,
            problems,
        }),
    }
}

/// `7.1` of `7.1.1-0` or `7.1.1`.
pub(crate) fn major_minor(version: &str) -> Option<String> {
    let mut parts = version.split(['.', '-']);
    let major = parts
        .next()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))?;
    let minor = parts
        .next()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))?;
    (!major.is_empty() && !minor.is_empty()).then(|| format!("{major}.{minor}"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_minor_of_rocm_versions() {
        assert_eq!(major_minor("7.1.1-0").as_deref(), Some("7.1"));
        assert_eq!(major_minor("7.2.0").as_deref(), Some("7.2"));
        assert_eq!(major_minor("seven"), None);
    }

    #[test]
    fn a_prefix_without_compiler_names_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let env = Environment::of_process();
        let missing = find(Some(dir.path()), &env).unwrap_err();
        let text = missing.describe();
        assert!(text.contains("bin/amdclang++"), "{text}");
        assert!(text.contains("lib/cmake/hip"), "{text}");
        assert_eq!(missing.origin, Origin::Flag);
        let gone = find(Some(&dir.path().join("nope")), &env).unwrap_err();
        assert!(gone.describe().contains("does not exist"));
    }

    #[test]
    fn a_distribution_layout_is_a_toolchain_with_the_hip_version() {
        use std::os::unix::fs::PermissionsExt;
        let env = Environment::of_process();
        if env.which("cmake").is_none() {
            return;
        }
        let usr = tempfile::tempdir().unwrap();
        let hipcc = usr.path().join("bin/hipcc");
        std::fs::create_dir_all(hipcc.parent().unwrap()).unwrap();
        std::fs::write(&hipcc, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&hipcc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cmake = usr.path().join("lib/x86_64-linux-gnu/cmake/hip");
        std::fs::create_dir_all(&cmake).unwrap();
        std::fs::write(
            cmake.join("hip-config-version.cmake"),
            "set(PACKAGE_VERSION \"7.0.2\")\n",
        )
        .unwrap();
        let tc = find(Some(usr.path()), &env).unwrap();
        assert_eq!(tc.cxx, hipcc);
        assert_eq!(tc.version.as_deref(), Some("7.0.2"));
        std::fs::remove_dir_all(&cmake).unwrap();
        let missing = find(Some(usr.path()), &env).unwrap_err().describe();
        assert!(missing.contains("lib/<triplet>/cmake/hip"), "{missing}");
    }
}
