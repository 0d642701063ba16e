//! doctor's next steps as a person follows them: the cheapest that works
//! first (a kernel upgrade within the series, else the no-reboot rewrite),
//! the distribution's own commands read from the fake machine's
//! `/etc/os-release`, and every command doctor prints run in the test's own
//! fake setting (machine paths below the fake root, a build replaced by its
//! `plan`, a package glob matched against the plan's outputs) or, for the
//! distribution's tools, checked to be that distribution's program.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::installed::{install, run, TORCH_LIB};
use crate::support::doctor::{fault, FakeMachine};
use crate::support::inplace::{debian, place};
use crate::support::{have_tool, repo_root, Run};

const UBUNTU_24_04: &str = "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nVERSION=\"24.04.3 LTS (Noble Numbat)\"\nVERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\n";
const ARCH: &str = "NAME=\"Arch Linux\"\nPRETTY_NAME=\"Arch Linux\"\nID=arch\nBUILD_ID=rolling\n";
const FEDORA: &str =
    "NAME=\"Fedora Linux\"\nVERSION=\"42 (Workstation Edition)\"\nID=fedora\nVERSION_ID=42\n";

fn rdna4(kernel: &str, os_release: &str) -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel(kernel)
        .amdgpu(1)
        .file("etc/os-release", os_release);
    m
}

/// Every step of every fault of a `--json` report.
fn all_steps(report: &serde_json::Value) -> Vec<&serde_json::Value> {
    report["faults"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["next"].as_array().unwrap())
        .collect()
}

fn words(c: &serde_json::Value) -> Vec<String> {
    let mut w = vec![c["command"].as_str().unwrap().to_owned()];
    w.extend(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );
    w
}

/// A machine path as it lies below the fake root; other words as they are.
fn below(m: &FakeMachine, word: &str) -> String {
    match word.strip_prefix('/') {
        Some(rel) => m.root().join(rel).display().to_string(),
        None => word.to_owned(),
    }
}

/// `cargo xtask plan <recipe>` of this checkout: it succeeds, and its
/// outputs are what an install glob must match.
fn plan_outputs(recipe: &str, plans: &mut BTreeMap<String, Vec<String>>) -> Vec<String> {
    plans
        .entry(recipe.to_owned())
        .or_insert_with(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
                .args(["plan", recipe])
                .env("PATCHKIT_ROOT", repo_root())
                .output()
                .unwrap();
            let run = Run::of(out);
            run.success();
            let outputs = run.stdout.split("outputs").nth(1).unwrap_or("");
            outputs.lines().map(|l| l.trim().to_owned()).collect()
        })
        .clone()
}

/// Runs or checks one printed command: the tool itself (by its installed
/// name, `cargo xtask`, or as root by path) in the fake setting; a build by
/// its plan; the distribution's tool is `tool`, and an install's
/// `./dist/<recipe>/*<suffix>` matches one file the recipe's plan makes.
fn check(
    c: &[String],
    tool: &str,
    plans: &mut BTreeMap<String, Vec<String>>,
    installed: &dyn Fn(&[String]) -> Run,
) {
    let line = c.join(" ");
    match c[0].as_str() {
        "rocm-patchkit" => {
            installed(&c[1..]).success();
        }
        "cargo" => {
            assert_eq!(c[1], "xtask", "{line}");
            assert!(c[2].starts_with("build-"), "{line}");
            plan_outputs(&c[3], plans);
        }
        "export" => {
            let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
            assert!(out.status.success(), "{line}");
        }
        "sudo" if c[1].starts_with('/') => {
            assert!(Path::new(&c[1]).is_file(), "{line}: the binary by path");
            installed(&c[2..]).success();
        }
        "sudo" => {
            assert_eq!(c[1], tool, "{line}: the distribution's own tool");
            if tool != "zypper" && !have_tool(tool) {
                return;
            }
            if let Some(glob) = c.iter().find(|w| w.starts_with("./dist/")) {
                let rest = glob.strip_prefix("./dist/").unwrap();
                let (recipe, pattern) = rest.split_once('/').unwrap();
                let suffix = pattern.strip_prefix('*').unwrap();
                let outputs = plan_outputs(recipe, plans);
                let hits: Vec<&String> = outputs
                    .iter()
                    .filter(|o| !o.contains('/') && o.ends_with(suffix))
                    .collect();
                assert_eq!(hits.len(), 1, "{line}: {outputs:?}");
            }
        }
        other => panic!("doctor printed `{line}`, whose program `{other}` no check knows"),
    }
}

