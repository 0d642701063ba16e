//! Every file name a build publishes, in one place: the plan names the
//! outputs with the very functions the writers name their files with.

use super::{Architecture, Format, PackageMeta};

/// The binary package of `format`, as its [`super::PackageFormat`] names it:
/// `<name>_<version>-<release>_<arch>.deb`,
/// `<name>-<version>-<release>.<arch>.rpm`,
/// `<name>-<version>-<release>-<arch>.pkg.tar.zst`, or the DKMS tarball
/// `<module>-<version>-source-only.dkms.tar.gz`.
pub fn file_name(format: Format, meta: &PackageMeta, machine: Architecture) -> String {
    format.get().file_name(meta, machine)
}

/// The source packages published beside a binary package of `format`, as
/// paths in the publication: `source/<src>_<version>-<release>.dsc` and
/// `.debian.tar.xz`, `<name>-<version>-<release>.src.rpm`,
/// `<name>-<version>-<release>.src.tar.gz` (what `makepkg --source` makes).
pub(crate) fn source_packages(format: Format, meta: &PackageMeta) -> Vec<String> {
    format.get().source_packages(meta)
}

/// The upstream (source) name: the meta's `source`, else its name.
pub(crate) fn source_name(meta: &PackageMeta) -> &str {
    meta.source.as_deref().unwrap_or(&meta.name)
}

/// `<src>_<version>-<revision>.dsc`
pub(crate) fn dsc(source: &str, version: &str, revision: &str) -> String {
    format!("{source}_{version}-{revision}.dsc")
}

/// `<src>_<version>-<revision>.debian.tar.xz`
pub(crate) fn debian_tar(source: &str, version: &str, revision: &str) -> String {
    format!("{source}_{version}-{revision}.debian.tar.xz")
}

/// `<name>-<version>-<release>.src.rpm`
pub(crate) fn srpm(meta: &PackageMeta) -> String {
    format!(
        "{}-{}-{}.src.rpm",
        meta.name, meta.about.version, meta.about.release
    )
}

/// `<name>-<version>-<release>.src.tar.gz`
pub(crate) fn arch_source(meta: &PackageMeta) -> String {
    format!("{}-{}.src.tar.gz", meta.name, meta.full_version())
}

/// `<module>-<version>-source-only.dkms.tar.gz`
pub(crate) fn dkms_tarball(module: &str, version: &str) -> String {
    format!("{module}-{version}-source-only.dkms.tar.gz")
}

/// `<module>-dkms`, the DKMS package name every format uses.
pub fn dkms_package(module: &str) -> String {
    format!("{module}-dkms")
}

/// `usr/src/<module>-<version>`, where DKMS expects the source.
pub fn dkms_source_dir(module: &str, version: &str) -> String {
    format!("usr/src/{module}-{version}")
}

/// The rendered packaging files, as paths in the publication's
/// `packaging/` folder (and the keys of a rendering): `dkms.conf`.
pub(crate) const DKMS_CONF: &str = "dkms.conf";
/// `arch/PKGBUILD`
pub(crate) const PKGBUILD: &str = "arch/PKGBUILD";
/// `arch/.SRCINFO`, read back from the PKGBUILD.
pub(crate) const SRCINFO: &str = "arch/.SRCINFO";
/// `debian/copyright`
pub(crate) const DEBIAN_COPYRIGHT: &str = "debian/copyright";
/// `debian/changelog`
pub(crate) const DEBIAN_CHANGELOG: &str = "debian/changelog";

/// `rpm/<pkgname>.spec`
pub(crate) fn spec(pkgname: &str) -> String {
    format!("rpm/{pkgname}.spec")
}

/// `arch/<pkgname>.install`
pub(crate) fn arch_install(pkgname: &str) -> String {
    format!("arch/{pkgname}.install")
}

/// `debian/<pkgname>.dkms`: dh_dkms's copy of `dkms.conf`.
pub(crate) fn debian_dkms(pkgname: &str) -> String {
    format!("debian/{pkgname}.dkms")
}

/// `debian/<name>.lintian-overrides`
pub(crate) fn debian_lintian_overrides(name: &str) -> String {
    format!("debian/{name}.lintian-overrides")
}

/// `<name>_<version>.orig.tar.gz`: the pristine upstream source.
pub(crate) fn orig(name: &str, version: &str) -> String {
    format!("{name}_{version}.orig.tar.gz")
}

/// `<name>-<version>-patched.tar.gz`: the patched tree.
pub(crate) fn patched(name: &str, version: &str) -> String {
    format!("{name}-{version}-patched.tar.gz")
}
