//! The wheel as a user gets it: built by `maturin build` from pyproject.toml
//! alone (every setting of the release's; the workspace's `wheel-test`
//! profile, dev's with unoptimised dependencies and no debug info, instead
//! of `--release`: a release build from nothing is the heaviest part of
//! CI), audited by
//! auditwheel (manylinux, glibc 2.28 or older, no library outside the
//! policy), its binary linked to glibc's libraries only; installed with pip
//! from the file into a fresh venv with no Rust on PATH; then on a fake
//! RDNA4 machine with a venv holding Debian's real 7.1.1 gfx12 kernels:
//! doctor says affected and names `rocm-patchkit rewrite-hipblaslt`, the
//! rewrite, doctor again (mitigated), `--undo` (every byte back), all run
//! from the installed wheel; and the tarball made from it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::doctor::{fault, FakeMachine};
use crate::support::inplace::{debian, digests, place};
use crate::support::{repo_root, wheel_tool, Run};

const TORCH_LIB: &str = "home/user/venv/lib/python3.12/site-packages/torch/lib";
/// Rust's tools are not on it: the user's side of the test.
const USER_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn run(cmd: &mut Command) -> Run {
    Run::of(cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}")))
}

/// `maturin build --profile wheel-test --out DIR` at the top: the
/// release's settings, the test's own cargo profile (`--release` is the
/// release workflow's only other flag).
fn build_wheel(maturin: &Path, out: &Path) -> PathBuf {
    let tools_bin = maturin.parent().unwrap();
    let path = format!("{}:{}", tools_bin.display(), std::env::var("PATH").unwrap());
    run(Command::new(maturin)
        // its build (other features, zig's C compiler) shares nothing with
        // the tests': the profile (Cargo.toml) builds it cheaply
        .args(["build", "--profile", "wheel-test", "--out"])
        .arg(out)
        .current_dir(repo_root())
        .env("PATH", path)
        .env_remove("CARGO_TARGET_DIR"))
    .success();
    let wheels: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    let name = wheels[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with("rocm_patchkit-"), "{name}");
    assert!(
        name.ends_with("-py3-none-manylinux_2_28_x86_64.whl"),
        "{name}"
    );
    wheels[0].clone()
}

/// auditwheel's verdict: consistent with a manylinux tag of glibc 2.28 or
/// older, no external library needed.
fn audit(auditwheel: &Path, wheel: &Path) {
    let out = run(Command::new(auditwheel).arg("show").arg(wheel));
    out.success();
    let text = out.stdout.replace('\n', " ");
    let tag = text
        .split("consistent with the following platform tag:")
        .nth(1)
        .and_then(|t| t.split('"').nth(1))
        .unwrap_or_else(|| panic!("auditwheel show: {text}"));
    let glibc: Vec<u32> = tag
        .trim_start_matches("manylinux_")
        .split('_')
        .take(2)
        .map(|n| n.parse().unwrap_or_else(|_| panic!("tag {tag}")))
        .collect();
    assert!(glibc <= vec![2, 28], "auditwheel: {tag}: {text}");
    assert!(
        !text.contains("external shared libraries are required"),
        "{text}"
    );
}

/// The libraries the binary needs (`readelf -d`): glibc's alone.
fn needed(binary: &Path) -> Vec<String> {
    let out = run(Command::new("readelf").arg("-d").arg(binary));
    out.success();
    out.stdout
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .map(|l| {
            l.split('[')
                .nth(1)
                .unwrap()
                .trim_end_matches(']')
                .to_owned()
        })
        .collect()
}

#[test]
fn the_wheel_installs_without_rust_and_fixes_a_venv_from_its_own_binary() {
    let (Some(maturin), Some(auditwheel)) = (wheel_tool("maturin"), wheel_tool("auditwheel"))
    else {
        return;
    };
    let Some(sid) = debian("sid") else { return };
    let work = tempfile::tempdir().unwrap();
    let wheel = build_wheel(&maturin, &work.path().join("wheels"));
    audit(&auditwheel, &wheel);
    let size = std::fs::metadata(&wheel).unwrap().len();
    // the release's wheel is 4.6 MB; this dev-profile one is larger
    assert!(size < 16 << 20, "the wheel is {size} bytes, over 16 MiB");

    // a fresh venv, pip from the file, no Rust on PATH
    let user = work.path().join("user");
    run(Command::new("/usr/bin/python3")
        .args(["-m", "venv"])
        .arg(&user)
        .env("PATH", USER_PATH))
    .success();
    run(Command::new(user.join("bin/pip"))
        .args(["install", "--no-index", "--no-deps", "-q"])
        .arg(&wheel)
        .env("PATH", USER_PATH))
    .success();
    let exe = user.join("bin/rocm-patchkit");
    let libs = needed(&exe);
    let glibc = [
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libutil.so.1",
        "ld-linux-x86-64.so.2",
    ];
    assert!(libs.iter().all(|l| glibc.contains(&l.as_str())), "{libs:?}");
    for page in [
        "share/man/man1/rocm-patchkit.1",
        "share/bash-completion/completions/rocm-patchkit",
    ] {
        assert!(user.join(page).is_file(), "{page} installed with the wheel");
    }

    user_fixes_a_venv(&user, &sid);
    tarball_of(&wheel, &exe, &work.path().join("release"));
}

