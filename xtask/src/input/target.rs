//! The build target: which kernel a DKMS build is for, and the
//! `SOURCE_DATE_EPOCH` every date in `dist/` is taken from.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::input::kernel::KernelVersion;
use crate::input::recipe::Recipe;
use crate::shared::diag::UsageError;
use crate::shared::settings::Environment;

/// The kernel release to build for: `--kernel`, else the newest release
/// with headers under `<modules>/*/build`, else the running kernel.
pub fn pick_kernel(explicit: Option<&str>, modules: &Path) -> Result<String> {
    if let Some(release) = explicit {
        return Ok(release.to_owned());
    }
    let mut with_headers: Vec<(KernelVersion, String)> = std::fs::read_dir(modules)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("build").is_dir())
        .filter_map(|e| {
            let release = e.file_name().into_string().ok()?;
            Some((KernelVersion::from_release(&release)?, release))
        })
        .collect();
    with_headers.sort();
    if let Some((_, release)) = with_headers.pop() {
        return Ok(release);
    }
    let uname = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .context("reading the running kernel's release")?;
    Ok(uname.trim().to_owned())
}

/// Refuses a kernel outside the recipe's range, saying which range and
/// what to do.
pub fn check_kernel(recipe: &Recipe, release: &str) -> Result<()> {
    let version = KernelVersion::from_release(release).ok_or_else(|| {
        UsageError(format!(
            "`{release}` is not a kernel release such as 6.12.117+deb12-amd64"
        ))
    })?;
    if let Some(range) = &recipe.target.kernel {
        if !range.matches(version) {
            return Err(UsageError(format!(
                "kernel {release} is outside the range of recipe {} ({}): pick another recipe with \
                 `cargo xtask list`, or pass --kernel with a release in that range",
                recipe.name,
                range.as_str()
            ))
            .into());
        }
    }
    Ok(())
}

/// `SOURCE_DATE_EPOCH` from the environment, else the commit time of the
/// project's `HEAD` (so a clean checkout rebuilds byte for byte), else an
/// error that says to set it.
pub(crate) fn source_date_epoch(root: &Path, env: &Environment) -> Result<i64> {
    if let Some(epoch) = epoch_of(env)? {
        return Ok(epoch);
    }
    let repo = git2::Repository::discover(root).map_err(|_| {
        UsageError(
            "SOURCE_DATE_EPOCH is unset and the project is not a git checkout: set it".to_owned(),
        )
    })?;
    let head = repo.head().and_then(|h| h.peel_to_commit()).map_err(|_| {
        UsageError(
            "SOURCE_DATE_EPOCH is unset and the project has no commit yet: set it or commit"
                .to_owned(),
        )
    })?;
    Ok(head.time().seconds())
}

/// `SOURCE_DATE_EPOCH` of `env`, when set (as UTF-8 text): seconds since
/// 1970, or invalid input naming the variable.
pub(crate) fn epoch_of(env: &Environment) -> Result<Option<i64>> {
    let Some(value) = env.get("SOURCE_DATE_EPOCH").and_then(|v| v.to_str()) else {
        return Ok(None);
    };
    let shown = crate::shared::report::safe(value);
    let epoch: i64 = value.trim().parse().map_err(|_| {
        UsageError(format!(
            "SOURCE_DATE_EPOCH=`{shown}` is not a number of seconds since 1970"
        ))
    })?;
    if epoch < 0 {
        bail!(UsageError(format!(
            "SOURCE_DATE_EPOCH=`{shown}` is before 1970"
        )));
    }
    Ok(Some(epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_release_with_headers_wins() {
        let dir = tempfile::tempdir().unwrap();
        for release in [
            "6.1.0-56-amd64",
            "6.12.117+deb12-amd64",
            "6.14.0-36-generic",
        ] {
            std::fs::create_dir_all(dir.path().join(release)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("6.12.117+deb12-amd64/build")).unwrap();
        std::fs::create_dir_all(dir.path().join("6.1.0-56-amd64/build")).unwrap();
        assert_eq!(
            pick_kernel(None, dir.path()).unwrap(),
            "6.12.117+deb12-amd64"
        );
        assert_eq!(
            pick_kernel(Some("6.14.0-36-generic"), dir.path()).unwrap(),
            "6.14.0-36-generic"
        );
    }
}
