//! The source packages build farms take, checked with the farms' own
//! tools: dpkg-source unpacks the `.dsc` with every patch applied and
//! dpkg-buildpackage builds our `.deb` from it, lintian passes it;
//! `rpm` reads the `.src.rpm` as it reads rpmbuild's own and
//! `rpmbuild --rebuild` builds our `.rpm` from it; makepkg builds our Arch
//! package offline from the PKGBUILD and the files beside it.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::build_dkms::EPOCH;
use crate::rebuild::{
    assert_same_arch_package, assert_same_package, assert_same_tree, assignments, copy_into,
    demo_built, dpkg_buildpackage_beside_ours, rpm_sources, run,
};
use crate::support::is_root;
use crate::support::tools::{bsdtar_list, bsdtar_unpack};

const DSC: &str = "patchkit-hello_0.1.0-1.dsc";
const DEBIAN_TAR: &str = "patchkit-hello_0.1.0-1.debian.tar.xz";
const ORIG: &str = "patchkit-hello_0.1.0.orig.tar.gz";
const SRPM: &str = "patchkit-hello-dkms-0.1.0-1.src.rpm";
const PKGNAME: &str = "patchkit-hello-dkms";
const ARCH_SRC: &str = "patchkit-hello-dkms-0.1.0-1.src.tar.gz";

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
    let (sha256, size) = xtask::hash::sha256_file_sized(&dist.join(name)).unwrap();
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

#[test]
fn dpkg_source_unpacks_the_dsc_and_dpkg_buildpackage_builds_our_deb() {
    let Some((p, dist)) = demo_built(
        &["dpkg-source", "dpkg-buildpackage", "dh_dkms", "lintian"],
        "deb",
    ) else {
        return;
    };
    for name in [DSC, DEBIAN_TAR] {
        assert_listed(&dist, &format!("source/{name}"));
    }

    // dpkg-source checks every size and checksum of the .dsc and applies
    // the whole series.
    let work = p.root().join("farm-deb");
    std::fs::create_dir_all(&work).unwrap();
    let log = run(Command::new("dpkg-source")
        .arg("-x")
        .arg(dist.join("source").join(DSC))
        .arg("src")
        .current_dir(&work));
    let src = work.join("src");
    let series = std::fs::read_to_string(dist.join("source/patches/series")).unwrap();
    let applied = std::fs::read_to_string(src.join(".pc/applied-patches")).unwrap();
    assert_eq!(applied, series, "every patch applied, in order:\n{log}");
    for patch in series.lines() {
        assert!(log.contains(&format!("applying {patch}")), "{log}");
    }
    assert!(
        std::fs::metadata(src.join("debian/rules"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111
            != 0,
        "debian/rules is executable"
    );

    // Our .dsc says what dpkg-source itself writes for this tree: the same
    // fields in the same order, the same line for the orig tarball.
    let rebuilt = work.join("rebuilt");
    std::fs::create_dir_all(&rebuilt).unwrap();
    copy_into(&rebuilt, &[dist.join("source").join(ORIG)]);
    run(Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(rebuilt.join("patchkit-hello-0.1.0")));
    run(Command::new("dpkg-source")
        .args(["-b", "patchkit-hello-0.1.0"])
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .current_dir(&rebuilt));
    let ours = dsc_fields(&std::fs::read_to_string(dist.join("source").join(DSC)).unwrap());
    let theirs = dsc_fields(&std::fs::read_to_string(rebuilt.join(DSC)).unwrap());
    let keys = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&ours), keys(&theirs), "field order");
    for ((k, a), (_, b)) in ours.iter().zip(&theirs) {
        if ["Checksums-Sha1", "Checksums-Sha256", "Files"].contains(&k.as_str()) {
            // Two writers compress debian/ differently: the orig line is
            // the same, the debian.tar.xz line names the same file.
            let lines = |v: &str| v.lines().map(str::to_owned).collect::<Vec<_>>();
            let (a, b) = (lines(a), lines(b));
            assert_eq!(a.len(), 3, "{k}: {a:?}");
            assert_eq!(a[1], b[1], "{k}: the orig tarball");
            assert!(a[2].ends_with(DEBIAN_TAR) && b[2].ends_with(DEBIAN_TAR));
        } else {
            assert_eq!(a, b, "field {k}");
        }
    }

    // dpkg-buildpackage in the unpacked source builds a .deb with our
    // files, modes and maintainer scripts.
    let (ours, theirs) = dpkg_buildpackage_beside_ours(&src, &dist, &work, p.root());
    assert_same_tree(&ours, &theirs, &["DEBIAN"]);
    let scripts = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("DEBIAN"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| ["preinst", "postinst", "prerm", "postrm"].contains(&n.as_str()))
            .collect();
        names.sort();
        names
    };
    assert_eq!(scripts(&ours), ["postinst", "prerm"]);
    assert_eq!(scripts(&ours), scripts(&theirs));
    for script in ["postinst", "prerm"] {
        let read = |dir: &Path| std::fs::read_to_string(dir.join("DEBIAN").join(script)).unwrap();
        let (mine, dh) = (assignments(&read(&ours)), assignments(&read(&theirs)));
        assert_eq!(mine["DKMS_NAME"], dh["DKMS_NAME"], "{script}");
        assert_eq!(mine["DKMS_VERSION"], dh["DKMS_VERSION"], "{script}");
    }

    // lintian on the .dsc: no error, no warning; the one tag left is the
    // information that there is no debian/watch (the recipe pins the
    // upstream instead of watching it).
    crate::support::tools::lintian(&dist.join("source").join(DSC))
        .assert_only(Some(&['I']), &["debian-watch-file-is-missing"]);
}

