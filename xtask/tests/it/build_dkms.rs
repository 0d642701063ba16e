//! `cargo xtask build-dkms` end to end on the demo recipe: every format
//! checked by the tool its users run, byte-for-byte reproducibility, atomic
//! publication under kill -9, and the no-op re-run.

use std::process::{Command, Stdio};

use crate::support::demo::{build, demo_project, dist, EPOCH};
use crate::support::tools::{self, stdout_and_stderr};
use crate::support::{have_tool, snapshot, Run};

const DEB: &str = "patchkit-hello-dkms_0.1.0-1_all.deb";
const RPM: &str = "patchkit-hello-dkms-0.1.0-1.noarch.rpm";
const ARCH: &str = "patchkit-hello-dkms-0.1.0-1-any.pkg.tar.zst";
const TAR: &str = "patchkit-hello-0.1.0-source-only.dkms.tar.gz";

#[test]
fn the_demo_publishes_every_artifact_and_plan_named_them() {
    let p = demo_project();
    build(&p, &[])
        .success()
        .stdout_has("published dist/demo-hello");
    let dir = dist(&p);
    let plan: serde_json::Value =
        serde_json::from_str(&p.xtask(&["plan", "demo-hello", "--json"]).success().stdout).unwrap();
    for name in plan["outputs"].as_array().unwrap() {
        assert!(
            dir.join(name.as_str().unwrap()).is_file(),
            "plan promised {name}"
        );
    }
    for rel in [
        "packaging/dkms.conf",
        "packaging/debian/control",
        "packaging/rpm/patchkit-hello-dkms.spec",
        "packaging/arch/PKGBUILD",
    ] {
        assert!(dir.join(rel).is_file(), "{rel}");
    }
    if have_tool("sha256sum") {
        stdout_and_stderr(
            Command::new("sha256sum")
                .args(["-c", "--strict", "--quiet", "SHA256SUMS"])
                .current_dir(&dir),
        );
    }
    p.xtask(&["verify", "dist/demo-hello"])
        .success()
        .stdout_has("exactly as published");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["source_date_epoch"], 1767225600);
    assert_eq!(manifest["build"]["kernel"], "6.12.117+deb12-amd64");
    assert_eq!(
        manifest["patches"][0]["name"],
        "0001-carry-a-module-version.patch"
    );
    assert!(manifest["source"]["pin"]
        .as_str()
        .unwrap()
        .starts_with("tree-sha256 "));
    assert_eq!(
        manifest["outputs"][DEB]["size"],
        std::fs::metadata(dir.join(DEB)).unwrap().len()
    );
    let conf = std::fs::read_to_string(dir.join("packaging/dkms.conf")).unwrap();
    assert!(
        conf.contains("BUILT_MODULE_NAME[0]='patchkit_hello'\n")
            && conf.contains("DEST_MODULE_LOCATION[0]='/updates/dkms'\n"),
        "{conf}"
    );
    assert!(
        conf.contains("BUILD_EXCLUSIVE_KERNEL=") && conf.contains("AUTOINSTALL=yes"),
        "{conf}"
    );
}

#[test]
fn the_deb_is_what_debian_tools_expect() {
    let p = demo_project();
    build(&p, &["--formats", "deb"]).success();
    let deb = dist(&p).join(DEB);
    if have_tool("dpkg-deb") {
        let info = tools::deb_info(&deb);
        for needle in [
            "Package: patchkit-hello-dkms",
            "Version: 0.1.0-1",
            "Architecture: all",
            "Depends: dkms",
            "postinst",
            "prerm",
        ] {
            assert!(info.contains(needle), "{needle} in\n{info}");
        }
        let contents = stdout_and_stderr(Command::new("dpkg-deb").arg("--contents").arg(&deb));
        for needle in [
            "./usr/src/patchkit-hello-0.1.0/dkms.conf",
            "./usr/src/patchkit-hello-0.1.0/patchkit_hello.c",
            "./usr/share/doc/patchkit-hello-dkms/copyright",
            "changelog.Debian.gz",
        ] {
            assert!(contents.contains(needle), "{needle} in\n{contents}");
        }
        assert!(
            !contents.contains(".patchkit"),
            "the state record leaked into the package:\n{contents}"
        );
        let postinst = stdout_and_stderr(
            Command::new("dpkg-deb")
                .arg("--info")
                .arg(&deb)
                .arg("postinst"),
        );
        assert!(
            postinst.contains("/usr/lib/dkms/common.postinst"),
            "{postinst}"
        );
    }
    if have_tool("lintian") {
        tools::lintian(&deb);
    }
}

