//! The source packages of a config recipe (the real `amdgpu-cwsr-off`,
//! given one patch of the test's own so that a series is there to apply),
//! checked with the build farms' own tools: dpkg-source unpacks the `.dsc`
//! with the patch applied and dpkg-buildpackage builds our `.deb` (files,
//! modes, conffiles, no maintainer scripts) from it, lintian passes both;
//! `rpm` reads the `.src.rpm` as it reads rpmbuild's own and `rpmbuild
//! --rebuild` builds our `.rpm` with its `%config(noreplace)`; makepkg
//! builds our Arch package with its `backup` from the PKGBUILD and the
//! files beside it.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::build_config::{build, dist, project, the_conf};
use crate::build_dkms::EPOCH;
use crate::rebuild::{assert_same_tree, copy_into, dpkg_buildpackage_deb_beside_ours, run};
use crate::source_packages::{assert_listed, dsc_fields, makepkg_in};
use crate::support::{have_tool, Project};

const NAME: &str = "amdgpu-cwsr-off";
const PATCH: &str = "0001-say-which-package-set-the-option.patch";
const ADDED: &str = "# Set by the amdgpu-cwsr-off package (a patch of its series).";
const CONF: &str = "etc/modprobe.d/amdgpu-cwsr-off.conf";
const DSC: &str = "amdgpu-cwsr-off_1.0-1.dsc";
const DEBIAN_TAR: &str = "amdgpu-cwsr-off_1.0-1.debian.tar.xz";
const ORIG: &str = "amdgpu-cwsr-off_1.0.orig.tar.gz";
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
    for tool in [
        "dpkg-source",
        "dpkg-buildpackage",
        "dh",
        "dpkg-deb",
        "lintian",
    ] {
        if !have_tool(tool) {
            return;
        }
    }
    let p = patched_project();
    build(&p, &[]).success();
    let dist = dist(&p);
    assert_published(
        &p,
        &dist,
        &[
            &format!("source/{DSC}"),
            &format!("source/{DEBIAN_TAR}"),
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

    // dpkg-source checks every size and checksum and applies the series.
    let work = p.root().join("farm-deb");
    std::fs::create_dir_all(&work).unwrap();
    let log = run(Command::new("dpkg-source")
        .arg("-x")
        .arg(dist.join("source").join(DSC))
        .arg("src")
        .current_dir(&work));
    let src = work.join("src");
    assert_eq!(
        std::fs::read_to_string(src.join(".pc/applied-patches")).unwrap(),
        format!("{PATCH}\n"),
        "{log}"
    );
    assert!(log.contains(&format!("applying {PATCH}")), "{log}");
    assert_eq!(
        std::fs::read_to_string(src.join(format!("{NAME}.conf"))).unwrap(),
        patched_conf()
    );
    let rules = std::fs::metadata(src.join("debian/rules")).unwrap();
    assert!(
        rules.permissions().mode() & 0o111 != 0,
        "debian/rules is executable"
    );

    // Our .dsc says what dpkg-source -b writes for the same tree.
    let rebuilt = work.join("rebuilt");
    copy_into(&rebuilt, &[dist.join("source").join(ORIG)]);
    run(Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(rebuilt.join(format!("{NAME}-1.0"))));
    run(Command::new("dpkg-source")
        .args(["-b", &format!("{NAME}-1.0")])
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .current_dir(&rebuilt));
    let ours = dsc_fields(&std::fs::read_to_string(dist.join("source").join(DSC)).unwrap());
    let theirs = dsc_fields(&std::fs::read_to_string(rebuilt.join(DSC)).unwrap());
    let keys = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&ours), keys(&theirs), "field order");
    for ((k, a), (_, b)) in ours.iter().zip(&theirs) {
        if ["Checksums-Sha1", "Checksums-Sha256", "Files"].contains(&k.as_str()) {
            // The orig line is the same; two writers compress debian/
            // differently.
            assert_eq!(a.lines().nth(1), b.lines().nth(1), "{k}: the orig tarball");
        } else {
            assert_eq!(a, b, "field {k}");
        }
    }

    // dpkg-buildpackage builds a .deb with our files and modes, our
    // control fields, conffiles and md5sums, and no maintainer scripts.
    let (ours, theirs) = dpkg_buildpackage_deb_beside_ours(&src, &dist, &work, p.root(), DEB);
    assert_same_tree(&ours, &theirs, &[]);
    assert_eq!(
        std::fs::read_to_string(ours.join(CONF)).unwrap(),
        patched_conf()
    );
    let control: Vec<String> = std::fs::read_dir(ours.join("DEBIAN"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut control = control;
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
    for tool in ["rpm", "rpmbuild", "bsdtar"] {
        if !have_tool(tool) {
            return;
        }
    }
    let p = patched_project();
    build(&p, &[]).success();
    let dist = dist(&p);
    assert_published(&p, &dist, &[SRPM, &format!("packaging/rpm/{NAME}.spec")]);
    let srpm = dist.join(SRPM);

    let info = run(Command::new("rpm").arg("-qpi").arg(&srpm));
    let fields: BTreeMap<&str, &str> = info
        .lines()
        .filter_map(|l| l.split_once(" : ").or_else(|| l.split_once(": ")))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    assert_eq!(fields["Name"], NAME, "{info}");
    assert_eq!(fields["Architecture"], "noarch");
    assert_eq!(fields["Source RPM"], "(none)", "a source rpm names none");
    let check = run(Command::new("rpm").arg("-K").arg(&srpm));
    assert!(check.trim_end().ends_with("digests OK"), "{check}");

    // The header says what rpmbuild -bs says of the same spec and sources.
    let top = p.root().join("farm-rpm");
    copy_into(
        &top.join("SOURCES"),
        &[
            dist.join("source").join(ORIG),
            dist.join("source/patches").join(PATCH),
        ],
    );
    let (ours, reference) = crate::source_packages::srpm_beside_rpmbuilds(
        &top,
        &dist.join(format!("packaging/rpm/{NAME}.spec")),
        &srpm,
    );
    assert_eq!(ours, crate::source_packages::rpm_query(&reference));
    assert!(ours.contains(&format!("patch {PATCH}\n")));

    // rpmbuild --rebuild builds an rpm with our files, modes and
    // %config(noreplace), and no scriptlets.
    let rebuild = p.root().join("farm-rebuild");
    run(Command::new("rpmbuild")
        .arg("--rebuild")
        .arg("--define")
        .arg(format!("_topdir {}", rebuild.display()))
        .arg(&srpm)
        .env("SOURCE_DATE_EPOCH", EPOCH));
    let theirs_rpm = rebuild.join("RPMS/noarch").join(RPM);
    let (ours, theirs) = (p.root().join("ours"), p.root().join("theirs"));
    for (pkg, dir) in [(dist.join(RPM), &ours), (theirs_rpm.clone(), &theirs)] {
        std::fs::create_dir_all(dir).unwrap();
        run(Command::new("bsdtar")
            .arg("-xf")
            .arg(pkg)
            .arg("-C")
            .arg(dir));
    }
    assert_same_tree(&ours, &theirs, &[]);
    assert_eq!(
        std::fs::read_to_string(ours.join(CONF)).unwrap(),
        patched_conf()
    );
    let flags = |pkg: &Path| {
        run(Command::new("rpm")
            .args([
                "-qp",
                "--qf",
                "[%{FILEFLAGS:fflags} %{FILEMODES:octal} %{FILENAMES}\n]",
            ])
            .arg(pkg))
    };
    assert_eq!(flags(&dist.join(RPM)), format!("cn 100644 /{CONF}\n"));
    assert_eq!(flags(&dist.join(RPM)), flags(&theirs_rpm));
    let scripts = |pkg: &Path| run(Command::new("rpm").args(["-qp", "--scripts"]).arg(pkg));
    assert_eq!(scripts(&dist.join(RPM)), "");
    assert_eq!(scripts(&theirs_rpm), "");
    let built_from = run(Command::new("rpm")
        .args(["-qp", "--queryformat", "%{SOURCERPM}"])
        .arg(&theirs_rpm));
    assert_eq!(built_from, SRPM);
}

#[test]
fn makepkg_builds_our_config_package_with_its_backup_from_the_arch_source_package() {
    for tool in ["makepkg", "fakeroot", "bsdtar", "pacman"] {
        if !have_tool(tool) {
            return;
        }
    }
    let p = patched_project();
    build(&p, &[]).success();
    let dist = dist(&p);
    assert_published(
        &p,
        &dist,
        &[
            ARCH_SRC,
            "packaging/arch/PKGBUILD",
            "packaging/arch/.SRCINFO",
        ],
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    run(Command::new("bsdtar")
        .arg("-xf")
        .arg(dist.join(ARCH_SRC))
        .arg("-C")
        .arg(outside.path()));
    let work = outside.path().join(NAME);
    let makepkg = |args: &[&str]| makepkg_in(outside.path(), &work, args);

    // Our .SRCINFO is what makepkg prints for our PKGBUILD.
    let srcinfo = std::fs::read_to_string(work.join(".SRCINFO")).unwrap();
    assert_eq!(srcinfo, makepkg(&["--printsrcinfo"]));
    assert_eq!(
        srcinfo,
        std::fs::read_to_string(dist.join("packaging/arch/.SRCINFO")).unwrap()
    );
    assert!(
        srcinfo.contains(&format!("\tbackup = {CONF}\n")),
        "{srcinfo}"
    );
    assert!(
        srcinfo.contains(&format!("\tsource = {PATCH}\n")),
        "{srcinfo}"
    );

    // makepkg checks every sha256sum offline, applies the patch and
    // builds our package: same files, modes and backup array.
    let log = makepkg(&["--nodeps", "--noconfirm"]);
    assert!(
        log.contains("Validating source files with sha256sums"),
        "{log}"
    );
    let (ours, theirs) = (p.root().join("ours"), p.root().join("theirs"));
    for (file, dir) in [(dist.join(ARCH), &ours), (work.join(ARCH), &theirs)] {
        std::fs::create_dir_all(dir).unwrap();
        run(Command::new("bsdtar")
            .arg("-xf")
            .arg(file)
            .arg("-C")
            .arg(dir));
    }
    assert_same_tree(&ours, &theirs, &[".PKGINFO", ".BUILDINFO", ".MTREE"]);
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
    let info = |file: &Path| -> BTreeMap<String, String> {
        run(Command::new("pacman").arg("-Qip").arg(file))
            .lines()
            .filter_map(|l| l.split_once(" : "))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .filter(|(k, _)| {
                [
                    "Name",
                    "Version",
                    "Description",
                    "Architecture",
                    "URL",
                    "Licenses",
                ]
                .contains(&k.as_str())
            })
            .collect()
    };
    assert_eq!(info(&dist.join(ARCH)).len(), 6);
    assert_eq!(info(&dist.join(ARCH)), info(&work.join(ARCH)));

    // makepkg --source packs the same files we did.
    std::fs::remove_file(work.join(ARCH)).unwrap();
    makepkg(&["--source", "--nodeps"]);
    let list = |file: &Path| {
        let mut names: Vec<String> = run(Command::new("bsdtar").arg("-tf").arg(file))
            .lines()
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    assert_eq!(list(&dist.join(ARCH_SRC)), list(&work.join(ARCH_SRC)));
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