#[test]
fn rpm_reads_the_source_rpm_and_rpmbuild_rebuilds_our_rpm_from_it() {
    let Some((p, dist)) = demo_built(&["rpm", "rpmbuild", "bsdtar"], "rpm") else {
        return;
    };
    let srpm = dist.join(SRPM);
    assert_listed(&dist, SRPM);

    let info = run(Command::new("rpm").arg("-qpi").arg(&srpm));
    let info: BTreeMap<&str, &str> = info
        .lines()
        .filter_map(|l| l.split_once(" : ").or_else(|| l.split_once(": ")))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    assert_eq!(info["Name"], PKGNAME);
    assert_eq!(info["Architecture"], "noarch");
    assert_eq!(
        info["Source RPM"], "(none)",
        "a source rpm names no source rpm"
    );
    let check = run(Command::new("rpm").arg("-K").arg(&srpm));
    assert!(check.trim_end().ends_with("digests OK"), "{check}");

    // The header says what rpmbuild -bs says of the same spec and sources.
    let top = p.root().join("farm-rpm");
    rpm_sources(&dist, &top);
    let (ours, reference) = srpm_beside_rpmbuilds(
        &top,
        &dist.join(format!("packaging/rpm/{PKGNAME}.spec")),
        &srpm,
    );
    assert_eq!(ours, rpm_query(&reference));
    assert_eq!(
        run(Command::new("rpm").args(["-qpl"]).arg(&srpm)),
        run(Command::new("rpm").args(["-qpl"]).arg(&reference))
    );

    // rpmbuild --rebuild builds a binary rpm with our files, metadata and
    // scriptlets.
    let rebuild = p.root().join("farm-rebuild");
    run(Command::new("rpmbuild")
        .arg("--rebuild")
        .arg("--define")
        .arg(format!("_topdir {}", rebuild.display()))
        .arg(&srpm)
        .env("SOURCE_DATE_EPOCH", EPOCH));
    let rpm = format!("{PKGNAME}-0.1.0-1.noarch.rpm");
    let theirs_rpm = rebuild.join("RPMS/noarch").join(&rpm);
    assert_same_package(p.root(), &dist.join(&rpm), &theirs_rpm, &[]);
    let scripts = |pkg: &Path| run(Command::new("rpm").args(["-qp", "--scripts"]).arg(pkg));
    assert_eq!(scripts(&dist.join(&rpm)), scripts(&theirs_rpm));
    let built_from = run(Command::new("rpm")
        .args(["-qp", "--queryformat", "%{SOURCERPM}"])
        .arg(&theirs_rpm));
    assert_eq!(built_from, SRPM);
}

