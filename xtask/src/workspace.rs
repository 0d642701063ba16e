//! Where things live: the project root (recipes, patches, templates), the
//! cache and the work directory, with the flags and environment variables
//! that move them.

use std::path::{Path, PathBuf};

use crate::report::Reporter;

/// Environment variable that moves the content-addressed cache.
pub const CACHE_ENV: &str = "PATCHKIT_CACHE_DIR";
/// Environment variable that points the tool at another project root.
pub const ROOT_ENV: &str = "PATCHKIT_ROOT";

/// What every command needs: where the project is, where to cache and to
/// work, and how to report.
#[derive(Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub cache_dir: PathBuf,
    pub work_dir: PathBuf,
    pub reporter: Reporter,
}

impl Workspace {
    /// `--cache-dir`, then `$PATCHKIT_CACHE_DIR`, then `<root>/target/patchkit/cache`.
    pub fn new(cache_dir: Option<PathBuf>, reporter: Reporter) -> Workspace {
        let root = project_root();
        let cache_dir = cache_dir
            .or_else(|| {
                std::env::var_os(CACHE_ENV)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| root.join("target/patchkit/cache"));
        let work_dir = root.join("target/patchkit/work");
        Workspace {
            root,
            cache_dir: absolute(&cache_dir),
            work_dir,
            reporter,
        }
    }
}

/// The repository this binary was built from, or `$PATCHKIT_ROOT`.
pub fn project_root() -> PathBuf {
    if let Some(root) = std::env::var_os(ROOT_ENV).filter(|v| !v.is_empty()) {
        return absolute(Path::new(&root));
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
