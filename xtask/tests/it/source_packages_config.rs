//! The source packages of a config recipe (the real `amdgpu-cwsr-off`,
//! given one patch of the test's own so that a series is there to apply),
//! checked with the build farms' own tools: dpkg-source unpacks the `.dsc`
//! with the patch applied and dpkg-buildpackage builds our `.deb` (files,
//! modes, conffiles, no maintainer scripts) from it, lintian passes both;
//! `rpm` reads the `.src.rpm` as it reads rpmbuild's own and `rpmbuild
//! --rebuild` builds our `.rpm` with its `%config(noreplace)`; makepkg
//! builds our Arch package with its `backup` from the PKGBUILD and the
//! files beside it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::build_farm::{
    assert_dsc_as_dpkg_source_writes, assert_listed, assert_source_rpm_header,
    assert_srpm_as_rpmbuild_bs, dpkg_source_unpacks, rpmbuild_rebuilds, ArchFarm, DebSource,
};
use crate::support::cwsr_off::{build, dist, project, the_conf};
use crate::support::rebuild::{
    assert_same_package, assert_same_tree, copy_into, dpkg_buildpackage_deb_beside_ours,
    pacman_fields, rpm_queryformat, rpm_scripts, PACMAN_FIELDS,
};
use crate::support::tools::stdout_and_stderr as run;
use crate::support::{have_tools, Project};

const NAME: &str = "amdgpu-cwsr-off";
const PATCH: &str = "0001-say-which-package-set-the-option.patch";
const ADDED: &str = "# Set by the amdgpu-cwsr-off package (a patch of its series).";
const CONF: &str = "etc/modprobe.d/amdgpu-cwsr-off.conf";
const DEB_SOURCE: DebSource = DebSource {
    dsc: "amdgpu-cwsr-off_1.0-1.dsc",
    debian_tar: "amdgpu-cwsr-off_1.0-1.debian.tar.xz",
    orig: "amdgpu-cwsr-off_1.0.orig.tar.gz",
    dir: "amdgpu-cwsr-off-1.0",
};
const DSC: &str = DEB_SOURCE.dsc;
const ORIG: &str = DEB_SOURCE.orig;
const DEB: &str = "amdgpu-cwsr-off_1.0-1_all.deb";
const SRPM: &str = "amdgpu-cwsr-off-1.0-1.src.rpm";
const RPM: &str = "amdgpu-cwsr-off-1.0-1.noarch.rpm";
const ARCH_SRC: &str = "amdgpu-cwsr-off-1.0-1.src.tar.gz";
const ARCH: &str = "amdgpu-cwsr-off-1.0-1-any.pkg.tar.zst";

/// The recipe's project with one patch in its series: a line appended to
/// the modprobe.d file, so "every patch applied" can be seen in what each
/// tool builds.
fn patched_project() -> Project {
    let p = project();
    let conf = the_conf();
    let lines: Vec<&str> = conf.lines().collect();
    assert!(conf.ends_with('\n') && !lines.is_empty());
    let n = lines.len();
    let patch = format!(
        "From: rocm-patchkit maintainers <maintainers@rocm-patchkit.invalid>\n\
         Subject: [PATCH] say which package set the option\n\
         Forwarded: not-needed\n\
         \n\
         ---\n\
         --- a/{NAME}.conf\n\
         +++ b/{NAME}.conf\n\
         @@ -{n},1 +{n},2 @@\n \
         {}\n\
         +{ADDED}\n",
        lines[n - 1]
    );
    p.file(&format!("patches/{NAME}/{PATCH}"), patch);
    p.file(&format!("patches/{NAME}/series"), format!("{PATCH}\n"));
    let recipe = std::fs::read_to_string(p.root().join(format!("recipes/{NAME}.toml"))).unwrap();
    let recipe = recipe.replacen(
        "\n[target]",
        &format!("\n[[patch]]\nfile = \"{PATCH}\"\n\n[target]"),
        1,
    );
    p.recipe(NAME, &recipe);
    p
}

/// The patched project built into its dist folder, when every one of
/// `tools` is installed (in CI a missing one fails the test instead).
fn patched_built(tools: &[&str]) -> Option<(Project, PathBuf)> {
    if !have_tools(tools) {
        return None;
    }
    let p = patched_project();
    build(&p, &[]).success();
    let dist = dist(&p);
    Some((p, dist))
}