/// The installed `rocm-patchkit` by its bare name, as an activated venv
/// runs it, with a fake user's home below the machine.
fn rocm_patchkit(user: &Path, m: &FakeMachine, args: &[&str]) -> Run {
    let path = format!("{}:{USER_PATH}", user.join("bin").display());
    run(Command::new("rocm-patchkit")
        .args(args)
        .env("PATH", path)
        .env("VIRTUAL_ENV", user)
        .env("HOME", m.root().join("home/user"))
        .env("XDG_CACHE_HOME", m.cache_home())
        .env("COLUMNS", "1000")
        .env_remove("CONDA_PREFIX")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("AMD_COMGR_CACHE_DIR"))
}

fn user_fixes_a_venv(user: &Path, sid: &Path) {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    place(sid, &m.root().join(TORCH_LIB), "libhipblaslt.so");
    let root = m.root().display().to_string();
    let lib_dir = m.root().join(TORCH_LIB);
    let original = digests(&lib_dir);
    let doctor = |m: &FakeMachine| {
        let out = rocm_patchkit(
            user,
            m,
            &["doctor", "--root", &root, "--python", "/home/user/venv"],
        );
        let text = rocm_patchkit(
            user,
            m,
            &[
                "doctor",
                "--root",
                &root,
                "--python",
                "/home/user/venv",
                "--json",
            ],
        );
        let json: serde_json::Value = serde_json::from_str(&text.stdout)
            .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}", text.stderr));
        (
            out,
            fault(&json, "cwsr-expert-sched")["status"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    };
    let (before, status) = doctor(&m);
    assert_eq!(status, "affected", "{}", before.stdout);
    before
        .fails_with(3)
        .stdout_has(&format!("rocm-patchkit rewrite-hipblaslt /{TORCH_LIB}\n"));

    let torch_lib = lib_dir.display().to_string();
    rocm_patchkit(user, &m, &["rewrite-hipblaslt", &torch_lib])
        .success()
        .stdout_has("kernel files rewritten");
    let (after, status) = doctor(&m);
    assert_eq!(status, "mitigated", "{}", after.stdout);
    rocm_patchkit(user, &m, &["rewrite-hipblaslt", "--undo", &torch_lib]).success();
    assert_eq!(digests(&lib_dir), original, "every byte back");
}

/// `wheel/tarball`: the wheel's binary byte for byte, its share/, and a
/// sha256 that `sha256sum -c` takes.
fn tarball_of(wheel: &Path, installed: &Path, out: &Path) {
    let made = run(Command::new("bash")
        .arg(repo_root().join("wheel/tarball"))
        .arg(wheel)
        .arg(out)
        .env("SOURCE_DATE_EPOCH", "1700000000"));
    made.success();
    let tarball = PathBuf::from(made.stdout.trim());
    let name = tarball.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("rocm-patchkit-") && name.ends_with("-x86_64-linux.tar.gz"),
        "{name}"
    );
    run(Command::new("sha256sum")
        .args(["-c", &format!("{name}.sha256")])
        .current_dir(out))
    .success();
    let unpacked = out.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .args(["--strip-components=1", "-C"])
        .arg(&unpacked))
    .success();
    assert_eq!(
        std::fs::read(unpacked.join("bin/rocm-patchkit")).unwrap(),
        std::fs::read(installed).unwrap(),
        "the tarball's binary is the wheel's"
    );
    for page in [
        "share/man/man1/rocm-patchkit-doctor.1",
        "share/zsh/site-functions/_rocm-patchkit",
    ] {
        assert!(unpacked.join(page).is_file(), "{page} in the tarball");
    }
    // the same wheel makes the same tarball
    let again = out.join("again");
    run(Command::new("bash")
        .arg(repo_root().join("wheel/tarball"))
        .arg(wheel)
        .arg(&again)
        .env("SOURCE_DATE_EPOCH", "1700000000"))
    .success();
    assert_eq!(
        std::fs::read(&tarball).unwrap(),
        std::fs::read(again.join(&name)).unwrap()
    );
}
