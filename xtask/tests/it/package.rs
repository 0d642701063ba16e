//! The package writers, checked with the tools their users run: dpkg-deb
//! and lintian, rpm and rpmlint, bsdtar and pacman, dkms ldtarball; and
//! rebuilt in another process (other time zone, locale, modes, creation
//! order and work dir) to the same bytes.

use std::path::Path;
use std::process::Command;

use crate::support::package::{self as fx, EPOCH, MODULE, VERSION};
use crate::support::tools::{self, run, tool};
use crate::support::{have_tool, have_tools};

#[test]
fn deb_reads_back_and_lintian_is_clean() {
    if !have_tools(&["dpkg-deb", "lintian"]) {
        return;
    }
    let (_dir, artifacts) = fx::build_fresh();
    let deb = fx::path_of(&artifacts, "_all.deb");
    assert!(deb.ends_with(format!("{MODULE}-dkms_{VERSION}-1_all.deb")));

    let info = tool("dpkg-deb", &["--info"], &deb);
    info.success()
        .stdout_has(&format!(" Package: {MODULE}-dkms\n"))
        .stdout_has(" Version: 0.1.0-1\n")
        .stdout_has(" Architecture: all\n")
        .stdout_has(" Depends: dkms\n")
        .stdout_has(" Section: kernel\n")
        .stdout_has(" Description: Patchkit test module for DKMS\n")
        .stdout_has("  .\n")
        .stdout_has("$(command substitution), `backticks`")
        .stdout_has(" postinst ")
        .stdout_has(" prerm ");

    let postinst = run(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("postinst"));
    postinst
        .success()
        .stdout_has(&format!("DKMS_NAME='{MODULE}'\n"))
        .stdout_has("/usr/lib/dkms/common.postinst \"$DKMS_NAME\" \"$DKMS_VERSION\"");
    let prerm = run(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("prerm"));
    prerm
        .success()
        .stdout_has("remove|upgrade|deconfigure)")
        .stdout_has("dkms remove -m \"$DKMS_NAME\" -v \"$DKMS_VERSION\" --all");

    let contents = tool("dpkg-deb", &["--contents"], &deb);
    contents.success();
    let src = format!("./usr/src/{MODULE}-{VERSION}");
    for (mode, path) in [
        ("drwxr-xr-x", "./usr/".to_string()),
        ("-rw-r--r--", format!("{src}/dkms.conf")),
        ("-rwxr-xr-x", format!("{src}/scripts/check-headers.sh")),
        (
            "-rw-r--r--",
            format!("./usr/share/doc/{MODULE}-dkms/copyright"),
        ),
        (
            "-rw-r--r--",
            format!("./usr/share/doc/{MODULE}-dkms/changelog.Debian.gz"),
        ),
    ] {
        let line = contents
            .stdout
            .lines()
            .find(|l| l.ends_with(&format!(" {path}")))
            .unwrap_or_else(|| panic!("{path} missing from:\n{}", contents.stdout));
        assert!(line.starts_with(&format!("{mode} root/root")), "{line}");
        assert!(
            line.contains("2025-01-02 03:04"),
            "mtime is SOURCE_DATE_EPOCH (UTC): {line}"
        );
    }
    assert!(contents
        .stdout
        .contains("a_rather_long_file_name_to_need_gnu_long_names_in_tar.h"));

    let field = run(Command::new("dpkg-deb")
        .arg("--field")
        .arg(&deb)
        .args(["Package", "Installed-Size"]));
    field
        .success()
        .stdout_has(&format!("Package: {MODULE}-dkms\n"));

    // lintian: no error and no warning. Pedantic tags kept:
    // `repeated-path-segment` (P) for `.../dml2/dml21/src/dml2_core`,
    // which mirrors amdgpu's own source layout and cannot change.
    // The package overrides `initial-upload-closes-no-bugs` (see
    // `deb::lintian_overrides`).
    let lint = tools::lintian(&deb);
    eprintln!("lintian tags kept:\n{}", lint.tags.join("\n"));
}