/// The conf as the patch leaves it.
fn patched_conf() -> String {
    format!("{}{ADDED}\n", the_conf())
}

/// Every file the plan promises is there, and each source-side file is in
/// SHA256SUMS and the manifest.
fn assert_published(p: &Project, dist: &Path, listed: &[&str]) {
    let plan: serde_json::Value =
        serde_json::from_str(&p.xtask(&["plan", NAME, "--json"]).success().stdout).unwrap();
    for name in plan["outputs"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        if !["SHA256SUMS", "manifest.json"].contains(&name) {
            assert_listed(dist, name);
        }
    }
    for name in listed {
        assert_listed(dist, name);
    }
    p.xtask(&["verify", &format!("dist/{NAME}")])
        .success()
        .stdout_has("exactly as published");
}

#[test]
fn dpkg_source_unpacks_the_config_dsc_and_dpkg_buildpackage_builds_our_deb() {
    let Some((p, dist)) = patched_built(&[
        "dpkg-source",
        "dpkg-buildpackage",
        "dh",
        "dpkg-deb",
        "lintian",
    ]) else {
        return;
    };
    assert_published(
        &p,
        &dist,
        &[
            &format!("source/{DSC}"),
            &format!("source/{}", DEB_SOURCE.debian_tar),
            &format!("source/{ORIG}"),
            &format!("source/patches/{PATCH}"),
            "source/patches/series",
            "packaging/debian/control",
            "packaging/debian/rules",
            "packaging/debian/changelog",
            "packaging/debian/copyright",
            "packaging/debian/source/format",
        ],
    );
    // The orig tarball is the pristine tree: the recipe's source, unpatched.
    let orig = run(Command::new("tar")
        .args(["-xOzf"])
        .arg(dist.join("source").join(ORIG))
        .arg(format!("{NAME}-1.0/{NAME}.conf")));
    assert_eq!(orig, the_conf());

    // dpkg-source applies the one patch of the series.
    let work = p.root().join("farm-deb");
    let (src, log) = dpkg_source_unpacks(&dist, &DEB_SOURCE, &work);
    assert_eq!(
        std::fs::read_to_string(src.join(".pc/applied-patches")).unwrap(),
        format!("{PATCH}\n"),
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(src.join(format!("{NAME}.conf"))).unwrap(),
        patched_conf()
    );
    assert_dsc_as_dpkg_source_writes(&dist, &DEB_SOURCE, &work, &src);

    // dpkg-buildpackage builds a .deb with our files and modes, our
    // control fields, conffiles and md5sums, and no maintainer scripts.
    let (ours, theirs) = dpkg_buildpackage_deb_beside_ours(&src, &dist, &work, p.root(), DEB);
    assert_same_tree(&ours, &theirs, &[]);
    assert_eq!(
        std::fs::read_to_string(ours.join(CONF)).unwrap(),
        patched_conf()
    );
    let mut control: Vec<String> = std::fs::read_dir(ours.join("DEBIAN"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    control.sort();
    assert_eq!(control, ["conffiles", "control", "md5sums"]);
    assert_eq!(
        std::fs::read_to_string(ours.join("DEBIAN/conffiles")).unwrap(),
        format!("/{CONF}\n")
    );

    // lintian: no error or warning on our .dsc, nor on the rebuilt
    // source and binary packages; the one tag left is the information
    // that there is no debian/watch (the recipe pins its source instead).
    let changes = work.join("amdgpu-cwsr-off_1.0-1_amd64.changes");
    for target in [dist.join("source").join(DSC), changes] {
        crate::support::tools::lintian(&target)
            .assert_only(Some(&['I']), &["debian-watch-file-is-missing"]);
    }
}

#[test]
fn rpm_reads_the_config_source_rpm_and_rpmbuild_rebuilds_our_rpm() {
    let Some((p, dist)) = patched_built(&["rpm", "rpmbuild", "bsdtar"]) else {
        return;
    };
    assert_published(&p, &dist, &[SRPM, &format!("packaging/rpm/{NAME}.spec")]);
    let srpm = dist.join(SRPM);
    assert_source_rpm_header(&srpm, NAME);

    // The header says what rpmbuild -bs says of the same spec and sources.
    let top = p.root().join("farm-rpm");
    copy_into(
        &top.join("SOURCES"),
        &[
            dist.join("source").join(ORIG),
            dist.join("source/patches").join(PATCH),
        ],
    );
    let ours = assert_srpm_as_rpmbuild_bs(
        &top,
        &dist.join(format!("packaging/rpm/{NAME}.spec")),
        &srpm,
    );
    assert!(ours.contains(&format!("patch {PATCH}\n")));

    // rpmbuild --rebuild builds an rpm with our files, modes and
    // %config(noreplace), and no scriptlets.
    let theirs_rpm = rpmbuild_rebuilds(&srpm, &p.root().join("farm-rebuild"), RPM);
    assert_same_package(p.root(), &dist.join(RPM), &theirs_rpm, &[]);
    assert_eq!(
        std::fs::read_to_string(p.root().join("ours").join(CONF)).unwrap(),
        patched_conf()
    );
    let flags = |pkg: &Path| {
        rpm_queryformat(
            pkg,
            "[%{FILEFLAGS:fflags} %{FILEMODES:octal} %{FILENAMES}\n]",
        )
    };
    assert_eq!(flags(&dist.join(RPM)), format!("cn 100644 /{CONF}\n"));
    assert_eq!(flags(&dist.join(RPM)), flags(&theirs_rpm));
    assert_eq!(rpm_scripts(&dist.join(RPM)), "");
    assert_eq!(rpm_scripts(&theirs_rpm), "");
}

#[test]
fn makepkg_builds_our_config_package_with_its_backup_from_the_arch_source_package() {
    let Some((p, dist)) = patched_built(&["makepkg", "fakeroot", "bsdtar", "pacman"]) else {
        return;
    };
    assert_published(
        &p,
        &dist,
        &[
            ARCH_SRC,
            "packaging/arch/PKGBUILD",
            "packaging/arch/.SRCINFO",
        ],
    );
    let farm = ArchFarm::unpack(&dist.join(ARCH_SRC), NAME);
    let srcinfo = farm.assert_srcinfo_is_makepkgs(&dist);
    assert!(
        srcinfo.contains(&format!("\tbackup = {CONF}\n")),
        "{srcinfo}"
    );
    assert!(
        srcinfo.contains(&format!("\tsource = {PATCH}\n")),
        "{srcinfo}"
    );

    // makepkg applies the patch and builds our package: same files, modes
    // and backup array.
    farm.build();
    let metadata = [".PKGINFO", ".BUILDINFO", ".MTREE"];
    assert_same_package(p.root(), &dist.join(ARCH), &farm.work.join(ARCH), &metadata);
    let (ours, theirs) = (p.root().join("ours"), p.root().join("theirs"));
    assert_eq!(
        std::fs::read_to_string(ours.join(CONF)).unwrap(),
        patched_conf()
    );
    let backup = |dir: &Path| -> Vec<String> {
        std::fs::read_to_string(dir.join(".PKGINFO"))
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("backup = "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(backup(&ours), [format!("backup = {CONF}")]);
    assert_eq!(backup(&ours), backup(&theirs));
    let info = |file: &Path| pacman_fields(file, &PACMAN_FIELDS);
    assert_eq!(info(&dist.join(ARCH)).len(), 6);
    assert_eq!(info(&dist.join(ARCH)), info(&farm.work.join(ARCH)));

    farm.assert_source_packs_ours(&dist, ARCH_SRC, ARCH);
}

#[test]
fn a_config_source_that_a_shell_line_would_split_is_refused_by_plan_with_its_place() {
    let p = project();
    let text = std::fs::read_to_string(p.root().join(format!("recipes/{NAME}.toml"))).unwrap();
    let text = text.replace(
        &format!("source = \"{NAME}.conf\""),
        "source = \"amdgpu cwsr$(off).conf\"",
    );
    p.recipe(NAME, &text);
    let line = text.lines().position(|l| l.contains("cwsr$(off)")).unwrap() + 1;
    p.xtask(&["plan", NAME])
        .fails_with(2)
        .stderr_has(&format!("{NAME}.toml:{line}:"))
        .stderr_has("`config.files[0].source`")
        .stderr_has("reaches shell lines of the packaging files");
    assert!(!p.root().join("dist").exists(), "nothing was built");
}
