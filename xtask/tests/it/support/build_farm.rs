//! The build farm of the source-package tests: each distribution's own
//! tools taking our source packages (dpkg-source -x and -b, rpmbuild -bs
//! and --rebuild, makepkg in an `ArchFarm`), and what they must read there.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::demo::EPOCH;
use crate::support::is_root;
use crate::support::rebuild::{copy_into, rpm_queryformat};
use crate::support::tools::stdout_and_stderr as run;
use crate::support::tools::{bsdtar_list, bsdtar_unpack};

/// The file names of a Debian source package in `dist/source/`.
pub(crate) struct DebSource {
    /// The `.dsc`.
    pub(crate) dsc: &'static str,
    /// The `debian.tar.xz` the `.dsc` names.
    pub(crate) debian_tar: &'static str,
    /// The pristine `orig.tar.gz`.
    pub(crate) orig: &'static str,
    /// The folder `dpkg-source -b` is run on (`<source>-<upstream version>`).
    pub(crate) dir: &'static str,
}

/// deb822 fields of a `.dsc`, in order.
pub(crate) fn dsc_fields(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(' ') {
            let last = out.last_mut().expect("a continuation after a field");
            last.1.push('\n');
            last.1.push_str(rest);
        } else if let Some((k, v)) = line.split_once(':') {
            out.push((k.to_owned(), v.trim().to_owned()));
        }
    }
    out
}

/// `name` (relative to the dist folder) is in `SHA256SUMS` and in the
/// manifest's outputs with its real size and sha256.
pub(crate) fn assert_listed(dist: &Path, name: &str) {
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    let (sha256, size) = xtask::shared::hash::sha256_file_sized(&dist.join(name)).unwrap();
    assert!(
        sums.contains(&format!("{sha256}  {name}\n")),
        "SHA256SUMS lists {name}:\n{sums}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["outputs"][name]["sha256"],
        sha256.as_str(),
        "{name}"
    );
    assert_eq!(manifest["outputs"][name]["size"], size, "{name}");
}

/// `dpkg-source -x` of our `.dsc` into `<work>/src`: dpkg-source checks
/// every size and checksum of the `.dsc` and applies the whole series.
/// Asserts every patch of `source/patches/series` is applied, in order,
/// and that `debian/rules` is executable; returns the unpacked tree and
/// what dpkg-source printed.
pub(crate) fn dpkg_source_unpacks(
    dist: &Path,
    names: &DebSource,
    work: &Path,
) -> (PathBuf, String) {
    std::fs::create_dir_all(work).unwrap();
    let log = run(Command::new("dpkg-source")
        .arg("-x")
        .arg(dist.join("source").join(names.dsc))
        .arg("src")
        .current_dir(work));
    let src = work.join("src");
    let series = std::fs::read_to_string(dist.join("source/patches/series")).unwrap();
    let applied = std::fs::read_to_string(src.join(".pc/applied-patches")).unwrap();
    assert_eq!(applied, series, "every patch applied, in order:\n{log}");
    for patch in series.lines() {
        assert!(log.contains(&format!("applying {patch}")), "{log}");
    }
    let rules = std::fs::metadata(src.join("debian/rules")).unwrap();
    assert!(
        rules.permissions().mode() & 0o111 != 0,
        "debian/rules is executable"
    );
    (src, log)
}