#[test]
fn rpm_reads_back_verifies_and_rpmlint_findings_are_known() {
    if !have_tools(&["rpm", "rpmlint"]) {
        return;
    }
    let (_dir, artifacts) = fx::build_fresh();
    let rpm = fx::path_of(&artifacts, ".noarch.rpm");
    assert!(rpm.ends_with(format!("{MODULE}-dkms-{VERSION}-1.noarch.rpm")));

    let info = tool("rpm", &["-qip"], &rpm);
    info.success()
        .stdout_has(&format!("Name        : {MODULE}-dkms\n"))
        .stdout_has("Version     : 0.1.0\n")
        .stdout_has("Release     : 1\n")
        .stdout_has("Architecture: noarch\n")
        .stdout_has("License     : GPL-2.0-only\n")
        .stdout_has("Build Date  : Thu Jan  2 03:04:05 2025\n")
        .stdout_has("$(command substitution), `backticks` and 'single quotes'");
    assert!(
        !info.stderr.contains("error") && !info.stderr.contains("warning"),
        "{}",
        info.stderr
    );

    let scripts = tool("rpm", &["-qp", "--scripts"], &rpm);
    scripts
        .success()
        .stdout_has("postinstall scriptlet (using /bin/sh):\n")
        .stdout_has(&format!(
            "dkms add -m '{MODULE}' -v '{VERSION}' --rpm_safe_upgrade"
        ))
        .stdout_has(&format!(
            "dkms install -m '{MODULE}' -v '{VERSION}' -k \"$kernel\" || :"
        ))
        .stdout_has("preuninstall scriptlet (using /bin/sh):\n")
        .stdout_has(&format!(
            "dkms remove -m '{MODULE}' -v '{VERSION}' --all --rpm_safe_upgrade"
        ));

    let requires = tool("rpm", &["-qp", "--requires"], &rpm);
    requires
        .success()
        .stdout_has("dkms\n")
        .stdout_has("rpmlib(PayloadIsZstd) <= 5.4.18-1\n");

    let list = tool("rpm", &["-qlvp"], &rpm);
    list.success();
    let src = format!("/usr/src/{MODULE}-{VERSION}");
    assert!(
        !list.stdout.lines().any(|l| l.ends_with(" /usr/src")),
        "system dirs are not owned:\n{}",
        list.stdout
    );
    for (mode, path) in [
        ("drwxr-xr-x", src.clone()),
        ("-rw-r--r--", format!("{src}/dkms.conf")),
        ("-rwxr-xr-x", format!("{src}/scripts/check-headers.sh")),
    ] {
        let line = list
            .stdout
            .lines()
            .find(|l| l.ends_with(&format!(" {path}")))
            .unwrap_or_else(|| panic!("{path} missing from:\n{}", list.stdout));
        assert!(line.starts_with(mode), "{line}");
        assert!(line.contains(" root     root "), "{line}");
    }

    let check = tool("rpm", &["-Kv", "--nosignature"], &rpm);
    check
        .success()
        .stdout_has("Header SHA256 digest: OK")
        .stdout_has("Payload SHA256 digest: OK");
    let check = tool("rpm", &["-K", "--nosignature"], &rpm);
    check.success().stdout_has("digests OK");

    // rpmlint: every finding must be one we know and accept (see
    // RPMLINT_ACCEPTED for the reason of each).
    let (findings, lint) = tools::rpmlint_findings(&rpm);
    for finding in &findings {
        assert!(
            RPMLINT_ACCEPTED
                .iter()
                .any(|(tag, _)| finding.contains(&format!(" {tag}"))),
            "unexpected rpmlint finding {finding}\n{}\n{}",
            lint.stdout,
            lint.stderr
        );
    }
    eprintln!("rpmlint:\n{}", lint.stdout);
}

