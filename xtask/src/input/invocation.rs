//! How the user ran this tool, for the commands it prints them to run next:
//! `cargo xtask` in a checkout, the installed `rocm-patchkit` (a wheel's
//! script or the binary of the tarball), and as root `sudo` with this
//! binary's absolute path. Imports nothing of the crate: doctor's steps and
//! the workspace both hold one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The program a printed command starts with, passed to the rendering of
/// every next step (never patched into a rendered line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    /// What the user types to run this tool again: `cargo xtask` in a
    /// checkout; installed, `rocm-patchkit`, or the path it was run by.
    pub(crate) program: String,
    /// The same as root: `sudo` and this binary's absolute path, since
    /// sudo's `secure_path` holds neither a venv's `bin/` nor `~/.cargo/bin`.
    pub(crate) as_root: String,
    /// A checkout's `cargo xtask`, which builds packages; the installed
    /// command sends the user to a checkout for that.
    pub(crate) checkout: bool,
    /// The Python environment whose `bin/` holds this binary (a wheel's
    /// script), searched first for hipBLASLt without being told.
    pub(crate) python_env: Option<PathBuf>,
}

/// The name the wheel installs the user's command under.
pub(crate) const INSTALLED: &str = "rocm-patchkit";

impl Invocation {
    /// `cargo xtask`, run from a checkout; as root, this binary by path.
    pub(crate) fn checkout(exe: Option<&Path>) -> Invocation {
        Invocation {
            program: "cargo xtask".to_owned(),
            as_root: as_root(exe, "cargo xtask"),
            checkout: true,
            python_env: None,
        }
    }

    /// The installed command, run as `argv0` from `exe`: the path the user
    /// typed when it has a `/`, else the bare name `PATH` found.
    pub(crate) fn installed(argv0: Option<OsString>, exe: Option<&Path>) -> Invocation {
        let program = argv0
            .map(|a| a.to_string_lossy().into_owned())
            .filter(|a| a.contains('/'))
            .unwrap_or_else(|| INSTALLED.to_owned());
        Invocation {
            as_root: as_root(exe, &program),
            program,
            checkout: false,
            python_env: exe.and_then(python_env_of),
        }
    }
}

/// `sudo <exe>`, or `sudo <program>` when the binary's path is unknown.
fn as_root(exe: Option<&Path>, program: &str) -> String {
    match exe {
        Some(exe) => format!("sudo {}", exe.display()),
        None => format!("sudo {program}"),
    }
}

/// The Python environment (`sys.prefix`) whose `bin/` holds `exe`: a venv
/// (`pyvenv.cfg`), a conda env (`conda-meta/`) or a prefix with a
/// `lib/python3.*` folder, as pip installs a wheel's scripts there.
pub(crate) fn python_env_of(exe: &Path) -> Option<PathBuf> {
    let bin = exe.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?;
    let has_python_lib = || {
        std::fs::read_dir(prefix.join("lib")).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("python3"))
        })
    };
    let is_env = prefix.join("pyvenv.cfg").is_file()
        || prefix.join("conda-meta").is_dir()
        || has_python_lib();
    is_env.then(|| prefix.to_path_buf())
}