/// Asserts our `.dsc` says what `dpkg-source -b` itself writes for the
/// unpacked tree `src` beside our orig tarball (in `<work>/rebuilt`): the
/// same fields in the same order, the same line for the orig tarball, a
/// line naming the same debian tarball (two writers compress debian/
/// differently).
pub(crate) fn assert_dsc_as_dpkg_source_writes(
    dist: &Path,
    names: &DebSource,
    work: &Path,
    src: &Path,
) {
    let rebuilt = work.join("rebuilt");
    copy_into(&rebuilt, &[dist.join("source").join(names.orig)]);
    run(Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(rebuilt.join(names.dir)));
    run(Command::new("dpkg-source")
        .args(["-b", names.dir])
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .current_dir(&rebuilt));
    let read = |path: PathBuf| dsc_fields(&std::fs::read_to_string(path).unwrap());
    let ours = read(dist.join("source").join(names.dsc));
    let theirs = read(rebuilt.join(names.dsc));
    let keys = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&ours), keys(&theirs), "field order");
    for ((k, a), (_, b)) in ours.iter().zip(&theirs) {
        if ["Checksums-Sha1", "Checksums-Sha256", "Files"].contains(&k.as_str()) {
            let lines = |v: &str| v.lines().map(str::to_owned).collect::<Vec<_>>();
            let (a, b) = (lines(a), lines(b));
            assert_eq!(a.len(), 3, "{k}: {a:?}");
            assert_eq!(a[1], b[1], "{k}: the orig tarball");
            assert!(
                a[2].ends_with(names.debian_tar) && b[2].ends_with(names.debian_tar),
                "{k}: the debian tarball: {a:?} {b:?}"
            );
        } else {
            assert_eq!(a, b, "field {k}");
        }
    }
}

/// Asserts `rpm -qpi` reads `srpm` as a noarch source rpm named `name` and
/// `rpm -K` finds its digests OK.
pub(crate) fn assert_source_rpm_header(srpm: &Path, name: &str) {
    let info = run(Command::new("rpm").arg("-qpi").arg(srpm));
    let fields: BTreeMap<&str, &str> = info
        .lines()
        .filter_map(|l| l.split_once(" : ").or_else(|| l.split_once(": ")))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    assert_eq!(fields["Name"], name, "{info}");
    assert_eq!(fields["Architecture"], "noarch");
    assert_eq!(
        fields["Source RPM"], "(none)",
        "a source rpm names no source rpm"
    );
    let check = run(Command::new("rpm").arg("-K").arg(srpm));
    assert!(check.trim_end().ends_with("digests OK"), "{check}");
}

/// `rpmbuild --rebuild <srpm>` below `top`: returns the binary rpm named
/// `rpm` it built, after asserting that rpm names `srpm` as its source.
pub(crate) fn rpmbuild_rebuilds(srpm: &Path, top: &Path, rpm: &str) -> PathBuf {
    run(Command::new("rpmbuild")
        .arg("--rebuild")
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg(srpm)
        .env("SOURCE_DATE_EPOCH", EPOCH));
    let theirs = top.join("RPMS/noarch").join(rpm);
    let built_from = rpm_queryformat(&theirs, "%{SOURCERPM}");
    assert_eq!(built_from, srpm.file_name().unwrap().to_str().unwrap());
    theirs
}

/// An Arch source package unpacked for makepkg in a folder outside the
/// project's private temporary folder: makepkg refuses to run as root, so
/// as root it builds as `nobody`, who is given that folder.
pub(crate) struct ArchFarm {
    outside: tempfile::TempDir,
    /// The package's folder: the PKGBUILD and the files beside it.
    pub(crate) work: PathBuf,
}

impl ArchFarm {
    /// `bsdtar -xf <source package>` into a fresh folder; `pkgname` is the
    /// folder the source package holds.
    pub(crate) fn unpack(source_package: &Path, pkgname: &str) -> ArchFarm {
        let outside = tempfile::tempdir().unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        bsdtar_unpack(source_package, outside.path());
        let work = outside.path().join(pkgname);
        ArchFarm { outside, work }
    }

    /// `makepkg <args>` in the package's folder: what it printed.
    pub(crate) fn makepkg(&self, args: &[&str]) -> String {
        makepkg_in(self.outside.path(), &self.work, args)
    }

