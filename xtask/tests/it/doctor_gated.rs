//! A hipBLASLt whose gfx1201 kernels gate expert scheduling on the kernel
//! argument `ESMRuntimeSupported` (kernel files assembled by `llvm-mc-19`
//! in tensilelite's form): doctor says gated, naming the argument and the
//! site, and on an RDNA4 machine with an unfixed kernel the
//! expert-scheduling fault is not affected; `rewrite-hipblaslt` changes
//! none of its files and says why, and `--force` rewrites them.

use std::path::{Path, PathBuf};

use crate::support::codeobj::{gated_kernel_file, Gating};
use crate::support::doctor::{fault, FakeMachine};
use crate::support::inplace::{digests, rewrite};

const SITE: &str = "home/user/venv/lib/python3.12/site-packages";
const KERNEL: &str = "Cijk_Ailk_Bjlk_BBS_BH_UserArgs_MT64x64x64_MI16x16x1_DTVB1_ISA1201";

/// RDNA4 on 6.14 (no fix, KFD ABI below 1.20), a venv whose PyTorch wheel
/// holds a hipBLASLt with two gated kernel files, or `None` (a skip)
/// without llvm-mc-19 outside CI.
fn machine(gating: Gating) -> Option<FakeMachine> {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    m.file(
        &format!("{SITE}/torch/version.py"),
        "__version__ = '2.11.0+rocm7.14'\nhip = '7.14.26123'\n",
    );
    m.file(&format!("{SITE}/torch/lib/libhipblaslt.so"), "ELF");
    for (n, name) in ["TensileLibrary_BB_gfx1201.co", "Kernels_gfx1201.co"]
        .iter()
        .enumerate()
    {
        let file = gated_kernel_file(&format!("{KERNEL}_{n}"), gating)?;
        let path = kernels(&m).join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, file).unwrap();
    }
    Some(m)
}

fn kernels(m: &FakeMachine) -> PathBuf {
    m.root().join(SITE).join("torch/lib/hipblaslt/library")
}

fn library(report: &serde_json::Value) -> &serde_json::Value {
    report["machine"]["hipblaslt_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| {
            l["path"]
                .as_str()
                .unwrap()
                .ends_with("torch/lib/libhipblaslt.so")
        })
        .unwrap_or_else(|| panic!("the venv's hipBLASLt in {:#}", report["machine"]))
}

fn doctor(m: &FakeMachine) -> serde_json::Value {
    let run = m.doctor(&["--json", "--python", "/home/user/venv"]);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.stderr))
}

#[test]
fn a_gated_library_is_no_trigger_on_an_unfixed_kernel() {
    let Some(m) = machine(Gating::Gated) else {
        return;
    };
    let report = doctor(&m);
    let lib = library(&report);
    let judgement = &lib["judgement"];
    assert_eq!(judgement["verdict"], "gated", "{lib:#}");
    assert_eq!(judgement["gate"]["argument"], "ESMRuntimeSupported");
    assert_eq!(judgement["gate"]["arg_offset"], 104);
    assert!(judgement["gate"]["kernel"]
        .as_str()
        .unwrap()
        .starts_with(KERNEL));
    assert_eq!(judgement["files"], 2);
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "not-affected", "{cwsr:#}");
    let why = cwsr["why"].as_str().unwrap();
    assert!(
        why.contains("gated on KFD ABI 1.20: off on this kernel"),
        "{why}"
    );
    let abi = fault(&report, "kfd-abi-expert-sched");
    assert!(
        abi["why"]
            .as_str()
            .unwrap()
            .contains("gates expert scheduling on KFD ABI 1.20"),
        "{abi:#}"
    );

    let text = m.doctor(&["--python", "/home/user/venv"]);
    assert!(
        text.stdout.contains("expert scheduling gated on KFD 1.20"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("ESMRuntimeSupported"),
        "{}",
        text.stdout
    );

    // the same kernels without the test: on, and the fault affected
    let Some(on) = machine(Gating::Ungated) else {
        return;
    };
    let report = doctor(&on);
    assert_eq!(library(&report)["judgement"]["verdict"], "on");
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "affected");
}

#[test]
fn rewrite_leaves_gated_files_alone_and_force_rewrites_them() {
    let Some(m) = machine(Gating::Gated) else {
        return;
    };
    let home = m.root().join("home/user");
    let venv = m.root().join("home/user/venv").display().to_string();
    let before = digests(&kernels(&m));
    let run = rewrite(&home, &["--python", &venv]);
    run.success()
        .stdout_has(
            "2 kernel files left as they are (2 sites gated (kernel argument ESMRuntimeSupported",
        )
        .stdout_has("only when the kernel reports KFD ABI 1.20")
        .stdout_has("--force rewrites them too");
    assert_eq!(digests(&kernels(&m)), before, "no gated file changed");
    assert!(!Path::new(&kernels(&m).join(".patchkit")).exists());

    let forced = rewrite(&home, &["--python", &venv, "--force"]);
    forced
        .success()
        .stdout_has("2 kernel files rewritten (2 sites");
    let report = doctor(&m);
    let lib = library(&report);
    assert_eq!(lib["judgement"]["verdict"], "off", "{lib:#}");
    assert!(lib["rewritten"].is_string(), "{lib:#}");
    rewrite(&home, &["--python", &venv, "--undo"]).success();
    assert_eq!(digests(&kernels(&m)), before, "undone byte for byte");
}
