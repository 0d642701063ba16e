//! The packaging files a build renders from `templates/`: those of a DKMS
//! recipe ([`dkms`]) and of a config recipe ([`config`]), and what both
//! share (the Debian packager's documents, the source line, the year).
//! Pure: no I/O beyond reading the templates.

pub mod config_files;
pub mod dkms_files;

use anyhow::Result;

use crate::formats::{deb, names, PackageMeta};
use crate::input::recipe::Source;
use crate::release::render::Rendered;

/// The Debian packager's `debian/copyright`, `debian/changelog` and
/// `debian/<package>.lintian-overrides`: the very texts the `.deb` carries,
/// so a package rebuilt with dpkg-buildpackage documents itself as ours.
pub(crate) fn debian_docs(meta: &PackageMeta, epoch: u64) -> Result<Rendered> {
    let mut out = Rendered::new();
    out.insert(names::DEBIAN_COPYRIGHT.to_owned(), deb::copyright(meta)?);
    out.insert(
        names::DEBIAN_CHANGELOG.to_owned(),
        deb::changelog(meta, epoch),
    );
    if let Some(text) = deb::lintian_overrides(meta) {
        out.insert(names::debian_lintian_overrides(&meta.name), text);
    }
    Ok(out)
}

/// Where a recipe's source comes from, in words, for the changelog.
pub(crate) fn source_line(source: &Source) -> String {
    match source {
        Source::Git { url, commit, .. } => format!(
            "{url} at {}",
            commit.as_deref().unwrap_or("an unpinned commit")
        ),
        Source::Tarball { url, sha256, .. } => {
            format!("{url} (sha256 {})", sha256.as_deref().unwrap_or("unpinned"))
        }
        Source::Local { path, sha256, .. } => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            match sha256 {
                Some(sha256) => format!("the local source {name} (sha256 {sha256})"),
                None => format!("the local source {name}"),
            }
        }
        Source::Deb(deb) => format!("{} (sha256 {})", deb.file_name(), deb.sha256),
    }
}

/// The calendar year (UTC) of `epoch`.
pub(crate) fn year(epoch: i64) -> i64 {
    crate::formats::civil_from_days(epoch.div_euclid(86400)).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn years_are_utc() {
        assert_eq!(year(1767225599), 2025);
        assert_eq!(year(1767225600), 2026);
        assert_eq!(year(0), 1970);
    }
}