    /// Asserts our `.SRCINFO` is what makepkg prints for our PKGBUILD and
    /// what dist publishes beside the packaging files; returns it.
    pub(crate) fn assert_srcinfo_is_makepkgs(&self, dist: &Path) -> String {
        let srcinfo = std::fs::read_to_string(self.work.join(".SRCINFO")).unwrap();
        assert_eq!(srcinfo, self.makepkg(&["--printsrcinfo"]));
        assert_eq!(
            srcinfo,
            std::fs::read_to_string(dist.join("packaging/arch/.SRCINFO")).unwrap()
        );
        srcinfo
    }

    /// makepkg checks every sha256sum against the files beside the
    /// PKGBUILD, offline, and builds the package.
    pub(crate) fn build(&self) {
        let log = self.makepkg(&["--nodeps", "--noconfirm"]);
        assert!(
            log.contains("Validating source files with sha256sums"),
            "{log}"
        );
    }

    /// Asserts `makepkg --source` (once the package `pkg` it built is
    /// gone) packs the same files as our `<dist>/<source_package>`.
    pub(crate) fn assert_source_packs_ours(&self, dist: &Path, source_package: &str, pkg: &str) {
        std::fs::remove_file(self.work.join(pkg)).unwrap();
        self.makepkg(&["--source", "--nodeps"]);
        let list = |file: &Path| {
            let mut names: Vec<String> = bsdtar_list(file).lines().map(str::to_owned).collect();
            names.sort();
            names
        };
        assert_eq!(
            list(&dist.join(source_package)),
            list(&self.work.join(source_package))
        );
    }
}

/// `makepkg <args>` in `work` below `outside` (a folder outside the
/// project's private temporary folder): makepkg refuses to run as root, so
/// as root it runs as `nobody`, who is given `outside` first.
pub(crate) fn makepkg_in(outside: &Path, work: &Path, args: &[&str]) -> String {
    let mut c = if is_root() {
        run(Command::new("chown").args(["-R", "nobody:"]).arg(outside));
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--", "makepkg"]);
        c
    } else {
        Command::new("makepkg")
    };
    run(c
        .args(args)
        .env("HOME", work)
        .env("PKGEXT", ".pkg.tar.zst")
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .current_dir(work))
}

/// Runs `rpmbuild -bs` on `spec` with the sources already in
/// `<top>/SOURCES` and asserts our source rpm `ours` says what rpmbuild's
/// says (see [`rpm_query`]) and lists the same files; returns our query.
pub(crate) fn assert_srpm_as_rpmbuild_bs(top: &Path, spec: &Path, ours: &Path) -> String {
    run(Command::new("rpmbuild")
        .arg("-bs")
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg(spec)
        .env("SOURCE_DATE_EPOCH", EPOCH));
    let reference = top.join("SRPMS").join(ours.file_name().unwrap());
    let query = rpm_query(ours);
    assert_eq!(query, rpm_query(&reference));
    assert_eq!(
        run(Command::new("rpm").args(["-qpl"]).arg(ours)),
        run(Command::new("rpm").args(["-qpl"]).arg(&reference))
    );
    query
}

/// What `rpm -qp` says of a (source) rpm: its names, metadata, sources,
/// patches, files and relations. rpmbuild records the files' own times and
/// its host; ours are SOURCE_DATE_EPOCH and rocm-patchkit, so times and
/// host are not part of the query.
pub(crate) fn rpm_query(pkg: &Path) -> String {
    rpm_queryformat(
        pkg,
        "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{OS} %{SOURCEPACKAGE} %{SOURCERPM} \
             %{LICENSE} %{URL} %{GROUP} %{SIZE} %{BUILDARCHS}\n%{SUMMARY}\n%{DESCRIPTION}\n\
             [source %{SOURCE}\n][patch %{PATCH}\n][file %{FILENAMES} %{FILEMODES:octal} \
             %{FILESIZES} %{FILEFLAGS} %{FILEDIGESTS}\n][requires %{REQUIRENAME} %{REQUIREFLAGS} \
             %{REQUIREVERSION}\n][provides %{PROVIDENAME} %{PROVIDEVERSION}\n]",
    )
}