/// rpmlint findings left on purpose, and why.
const RPMLINT_ACCEPTED: &[(&str, &str)] = &[
    (
        "no-signature",
        "packages are unsigned: a distribution or the user signs them with its own key",
    ),
    (
        "no-documentation",
        "a DKMS package ships kernel module source; its documentation is the source tree",
    ),
    (
        "invalid-license",
        "the licence is an SPDX identifier, which Fedora requires since 2023; rpmlint 2.4's list predates SPDX",
    ),
    (
        "devel-file-in-non-devel-package",
        "the .c/.h files are the product: DKMS builds the module from them",
    ),
];

/// `patchkit-bench package` times our compressor alone on `rpm::write_payload`:
/// it must be the very cpio our rpm carries.
#[test]
fn rpm_payload_is_the_uncompressed_write_payload() {
    if !have_tool("rpm2cpio") {
        return;
    }
    let (dir, artifacts) = fx::build_fresh();
    let rpm = fx::path_of(&artifacts, ".noarch.rpm");
    let cpio = Command::new("rpm2cpio").arg(&rpm).output().unwrap();
    assert!(cpio.status.success(), "rpm2cpio failed: {cpio:?}");
    let tree = xtask::formats::FileTree::from_dir(
        &dir.path().join("staging"),
        &xtask::formats::names::dkms_source_dir(MODULE, VERSION),
    )
    .unwrap();
    let payload =
        xtask::formats::rpm::write_payload(&tree, EPOCH, Vec::new(), &Default::default()).unwrap();
    assert!(cpio.stdout == payload, "rpm2cpio and write_payload differ");
}

#[test]
fn arch_package_reads_back_with_bsdtar_and_pacman() {
    if !have_tools(&["bsdtar", "pacman"]) {
        return;
    }
    let (_dir, artifacts) = fx::build_fresh();
    let pkg = fx::path_of(&artifacts, "-any.pkg.tar.zst");
    assert!(pkg.ends_with(format!("{MODULE}-dkms-{VERSION}-1-any.pkg.tar.zst")));

    let list = tool("bsdtar", &["-tvf"], &pkg);
    list.success();
    let names: Vec<&str> = list
        .stdout
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(
        &names[..3],
        &[".BUILDINFO", ".MTREE", ".PKGINFO"],
        "{}",
        list.stdout
    );
    assert!(names.contains(&format!("usr/src/{MODULE}-{VERSION}/dkms.conf").as_str()));
    assert!(
        list.stdout
            .lines()
            .all(|l| l.contains(" root   root ") || l.contains(" root root ")),
        "{}",
        list.stdout
    );

    let info = tool("pacman", &["-Qip"], &pkg);
    info.success()
        .stdout_has(&format!("Name            : {MODULE}-dkms\n"))
        .stdout_has("Version         : 0.1.0-1\n")
        .stdout_has("Architecture    : any\n")
        .stdout_has("Depends On      : dkms\n")
        .stdout_has("Licenses        : GPL-2.0-only\n");

    let mtree = run(Command::new("sh")
        .arg("-c")
        .arg(format!("bsdtar -xOf '{}' .MTREE | zcat", pkg.display())));
    mtree
        .success()
        .stdout_has("#mtree\n/set type=file uid=0 gid=0 mode=644\n")
        .stdout_has(&format!(
            "./usr/src/{MODULE}-{VERSION}/dkms.conf time={EPOCH}.0 size="
        ))
        .stdout_has("sha256digest=")
        .stdout_has(" mode=755 type=dir\n");

    // Every digest in .MTREE matches the extracted file, and libarchive's
    // own mtree reader (pacman -Qkk uses it) parses the file.
    let dir = tempfile::tempdir().unwrap();
    run(Command::new("bsdtar")
        .arg("-xf")
        .arg(&pkg)
        .arg("-C")
        .arg(dir.path()))
    .success();
    let mut checked = 0;
    for line in mtree.stdout.lines().filter(|l| l.contains("sha256digest=")) {
        let name = line.split(' ').next().unwrap();
        let want = line.split("sha256digest=").nth(1).unwrap();
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        assert_eq!(
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
            want,
            "{name}"
        );
        checked += 1;
    }
    assert_eq!(
        checked,
        fx::files().len() + 2,
        "every file and .BUILDINFO/.PKGINFO"
    );
    let parsed = run(Command::new("bsdtar")
        .arg("-tf")
        .arg(dir.path().join(".MTREE")));
    parsed
        .success()
        .stdout_has(&format!("usr/src/{MODULE}-{VERSION}/dkms.conf\n"));
}

