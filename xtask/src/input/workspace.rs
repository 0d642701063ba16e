//! Where things live: the project root (recipes, patches, templates), the
//! cache and the work directory, with the flags and environment variables
//! that move them; and the per-recipe lock over the work directory's state.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::input::invocation::Invocation;
use crate::input::knowledge::Source;
use crate::shared::report::{Mode, Reporter};
use crate::shared::settings::{Environment, Settings};

pub use crate::shared::settings::{CACHE_ENV, ROOT_ENV};

/// What every command needs: where the project is, where to cache and to
/// work, how to report, how the user ran the tool (for the commands it
/// prints) and where its knowledge files come from.
#[derive(Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub(crate) cache_dir: PathBuf,
    pub work_dir: PathBuf,
    pub reporter: Reporter,
    pub(crate) invocation: Invocation,
    pub(crate) knowledge: Source,
    /// The settings of the environment, read once by `main`.
    pub settings: Settings,
}

impl Workspace {
    /// The one way the binaries' `main`s build it: the process's
    /// environment read once into the settings (a bad value is invalid
    /// input), `--cache-dir` and `--quiet` given; progress bars on a
    /// terminal unless `CI` is set.
    pub fn from_process(cache_dir: Option<PathBuf>, quiet: bool) -> Result<Workspace> {
        let settings = Settings::of(Environment::of_process())?;
        let ci = settings.env.get("CI").is_some();
        let reporter = Reporter::new(Mode::detect(quiet, ci));
        Ok(Workspace::new(cache_dir, settings, reporter))
    }

    /// `--cache-dir`, then `$PATCHKIT_CACHE_DIR`, then `<root>/target/patchkit/cache`;
    /// run as a checkout's `cargo xtask`, reading its knowledge files.
    pub(crate) fn new(
        cache_dir: Option<PathBuf>,
        settings: Settings,
        reporter: Reporter,
    ) -> Workspace {
        let root = project_root(settings.root.as_deref());
        let cache_dir = cache_dir
            .or_else(|| settings.cache_dir.clone())
            .unwrap_or_else(|| root.join("target/patchkit/cache"));
        let work_dir = root.join("target/patchkit/work");
        let exe = std::env::current_exe().ok();
        Workspace {
            knowledge: Source::Checkout(root.clone()),
            root,
            cache_dir: absolute(&cache_dir),
            work_dir,
            reporter,
            invocation: Invocation::checkout(exe.as_deref()),
            settings,
        }
    }
}

/// Held while a recipe's work folder (`<work>/<recipe>/`: pristine and
/// patched trees, their staging folders, the publication stamp) is read or
/// changed; released when dropped.
pub(crate) struct WorkLock {
    _file: File,
    /// The recipe's work folder.
    pub(crate) dir: PathBuf,
}

impl Workspace {
    /// Takes the exclusive lock of `recipe`'s work folder, waiting (and
    /// saying so) while another run holds it, then removes the staging and
    /// set-aside folders that killed runs left there.
    pub(crate) fn lock_work(&self, recipe: &str) -> Result<WorkLock> {
        let dir = self.work_dir.join(recipe);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the work folder {}", dir.display()))?;
        let path = self.work_dir.join(format!("{recipe}.lock"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening the work lock {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                self.reporter.step(format!(
                    "waiting for another run of {recipe} to finish with {} (lock {})",
                    dir.display(),
                    path.display()
                ));
                file.lock()
                    .with_context(|| format!("locking {}", path.display()))?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
        remove_stale(&dir, None, |_| true)?;
        Ok(WorkLock { _file: file, dir })
    }
}

/// The pid in a leftover's name: `<name>.staging-<pid>`, `<name>.old-<pid>`.
fn leftover_pid(name: &str) -> Option<u32> {
    let (_, tail) = name.rsplit_once('.')?;
    tail.strip_prefix("staging-")
        .or_else(|| tail.strip_prefix("old-"))?
        .parse()
        .ok()
}

/// Removes a folder when dropped, unless disarmed (its path taken): a
/// staging folder that a refusal must not leave behind.
pub(crate) struct RemoveOnDrop(pub Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Removes the `<name>.staging-<pid>` and `<name>.old-<pid>` leftovers in
/// `parent` of processes that are gone: the staging folders of an `apply
/// --into` killed mid-way.
pub(crate) fn remove_stale_of(parent: &Path, name: &str) -> Result<()> {
    remove_stale(parent, Some(name), pid_gone)
}

/// Removes the `*.staging-<pid>` and `*.old-<pid>` folders and files in
/// `dir` (only those of `<name>.` when `name` is given) that belong to
/// another process for which `stale(pid)` holds. Under a lock every other
/// process's leftover is stale; without one, only those of processes that
/// are gone ([`pid_gone`]).
pub(crate) fn remove_stale(
    dir: &Path,
    name_filter: Option<&str>,
    stale: impl Fn(u32) -> bool,
) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(only) = name_filter {
            if name.rsplit_once('.').is_none_or(|(head, _)| head != only) {
                continue;
            }
        }
        let Some(pid) = leftover_pid(&name) else {
            continue;
        };
        if pid == std::process::id() || !stale(pid) {
            continue;
        }
        let path = entry.path();
        let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed
            .with_context(|| format!("removing the leftover {} of a killed run", path.display()))?;
    }
    Ok(())
}

/// Whether process `pid` no longer runs.
pub(crate) fn pid_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// The user's cache folder as the XDG base directory spec places it:
/// `$XDG_CACHE_HOME` when it is absolute, else `$HOME/.cache`.
pub(crate) fn user_cache_home(env: &Environment) -> Option<PathBuf> {
    env.get("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            env.get("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute())
                .map(|h| h.join(".cache"))
        })
}

/// The repository this binary was built from, or `$PATCHKIT_ROOT`.
pub(crate) fn project_root(root: Option<&Path>) -> PathBuf {
    if let Some(root) = root {
        return absolute(root);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