#[test]
fn the_rpm_arch_and_dkms_tarball_read_back() {
    let p = demo_project();
    build(&p, &["--formats", "rpm,arch,tar"]).success();
    let dir = dist(&p);
    assert!(!dir.join(DEB).exists(), "--formats limits the packages");
    if have_tool("rpm") {
        let info = stdout_and_stderr(Command::new("rpm").arg("-qip").arg(dir.join(RPM)));
        assert!(
            info.contains("Name        : patchkit-hello-dkms") && info.contains("Release     : 1"),
            "{info}"
        );
        let scripts = stdout_and_stderr(
            Command::new("rpm")
                .args(["-qp", "--scripts"])
                .arg(dir.join(RPM)),
        );
        assert!(
            scripts.contains("postinstall scriptlet")
                && scripts.contains("dkms add -m 'patchkit-hello' -v '0.1.0'"),
            "{scripts}"
        );
        assert!(
            scripts.contains("preuninstall scriptlet")
                && scripts.contains("dkms remove -m 'patchkit-hello' -v '0.1.0' --all"),
            "{scripts}"
        );
        let check = stdout_and_stderr(
            Command::new("rpm")
                .args(["-K", "--nosignature"])
                .arg(dir.join(RPM)),
        );
        assert!(check.contains("digests OK"), "{check}");
    }
    if have_tool("bsdtar") {
        let list = tools::bsdtar_list(&dir.join(ARCH));
        for needle in [
            ".PKGINFO",
            ".BUILDINFO",
            ".MTREE",
            "usr/src/patchkit-hello-0.1.0/dkms.conf",
        ] {
            assert!(list.lines().any(|l| l == needle), "{needle} in\n{list}");
        }
        let tarball = tools::bsdtar_list(&dir.join(TAR));
        assert!(tarball.contains("dkms_source_tree/dkms.conf"), "{tarball}");
    }
    if have_tool("pacman") {
        let info = tools::pacman_info(&dir.join(ARCH));
        assert!(
            info.contains("patchkit-hello-dkms")
                && info.contains("0.1.0-1")
                && info.contains("dkms"),
            "{info}"
        );
    }
}

#[test]
fn a_rerun_with_nothing_changed_is_a_no_op() {
    let p = demo_project();
    build(&p, &[]).success();
    let before = std::fs::metadata(dist(&p).join("SHA256SUMS"))
        .unwrap()
        .modified()
        .unwrap();
    build(&p, &[])
        .success()
        .stdout_has("dist/demo-hello is up to date: nothing to do");
    assert_eq!(
        std::fs::metadata(dist(&p).join("SHA256SUMS"))
            .unwrap()
            .modified()
            .unwrap(),
        before
    );
    // a changed template is a changed build
    let control = p.root().join("templates/debian/control.hbs");
    let text = std::fs::read_to_string(&control).unwrap();
    std::fs::write(
        &control,
        text.replace("Priority: optional", "Priority: optional\nX-Test: yes"),
    )
    .unwrap();
    build(&p, &[])
        .success()
        .stdout_has("published dist/demo-hello");
}

#[test]
fn a_kernel_outside_the_range_is_refused() {
    let p = demo_project();
    let run = p.xtask_with(
        &["build-dkms", "demo-hello", "--kernel", "5.4.0-150-generic"],
        &[("SOURCE_DATE_EPOCH", EPOCH)],
    );
    run.fails_with(2)
        .stderr_has("kernel 5.4.0-150-generic is outside the range of recipe demo-hello (>=5.10)");
    assert!(!dist(&p).exists());
}

