//! The source packages build farms take, checked with the farms' own
//! tools: dpkg-source unpacks the `.dsc` with every patch applied and
//! dpkg-buildpackage builds our `.deb` from it, lintian passes it;
//! `rpm` reads the `.src.rpm` as it reads rpmbuild's own and
//! `rpmbuild --rebuild` builds our `.rpm` from it; makepkg builds our Arch
//! package offline from the PKGBUILD and the files beside it. The farm
//! steps live here for the config recipe's source packages too.

use std::path::Path;

use crate::support::build_farm::{
    assert_dsc_as_dpkg_source_writes, assert_listed, assert_source_rpm_header,
    assert_srpm_as_rpmbuild_bs, dpkg_source_unpacks, rpmbuild_rebuilds, ArchFarm, DebSource,
};
use crate::support::rebuild::{
    assert_same_arch_package, assert_same_package, assert_same_tree, assignments, demo_built,
    dpkg_buildpackage_beside_ours, rpm_scripts, rpm_sources,
};

const DEB_SOURCE: DebSource = DebSource {
    dsc: "patchkit-hello_0.1.0-1.dsc",
    debian_tar: "patchkit-hello_0.1.0-1.debian.tar.xz",
    orig: "patchkit-hello_0.1.0.orig.tar.gz",
    dir: "patchkit-hello-0.1.0",
};
const SRPM: &str = "patchkit-hello-dkms-0.1.0-1.src.rpm";
const PKGNAME: &str = "patchkit-hello-dkms";
const ARCH_SRC: &str = "patchkit-hello-dkms-0.1.0-1.src.tar.gz";

#[test]
fn dpkg_source_unpacks_the_dsc_and_dpkg_buildpackage_builds_our_deb() {
    let Some((p, dist)) = demo_built(
        &["dpkg-source", "dpkg-buildpackage", "dh_dkms", "lintian"],
        "deb",
    ) else {
        return;
    };
    for name in [DEB_SOURCE.dsc, DEB_SOURCE.debian_tar] {
        assert_listed(&dist, &format!("source/{name}"));
    }
    let work = p.root().join("farm-deb");
    let (src, _) = dpkg_source_unpacks(&dist, &DEB_SOURCE, &work);
    assert_dsc_as_dpkg_source_writes(&dist, &DEB_SOURCE, &work, &src);

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
    crate::support::tools::lintian(&dist.join("source").join(DEB_SOURCE.dsc))
        .assert_only(Some(&['I']), &["debian-watch-file-is-missing"]);
}

#[test]
fn rpm_reads_the_source_rpm_and_rpmbuild_rebuilds_our_rpm_from_it() {
    let Some((p, dist)) = demo_built(&["rpm", "rpmbuild", "bsdtar"], "rpm") else {
        return;
    };
    let srpm = dist.join(SRPM);
    assert_listed(&dist, SRPM);
    assert_source_rpm_header(&srpm, PKGNAME);

    // The header says what rpmbuild -bs says of the same spec and sources.
    let top = p.root().join("farm-rpm");
    rpm_sources(&dist, &top);
    assert_srpm_as_rpmbuild_bs(
        &top,
        &dist.join(format!("packaging/rpm/{PKGNAME}.spec")),
        &srpm,
    );

    // rpmbuild --rebuild builds a binary rpm with our files, metadata and
    // scriptlets.
    let rpm = format!("{PKGNAME}-0.1.0-1.noarch.rpm");
    let theirs_rpm = rpmbuild_rebuilds(&srpm, &p.root().join("farm-rebuild"), &rpm);
    assert_same_package(p.root(), &dist.join(&rpm), &theirs_rpm, &[]);
    assert_eq!(rpm_scripts(&dist.join(&rpm)), rpm_scripts(&theirs_rpm));
}

#[test]
fn makepkg_builds_our_arch_package_from_the_arch_source_package() {
    let Some((p, dist)) = demo_built(&["makepkg", "fakeroot", "bsdtar", "pacman"], "arch") else {
        return;
    };
    assert_listed(&dist, ARCH_SRC);
    assert_listed(&dist, "packaging/arch/.SRCINFO");
    let farm = ArchFarm::unpack(&dist.join(ARCH_SRC), PKGNAME);
    farm.assert_srcinfo_is_makepkgs(&dist);
    farm.build();
    let pkg = assert_same_arch_package(p.root(), &dist, &farm.work);
    farm.assert_source_packs_ours(&dist, ARCH_SRC, &pkg);
}