#[test]
fn ubuntu_on_6_14_rewrites_first_names_the_fixed_series_and_every_command_runs() {
    let Some(sid) = debian("sid") else { return };
    let m = rdna4("6.14.0-36-generic", UBUNTU_24_04);
    place(&sid, &m.root().join(TORCH_LIB), "libhipblaslt.so");
    install(m.root());
    let nowhere = tempfile::tempdir().unwrap();
    let root = m.root().display().to_string();
    let doctor = run(&m, nowhere.path(), &["doctor", "--root", &root, "--json"]);
    doctor.fails_with(3);
    let report: serde_json::Value = serde_json::from_str(&doctor.stdout).unwrap();
    assert_eq!(report["machine"]["os"]["id"], "ubuntu");
    let cwsr = fault(&report, "cwsr-expert-sched");
    let steps = cwsr["next"].as_array().unwrap();
    let first = &steps[0];
    assert_eq!(first["action"], "rewrite-hipblaslt", "{cwsr:#}");
    assert_eq!(first["role"], "do", "{cwsr:#}");
    assert_eq!(
        words(&first["commands"][0]),
        [
            "rocm-patchkit",
            "rewrite-hipblaslt",
            &format!("/{TORCH_LIB}")
        ]
    );
    let kernel = steps
        .iter()
        .find(|s| s["action"] == "upgrade-kernel")
        .unwrap_or_else(|| panic!("a kernel step in {cwsr:#}"));
    let text = kernel["text"].as_str().unwrap();
    assert!(text.contains("6.18.4 or later"), "{text}");
    assert!(text.contains("Ubuntu 24.04"), "{text}");
    assert_eq!(kernel["cost"], "a reboot into a new kernel series");
    assert!(steps.iter().all(|s| s["text"].as_str().is_some()));

    let mut plans = BTreeMap::new();
    let installed = |args: &[String]| {
        let args: Vec<String> = args.iter().map(|a| below(&m, a)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&m, nowhere.path(), &args)
    };
    for step in all_steps(&report) {
        for c in step["commands"].as_array().unwrap() {
            check(&words(c), "apt", &mut plans, &installed);
        }
    }
    let after = run(&m, nowhere.path(), &["doctor", "--root", &root, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&after.stdout).unwrap();
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "mitigated", "{cwsr:#}");
}

/// The steps of the checkout's doctor on `m`, each command checked with
/// the distribution's `tool`.
fn checked_steps(m: &FakeMachine, tool: &str) -> serde_json::Value {
    let (run, report) = m.report();
    run.fails_with(3);
    let mut plans = BTreeMap::new();
    let xtask = |args: &[String]| {
        let args: Vec<String> = args.iter().map(|a| below(m, a)).collect();
        Run::of(
            Command::new(env!("CARGO_BIN_EXE_xtask"))
                .args(&args)
                .env("PATCHKIT_ROOT", repo_root())
                .output()
                .unwrap(),
        )
    };
    for step in all_steps(&report) {
        for c in step["commands"].as_array().unwrap() {
            check(&words(c), tool, &mut plans, &xtask);
        }
    }
    report
}

#[test]
fn arch_lts_6_12_48_upgrades_its_kernel_first() {
    let m = rdna4("6.12.48-1-lts", ARCH);
    let report = checked_steps(&m, "pacman");
    let cwsr = fault(&report, "cwsr-expert-sched");
    let first = &cwsr["next"][0];
    assert_eq!(first["action"], "upgrade-kernel", "{cwsr:#}");
    assert_eq!(
        words(&first["commands"][0]),
        ["sudo", "pacman", "-Syu", "linux-lts"]
    );
    assert!(first["text"].as_str().unwrap().contains("6.12.64 or later"));
    assert_eq!(first["cost"], "a reboot");
    let install = cwsr["next"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["action"] == "install")
        .unwrap();
    assert_eq!(
        words(&install["commands"][0]),
        [
            "sudo",
            "pacman",
            "-U",
            "./dist/amdgpu-expert-sched-6.12/*.pkg.tar.zst"
        ]
    );
    m.doctor(&[])
        .fails_with(3)
        .stdout_has("  next  upgrade Arch Linux's kernel to 6.12.64 or later")
        .stdout_has("          sudo pacman -Syu linux-lts\n");
}

#[test]
fn fedora_on_6_14_without_a_library_to_rewrite_moves_its_kernel_before_a_build() {
    let m = rdna4("6.14.5-300.fc42.x86_64", FEDORA);
    let report = checked_steps(&m, "dnf");
    let cwsr = fault(&report, "cwsr-expert-sched");
    let actions: Vec<&str> = cwsr["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions[..3],
        ["upgrade-kernel", "build", "install"],
        "{cwsr:#}"
    );
    let first = &cwsr["next"][0];
    assert_eq!(
        words(&first["commands"][0]),
        ["sudo", "dnf", "upgrade", "--refresh", "kernel"]
    );
    assert!(first["text"].as_str().unwrap().contains("6.18.4 or later"));
}

#[test]
fn without_os_release_the_steps_say_what_to_do_in_words() {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032).kernel("6.18.2").amdgpu(1);
    let report = checked_steps(&m, "none");
    let cwsr = fault(&report, "cwsr-expert-sched");
    let first = &cwsr["next"][0];
    assert_eq!(first["action"], "upgrade-kernel", "{cwsr:#}");
    assert!(first["commands"].as_array().unwrap().is_empty());
    let text = first["text"].as_str().unwrap();
    assert!(
        text.contains("6.18.4 or later") && text.contains("package manager"),
        "{text}"
    );
    let unread = report["machine"]["unread"].to_string();
    assert!(unread.contains("/etc/os-release"), "{unread}");
}