#[test]
fn a_recipe_of_another_kind_is_refused() {
    let p = demo_project();
    let text = std::fs::read_to_string(p.root().join("recipes/demo-hello.toml")).unwrap();
    let text = text.replace(
        "kind = \"dkms\"\nkernel = \">=5.10\"",
        "kind = \"hipblaslt\"",
    );
    let text = text.split("[dkms]").next().unwrap().to_owned();
    p.recipe("demo-hello", &text);
    build(&p, &[])
        .fails_with(2)
        .stderr_has("build it with `cargo xtask build-hipblaslt`");
}

/// A rewrite recipe has no `build-rewrite`: the refusal names `build`,
/// the command that builds it, and so does build-hipblaslt's.
#[test]
fn a_rewrite_recipe_is_sent_to_the_build_command() {
    let p = demo_project();
    p.copy_from_repo(&["recipes/hipblaslt-debian-7.1.1-expert-sched-off.toml"]);
    let recipe = "hipblaslt-debian-7.1.1-expert-sched-off";
    p.xtask(&["build-dkms", recipe])
        .fails_with(2)
        .stderr_has("build it with `cargo xtask build`");
    p.xtask(&["build-hipblaslt", recipe])
        .fails_with(2)
        .stderr_has(&format!("(use `cargo xtask build {recipe}`)"));
}

#[test]
fn two_builds_are_byte_identical_across_time_zone_umask_locale_and_work_dir() {
    let first = demo_project();
    build(&first, &[]).success();
    let second = demo_project();
    // Files checked out with another umask and written in another order.
    Command::new("chmod")
        .args(["-R", "go-rwx"])
        .arg(second.root())
        .status()
        .unwrap();
    let exe = env!("CARGO_BIN_EXE_xtask");
    let script =
        format!("umask 077; exec {exe} build-dkms demo-hello --kernel 6.12.117+deb12-amd64");
    let run = Run::of(
        Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(second.root().join("recipes"))
            .env("PATCHKIT_ROOT", second.root())
            .env("PATCHKIT_CACHE_DIR", second.cache())
            .env("CI", "true")
            .env("SOURCE_DATE_EPOCH", EPOCH)
            .env("TZ", "Asia/Kathmandu")
            .env("LANG", "tr_TR.UTF-8")
            .env("LC_ALL", "tr_TR.UTF-8")
            .output()
            .unwrap(),
    );
    run.success();
    let (a, b) = (snapshot(&dist(&first)), snapshot(&dist(&second)));
    assert_eq!(
        a.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        b.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{name} differs between the two builds");
    }
}

#[test]
fn a_build_killed_mid_packaging_leaves_dist_intact() {
    let p = demo_project();
    build(&p, &[]).success();
    let before = snapshot(&dist(&p));
    // Make the next build slow enough to be caught in the act: 24 MiB that
    // does not compress, and another epoch so that it is not a no-op.
    let noise: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(p.root().join("examples/demo-hello/noise.bin"), noise).unwrap();
    let mut child = p
        .command(&[
            "build-dkms",
            "demo-hello",
            "--kernel",
            "6.12.117+deb12-amd64",
        ])
        .env("SOURCE_DATE_EPOCH", "1767312000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let staging_has_files = || {
        std::fs::read_dir(p.root().join("dist"))
            .unwrap()
            .flatten()
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("demo-hello.staging-")
                    && std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_some())
            })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !staging_has_files() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build ended before it could be killed"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no staging folder appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        before == snapshot(&dist(&p)),
        "dist/demo-hello changed under a killed build"
    );
    p.xtask(&["verify", "dist/demo-hello"]).success();
    Run::of(
        p.command(&[
            "build-dkms",
            "demo-hello",
            "--kernel",
            "6.12.117+deb12-amd64",
        ])
        .env("SOURCE_DATE_EPOCH", "1767312000")
        .output()
        .unwrap(),
    )
    .success();
    let left: Vec<_> = std::fs::read_dir(p.root().join("dist"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("demo-hello")],
        "leftovers of the killed run"
    );
    assert!(dist(&p)
        .join("source/patchkit-hello_0.1.0.orig.tar.gz")
        .is_file());
}
