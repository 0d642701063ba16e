//! Drift: checks a recipe's series against a newer upstream (a local git
//! commit, an archive, a folder) and says for each patch whether upstream
//! already carries it (drop it), it still applies, or it conflicts (refresh
//! it), with the hunks that failed. Writes only to a scratch folder.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::apply::extract::{self, Selection};
use crate::apply::patch::{self, Check, PatchInput, PatchState, Tolerance};
use crate::input::recipe::Recipe;
use crate::shared::report::Reporter;

/// What a series is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Against {
    /// A commit of a local git repository (bare or not).
    Git { repo: PathBuf, commit: String },
    /// A tar, tar.gz, tar.xz or tar.zst archive; the recipe's `strip` and
    /// `include` apply.
    Archive(PathBuf),
    /// A folder holding the tree, checked in place.
    Dir(PathBuf),
}

impl Against {
    /// `git:<repo>#<commit>`, `<repo>@<commit>` (when `<repo>` is a git
    /// repository), an archive path or a folder.
    pub(crate) fn parse(spec: &str) -> Result<Against> {
        if let Some(rest) = spec.strip_prefix("git:") {
            let (repo, commit) = rest
                .rsplit_once('#')
                .with_context(|| format!("`{spec}`: write `git:<repo>#<commit>`"))?;
            return Ok(Against::Git {
                repo: repo.into(),
                commit: commit.to_owned(),
            });
        }
        if spec.starts_with("http://") || spec.starts_with("https://") {
            bail!(
                "`{spec}`: drift reads local upstreams only; download the archive (or clone the \
                 repository) and pass its path, or `git:<repo>#<commit>`"
            );
        }
        if let Some((repo, commit)) = spec.rsplit_once('@') {
            if Path::new(repo).is_dir() && git2::Repository::open(repo).is_ok() {
                return Ok(Against::Git {
                    repo: repo.into(),
                    commit: commit.to_owned(),
                });
            }
        }
        let path = PathBuf::from(spec);
        if path.is_dir() {
            Ok(Against::Dir(path))
        } else if path.is_file() {
            Ok(Against::Archive(path))
        } else {
            bail!("`{spec}` is neither a folder, an archive nor `git:<repo>#<commit>`")
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct DriftReport {
    pub(crate) recipe: String,
    pub(crate) against: String,
    pub(crate) checks: Vec<Check>,
}

impl DriftReport {
    /// Whether the series applies to the upstream as it is.
    pub(crate) fn applies(&self) -> bool {
        self.checks
            .iter()
            .all(|c| c.verdict == PatchState::NotApplied)
    }
}

/// Checks the series of `recipe` against `against`, with a commit resolved
/// in a git repository (a full id, a tag or a branch).
pub(crate) fn drift(
    recipe: &Recipe,
    series: &[PatchInput],
    against: &Against,
    scratch: &Path,
    limits: crate::apply::extract::Limits,
    tol: Tolerance,
    reporter: &Reporter,
) -> Result<DriftReport> {
    let selection = Selection::of(&recipe.source);
    let temp;
    let root: &Path = match against {
        Against::Dir(dir) => dir,
        Against::Archive(path) => {
            temp = scratch_dir(scratch)?;
            extract::archive(path, &selection, temp.path(), limits, reporter)?;
            temp.path()
        }
        Against::Git { repo, commit } => {
            temp = scratch_dir(scratch)?;
            let repository = git2::Repository::open(repo)
                .with_context(|| format!("opening git repository {}", repo.display()))?;
            let id = repository
                .revparse_single(commit)
                .and_then(|o| o.peel_to_commit())
                .with_context(|| format!("no commit `{commit}` in {}", repo.display()))?
                .id()
                .to_string();
            let mut paths = selection.paths.clone();
            if paths.is_empty() {
                let literal = |g: &String| !g.contains(['*', '?', '[', '{']);
                paths = selection
                    .include
                    .iter()
                    .filter(|g| literal(g))
                    .cloned()
                    .collect();
            }
            extract::git(repo, &id, &paths, temp.path(), limits, reporter)?;
            temp.path()
        }
    };
    reporter.step(format!(
        "drift: checking {} patches against {}",
        series.len(),
        root.display()
    ));
    let checks = patch::apply::check(root, series, tol)?;
    Ok(DriftReport {
        recipe: recipe.name.clone(),
        against: describe(against),
        checks,
    })
}

fn scratch_dir(parent: &Path) -> Result<tempfile::TempDir> {
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    tempfile::Builder::new()
        .prefix("drift-")
        .tempdir_in(parent)
        .with_context(|| format!("creating a scratch folder in {}", parent.display()))
}

fn describe(against: &Against) -> String {
    match against {
        Against::Git { repo, commit } => format!("git:{}#{commit}", repo.display()),
        Against::Archive(p) | Against::Dir(p) => p.display().to_string(),
    }
}

/// Text lines for a list of checks: one verdict per patch, then its failing hunks.
pub(crate) fn checks_to_text(checks: &[Check]) -> String {
    let mut out = String::new();
    for check in checks {
        out.push_str(&format!("{:<12} {}\n", check.verdict.as_str(), check.patch));
        for h in &check.placements {
            let fuzz = if h.fuzz == 0 {
                String::new()
            } else {
                format!(" with fuzz {}", h.fuzz)
            };
            out.push_str(&format!(
                "    {}: hunk #{} lands at line {} (offset {:+}){fuzz}\n",
                h.file, h.hunk, h.line, h.offset
            ));
        }
        for file in &check.failures {
            if let Some(blob) = &file.blob {
                out.push_str(&format!("    {}: {blob}\n", file.file));
            }
            match &file.problem {
                Some(p) => out.push_str(&format!("    {}: {p}\n", file.file)),
                None => {
                    for h in &file.hunks {
                        out.push_str(&format!("    {}: {h}\n", file.file));
                    }
                }
            }
        }
    }
    out
}