#[test]
fn makepkg_builds_our_arch_package_from_the_arch_source_package() {
    let Some((p, dist)) = demo_built(&["makepkg", "fakeroot", "bsdtar", "pacman"], "arch") else {
        return;
    };
    assert_listed(&dist, ARCH_SRC);
    assert_listed(&dist, "packaging/arch/.SRCINFO");
    // makepkg refuses to run as root: as root, build as `nobody` in a
    // folder it owns, outside the project's private temporary folder.
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    bsdtar_unpack(&dist.join(ARCH_SRC), outside.path());
    let work = outside.path().join(PKGNAME);
    let makepkg = |args: &[&str]| makepkg_in(outside.path(), &work, args);
    // Our .SRCINFO is what makepkg prints for our PKGBUILD.
    let printed = makepkg(&["--printsrcinfo"]);
    assert_eq!(
        std::fs::read_to_string(work.join(".SRCINFO")).unwrap(),
        printed
    );
    assert_eq!(
        std::fs::read_to_string(work.join(".SRCINFO")).unwrap(),
        std::fs::read_to_string(dist.join("packaging/arch/.SRCINFO")).unwrap()
    );
    // makepkg checks every sha256sum against the files beside the
    // PKGBUILD, offline, and builds our package.
    let log = makepkg(&["--nodeps", "--noconfirm"]);
    assert!(
        log.contains("Validating source files with sha256sums"),
        "{log}"
    );
    let pkg = assert_same_arch_package(p.root(), &dist, &work);
    // makepkg --source packs the same files we did.
    std::fs::remove_file(work.join(&pkg)).unwrap();
    makepkg(&["--source", "--nodeps"]);
    let list = |file: &Path| {
        let mut names: Vec<String> = bsdtar_list(file).lines().map(str::to_owned).collect();
        names.sort();
        names
    };
    assert_eq!(list(&dist.join(ARCH_SRC)), list(&work.join(ARCH_SRC)));
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
/// `<top>/SOURCES`, and returns our source rpm's query and the path of the
/// one rpmbuild made (named as ours).
pub(crate) fn srpm_beside_rpmbuilds(
    top: &Path,
    spec: &Path,
    ours: &Path,
) -> (String, std::path::PathBuf) {
    run(Command::new("rpmbuild")
        .arg("-bs")
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg(spec)
        .env("SOURCE_DATE_EPOCH", EPOCH));
    let reference = top.join("SRPMS").join(ours.file_name().unwrap());
    (rpm_query(ours), reference)
}

/// What `rpm -qp` says of a (source) rpm: its names, metadata, sources,
/// patches, files and relations. rpmbuild records the files' own times and
/// its host; ours are SOURCE_DATE_EPOCH and rocm-patchkit, so times and
/// host are not part of the query.
pub(crate) fn rpm_query(pkg: &Path) -> String {
    run(Command::new("rpm")
        .args([
            "-qp",
            "--queryformat",
            "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{OS} %{SOURCEPACKAGE} %{SOURCERPM} \
             %{LICENSE} %{URL} %{GROUP} %{SIZE} %{BUILDARCHS}\n%{SUMMARY}\n%{DESCRIPTION}\n\
             [source %{SOURCE}\n][patch %{PATCH}\n][file %{FILENAMES} %{FILEMODES:octal} \
             %{FILESIZES} %{FILEFLAGS} %{FILEDIGESTS}\n][requires %{REQUIRENAME} %{REQUIREFLAGS} \
             %{REQUIREVERSION}\n][provides %{PROVIDENAME} %{PROVIDEVERSION}\n]",
        ])
        .arg(pkg))
}
