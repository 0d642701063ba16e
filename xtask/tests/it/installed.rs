//! The installed command, `rocm-patchkit`, as a user meets it: a copy of
//! the binary in a venv's `bin/`, no checkout anywhere (`PATCHKIT_ROOT` an
//! empty folder). It reads the knowledge files built in (or `--knowledge
//! DIR`), searches its own venv first, and prints commands that name
//! itself: `rocm-patchkit rewrite-hipblaslt ...`, and as root `sudo` with
//! its absolute path; the checkout's `cargo xtask` keeps its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::doctor::{fault, next, FakeMachine};
use crate::support::inplace::{debian, digests, kernel_digests, place};
use crate::support::{repo_root, Run};

pub(crate) const VENV: &str = "home/user/venv";
pub(crate) const TORCH_LIB: &str = "home/user/venv/lib/python3.12/site-packages/torch/lib";

/// The binary copied into `<root>/home/user/venv/bin/`, a venv as pip
/// makes it (`pyvenv.cfg`); its path.
pub(crate) fn install(root: &Path) -> PathBuf {
    let venv = root.join(VENV);
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        "home = /usr/bin\nversion = 3.12.3\n",
    )
    .unwrap();
    let exe = venv.join("bin/rocm-patchkit");
    crate::support::tools::copy_program(Path::new(env!("CARGO_BIN_EXE_rocm-patchkit")), &exe);
    exe
}

/// `rocm-patchkit <args>` by its bare name, found on `PATH` in the venv's
/// `bin/`, run from an empty folder with no checkout to read; a text
/// report's items each on one line (`doctor_text.rs` holds the layout).
pub(crate) fn run(m: &FakeMachine, nowhere: &Path, args: &[&str]) -> Run {
    let path = format!(
        "{}:{}",
        m.root().join(VENV).join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("rocm-patchkit")
        .args(args)
        .current_dir(nowhere)
        .env("PATH", path)
        .env("PATCHKIT_ROOT", nowhere)
        .env("HOME", m.root().join("home/user"))
        .env("XDG_CACHE_HOME", m.cache_home())
        .env("COLUMNS", "1000")
        .env_remove("NO_COLOR")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("AMD_COMGR_CACHE_DIR")
        .output()
        .expect("running the installed rocm-patchkit");
    Run::of(out)
}

/// RDNA4 on Ubuntu's 6.14 (no fix), ROCm 7.1.1.
fn rdna4_614() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1)
        .rocm("7.1.1-53", "1.1.0");
    m
}