#[test]
fn dkms_tarball_has_the_mktarball_layout_and_ldtarball_loads_it() {
    if !have_tool("tar") {
        return;
    }
    let (_dir, artifacts) = fx::build_fresh();
    let tarball = fx::path_of(&artifacts, ".dkms.tar.gz");
    assert!(tarball.ends_with(format!("{MODULE}-{VERSION}-source-only.dkms.tar.gz")));
    let bytes = std::fs::read(&tarball).unwrap();
    assert_eq!(
        &bytes[3..8],
        &[0, 0, 0, 0, 0],
        "gzip: no file name, mtime 0"
    );
    let list = tool("tar", &["-tzf"], &tarball);
    list.success()
        .stdout_has("./\n./dkms_main_tree/\n./dkms_source_tree/\n./dkms_source_tree/Kbuild\n");
    list.stdout_has("./dkms_source_tree/dkms.conf\n");

    if !have_tool("dkms") {
        return;
    }
    let root = run(Command::new("id").arg("-u")).stdout.trim() == "0";
    if !root {
        assert!(
            !crate::support::ci(),
            "CI must run the dkms ldtarball test as root"
        );
        eprintln!("skipping dkms ldtarball: not root");
        return;
    }
    let _system = crate::support::system_lock();
    let installed = Path::new("/usr/src").join(format!("{MODULE}-{VERSION}"));
    let _ = run(Command::new("dkms").args(["remove", "-m", MODULE, "-v", VERSION, "--all"]));
    let load = run(Command::new("dkms").arg("ldtarball").arg(&tarball));
    let status = run(Command::new("dkms").args(["status", "-m", MODULE, "-v", VERSION]));
    let remove = run(Command::new("dkms").args(["remove", "-m", MODULE, "-v", VERSION, "--all"]));
    let _ = std::fs::remove_dir_all(&installed);
    load.success();
    status
        .success()
        .stdout_has(&format!("{MODULE}/{VERSION}: added"));
    remove.success();
}

#[test]
fn every_artifact_is_byte_identical_when_rebuilt_elsewhere() {
    let (_dir, first) = fx::build_fresh();
    let other = tempfile::Builder::new()
        .prefix("patchkit-pkg-other-")
        .tempdir()
        .unwrap();
    let out = other.path().join("elsewhere/out");
    let child = run(Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "package::rebuild_in_child",
            "--ignored",
            "--nocapture",
        ])
        .current_dir(other.path())
        .env("PATCHKIT_PKG_CHILD_OUT", &out)
        .env("TZ", "Asia/Kathmandu")
        .env("LC_ALL", "C")
        .env("LANG", "tr_TR.UTF-8")
        .env("RUST_TEST_THREADS", "1"));
    child.success();
    for artifact in &first {
        let name = artifact.path.file_name().unwrap();
        let again =
            std::fs::read(out.join(name)).unwrap_or_else(|e| panic!("{name:?} not rebuilt: {e}"));
        assert!(
            std::fs::read(&artifact.path).unwrap() == again,
            "{name:?} differs when rebuilt"
        );
    }
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        first.len(),
        "no stray files in the output"
    );
}

/// The second build of the reproducibility test, in its own process:
/// files written 0600/0700 in reverse order, another work dir.
#[test]
#[ignore = "run by every_artifact_is_byte_identical_when_rebuilt_elsewhere"]
fn rebuild_in_child() {
    let Some(out) = std::env::var_os("PATCHKIT_PKG_CHILD_OUT") else {
        return;
    };
    let staging = std::env::current_dir().unwrap().join("a/different/staging");
    fx::write_module(&staging, true);
    fx::build_all(&staging, Path::new(&out));
}
