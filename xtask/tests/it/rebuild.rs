//! The packager's files in `dist/` rebuild with each distribution's own
//! tools, following docs/packages.md, "Rebuilding with your distribution's tools":
//! dpkg-buildpackage (debhelper + dh_dkms), rpmbuild and makepkg each make a
//! package that installs exactly the files of ours, with the same metadata
//! and maintainer scripts that do the same.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::demo::EPOCH;
use crate::support::rebuild::{
    assert_same_arch_package, assert_same_package, assert_same_tree, assignments, copy_into,
    demo_built, dpkg_buildpackage_beside_ours, pacman_fields, patches, rpm_queryformat,
    rpm_scripts, rpm_sources, ORIG, PACMAN_FIELDS, PKGNAME, SOURCE_DIR,
};
use crate::support::tools::stdout_and_stderr as run;

#[test]
fn dpkg_buildpackage_rebuilds_our_deb_from_the_packaging_files() {
    let Some((p, dist)) = demo_built(
        &["dpkg-buildpackage", "dh", "dh_dkms", "dpkg-deb", "lintian"],
        "deb",
    ) else {
        return;
    };
    let work = p.root().join("rebuild-deb");
    copy_into(&work, &[dist.join("source").join(ORIG)]);
    run(Command::new("tar").args(["xf", ORIG]).current_dir(&work));
    let src = work.join(SOURCE_DIR);
    run(Command::new("cp")
        .arg("-r")
        .arg(dist.join("packaging/debian"))
        .arg(src.join("debian")));
    run(Command::new("cp")
        .arg("-r")
        .arg(dist.join("source/patches"))
        .arg(src.join("debian/patches")));
    let (ours, theirs) = dpkg_buildpackage_beside_ours(&src, &dist, &work, p.root());
    // The installed files, copyright, changelog and lintian overrides
    // included, are the same; the control area is compared field by field.
    assert_same_tree(&ours, &theirs, &["DEBIAN"]);
    let fields = |dir: &Path| -> BTreeMap<String, String> {
        std::fs::read_to_string(dir.join("DEBIAN/control"))
            .unwrap()
            .split("\nDescription:")
            .next()
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let (mut a, mut b) = (fields(&ours), fields(&theirs));
    // dh_dkms writes `dkms (>= 2.1.0.0)`; ours says `dkms`.
    assert!(a.remove("Depends").unwrap().starts_with("dkms"));
    assert!(b.remove("Depends").unwrap().starts_with("dkms"));
    assert_eq!(a, b, "control fields");
    assert_eq!(a["Source"], "patchkit-hello");
    let description = |dir: &Path| {
        let text = std::fs::read_to_string(dir.join("DEBIAN/control")).unwrap();
        text[text.find("\nDescription:").unwrap()..].to_owned()
    };
    assert_eq!(description(&ours), description(&theirs));
    assert_eq!(
        std::fs::read(ours.join("DEBIAN/md5sums")).unwrap(),
        std::fs::read(theirs.join("DEBIAN/md5sums")).unwrap(),
        "md5sums"
    );

    // Our maintainer scripts do what dh_dkms's do: the same module and
    // version through common.postinst on configure, `dkms remove` on remove.
    for (script, does) in [
        ("postinst", "/usr/lib/dkms/common.postinst"),
        ("prerm", "dkms remove"),
    ] {
        let read = |dir: &Path| std::fs::read_to_string(dir.join("DEBIAN").join(script)).unwrap();
        let (mine, dh) = (read(&ours), read(&theirs));
        assert!(dh.contains("dh_dkms"), "{script} of the rebuild:\n{dh}");
        assert!(mine.contains(does) && dh.contains(does), "{script}");
        let (mine, dh) = (assignments(&mine), assignments(&dh));
        assert_eq!(mine["DKMS_NAME"], "patchkit-hello");
        assert_eq!(mine["DKMS_NAME"], dh["DKMS_NAME"], "{script}");
        assert_eq!(mine["DKMS_VERSION"], dh["DKMS_VERSION"], "{script}");
    }

    // The packager's source and binary packages pass lintian as ours does.
    let changes = work.join("patchkit-hello_0.1.0-1_amd64.changes");
    // A source package without a debian/watch is what a DKMS recipe is: the
    // upstream is pinned by the recipe, not watched.
    crate::support::tools::lintian(&changes).assert_only(None, &["debian-watch-file-is-missing"]);
}

#[test]
fn rpmbuild_rebuilds_our_rpm_from_the_spec() {
    let Some((p, dist)) = demo_built(&["rpmbuild", "rpm", "bsdtar"], "rpm") else {
        return;
    };
    let top = p.root().join("rebuild-rpm");
    let sources = rpm_sources(&dist, &top);
    run(Command::new("rpmbuild")
        .arg("-bb")
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg("--define")
        .arg(format!("_sourcedir {}", sources.display()))
        .arg(dist.join(format!("packaging/rpm/{PKGNAME}.spec")))
        .env("SOURCE_DATE_EPOCH", EPOCH));

    let rpm = format!("{PKGNAME}-0.1.0-1.noarch.rpm");
    let theirs_rpm = top.join("RPMS/noarch").join(&rpm);
    assert_same_package(p.root(), &dist.join(&rpm), &theirs_rpm, &[]);
    let query = |pkg: &Path| {
        rpm_queryformat(
            pkg,
            "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE} %{URL}\n%{SUMMARY}\n%{DESCRIPTION}\n[%{REQUIRENAME} %{REQUIREFLAGS:deptype}\n]",
        )
    };
    let requires = |text: String| {
        // Each rpm names the rpmlib() features its own payload needs.
        text.lines()
            .filter(|l| !l.starts_with("rpmlib("))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        requires(query(&dist.join(&rpm))),
        requires(query(&theirs_rpm))
    );
    assert_eq!(rpm_scripts(&dist.join(&rpm)), rpm_scripts(&theirs_rpm));
}

#[test]
fn makepkg_rebuilds_our_arch_package_from_the_pkgbuild() {
    let Some((p, dist)) = demo_built(&["makepkg", "fakeroot", "bsdtar", "pacman"], "arch") else {
        return;
    };
    // makepkg refuses to run as root: as root, build as `nobody` in a
    // folder it owns, outside the project's private temporary folder.
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = outside.path().join("arch");
    let mut files = vec![
        dist.join("packaging/arch/PKGBUILD"),
        dist.join(format!("packaging/arch/{PKGNAME}.install")),
        dist.join("packaging/dkms.conf"),
        dist.join("source").join(ORIG),
    ];
    files.extend(patches(&dist));
    copy_into(&work, &files);
    // --nodeps: the dkms dependency is for installing, and this machine's
    // pacman knows no packages.
    crate::support::build_farm::makepkg_in(outside.path(), &work, &["--nodeps", "--noconfirm"]);

    let pkg = assert_same_arch_package(p.root(), &dist, &work);
    let keys = [&PACMAN_FIELDS[..], &["Depends On", "Installed Size"]].concat();
    let info = |file: &Path| pacman_fields(file, &keys);
    let ours_info = info(&dist.join(&pkg));
    assert_eq!(ours_info.len(), 8, "{ours_info:?}");
    assert_eq!(ours_info, info(&work.join(&pkg)));
}