#[test]
fn the_installed_doctor_finds_its_venv_names_itself_and_the_rewrite_it_prints_works() {
    let Some(sid) = debian("sid") else { return };
    let m = rdna4_614();
    place(&sid, &m.root().join(TORCH_LIB), "libhipblaslt.so");
    place(&sid, &m.root().join("opt/rocm/lib"), "libhipblaslt.so");
    let exe = install(m.root());
    let nowhere = tempfile::tempdir().unwrap();
    let root = m.root().display().to_string();

    // no --python: the venv holding the binary is searched first
    let text = run(&m, nowhere.path(), &["doctor", "--root", &root]);
    text.fails_with(3)
        .stdout_has(&format!("  rocm-patchkit rewrite-hipblaslt /{TORCH_LIB}\n"))
        .stdout_has(&format!(
            "  sudo {} rewrite-hipblaslt /opt/rocm/lib\n",
            exe.display()
        ))
        .stdout_has("(in a rocm-patchkit checkout: git clone it, then run this in it)")
        .stdout_has("  cargo xtask build-dkms amdgpu-expert-sched-6.14\n");
    assert!(
        !text.stdout.contains("  cargo xtask rewrite"),
        "{}",
        text.stdout
    );
    let json = run(&m, nowhere.path(), &["doctor", "--root", &root, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let steps = next(fault(&report, "cwsr-expert-sched"));
    assert!(
        steps.contains(&format!("rocm-patchkit rewrite-hipblaslt /{TORCH_LIB}")),
        "{steps}"
    );

    // the checkout's doctor names itself, and as root its binary by path
    let checkout = m.doctor(&["--python", "/home/user/venv"]);
    checkout
        .fails_with(3)
        .stdout_has(&format!("  cargo xtask rewrite-hipblaslt /{TORCH_LIB}\n"))
        .stdout_has(&format!(
            "  sudo {} rewrite-hipblaslt /opt/rocm/lib",
            env!("CARGO_BIN_EXE_xtask")
        ));

    // the venv's step, run as printed (its path below the fake root)
    let lib_dir = m.root().join(TORCH_LIB);
    let original = digests(&lib_dir);
    let torch_lib = lib_dir.display().to_string();
    run(&m, nowhere.path(), &["rewrite-hipblaslt", &torch_lib])
        .success()
        .stdout_has("8 kernel files rewritten")
        .stdout_has(&format!(
            "undo: rocm-patchkit rewrite-hipblaslt --undo {torch_lib}/hipblaslt/library"
        ));
    assert_ne!(kernel_digests(&lib_dir), kernel_digests_of(&original));
    let after = run(&m, nowhere.path(), &["doctor", "--root", &root, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&after.stdout).unwrap();
    let lib = report["machine"]["hipblaslt_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["path"].as_str().unwrap().contains("torch/lib"))
        .cloned()
        .unwrap();
    assert_eq!(lib["judgement"]["verdict"], "off", "{lib:#}");
    run(
        &m,
        nowhere.path(),
        &["rewrite-hipblaslt", "--undo", &torch_lib],
    )
    .success();
    assert_eq!(digests(&lib_dir), original, "every byte back");
}

fn kernel_digests_of(
    all: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    let mut all = all.clone();
    all.retain(|k, _| !k.starts_with(".patchkit/"));
    all
}

#[test]
fn the_installed_doctor_reads_its_built_in_knowledge_or_a_newer_folder() {
    let m = rdna4_614();
    install(m.root());
    let nowhere = tempfile::tempdir().unwrap();
    let root = m.root().display().to_string();
    let built_in = run(&m, nowhere.path(), &["doctor", "--root", &root]);
    built_in.stdout_has(
        "cwsr-expert-sched: RDNA4 compute faults: the CWSR trap handler loses expert scheduling mode",
    );
    assert!(
        built_in.stderr.is_empty() || !built_in.stderr.contains("knowledge"),
        "{}",
        built_in.stderr
    );

    // newer facts: a folder holding faults.toml and knobs.toml, or a checkout
    let newer = tempfile::tempdir().unwrap();
    let faults = std::fs::read_to_string(repo_root().join("knowledge/faults.toml")).unwrap();
    let faults = faults.replace(
        "title = \"RDNA4 compute faults:",
        "title = \"RDNA4 compute faults (newer knowledge):",
    );
    std::fs::write(newer.path().join("faults.toml"), faults).unwrap();
    std::fs::copy(
        repo_root().join("knowledge/knobs.toml"),
        newer.path().join("knobs.toml"),
    )
    .unwrap();
    let dir = newer.path().display().to_string();
    run(
        &m,
        nowhere.path(),
        &["doctor", "--root", &root, "--knowledge", &dir],
    )
    .stdout_has("RDNA4 compute faults (newer knowledge): the CWSR trap handler");
    let checkout = repo_root().display().to_string();
    run(
        &m,
        nowhere.path(),
        &["--knowledge", &checkout, "doctor", "--root", &root],
    )
    .stdout_has("cwsr-expert-sched: RDNA4 compute faults: the CWSR");

    let missing = nowhere.path().join("no-such-folder");
    let missing = missing.display().to_string();
    run(
        &m,
        nowhere.path(),
        &["doctor", "--root", &root, "--knowledge", &missing],
    )
    .fails_with(2)
    .stderr_has(&format!("--knowledge {missing}: no faults.toml there"));
    std::fs::write(newer.path().join("faults.toml"), "[[fault]]\nid = 3\n").unwrap();
    run(
        &m,
        nowhere.path(),
        &["doctor", "--root", &root, "--knowledge", &dir],
    )
    .fails_with(2)
    .stderr_has("faults.toml");
}

#[test]
fn the_installed_command_knows_every_dkms_package_our_recipes_build() {
    let mut built: Vec<String> =
        crate::support::repo_recipes_of_kind(xtask::input::recipe::KindName::Dkms)
            .iter()
            // the demo recipe's package is the tests' hello module, not amdgpu
            .filter(|name| !name.starts_with("demo-"))
            .map(|name| {
                xtask::input::recipe::Recipe::load(&repo_root(), name)
                    .unwrap()
                    .package
                    .name
            })
            .collect();
    built.sort();
    built.dedup();
    assert_eq!(built, xtask::cli::commands::doctor::DKMS_PACKAGES);
}
