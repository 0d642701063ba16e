//! `cargo xtask doctor` against fake machine trees (`--root`), one per
//! verdict, through the real binary; and the repository rules that every
//! recipe the knowledge file names exists or is announced, and builds for
//! every kernel the knowledge offers it for.

use std::collections::BTreeSet;

use crate::support::doctor::{fault, next, FakeMachine};
use crate::support::repo_root;

/// Recipes the knowledge file names that are still being written; each
/// must land in recipes/ (then leave this list) before a release.
const STILL_TO_COME: &[&str] = &[];

fn rdna4_on_6_14() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1)
        .rocm("7.1.1-53", "1.1.0");
    m
}

#[test]
fn rdna4_on_6_14_with_rocm_7_1_is_affected_and_names_the_recipe() {
    let m = rdna4_on_6_14();
    let (run, report) = m.report();
    run.fails_with(3);
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    let steps = next(cwsr);
    assert!(
        steps.starts_with("cargo xtask build-dkms amdgpu-expert-sched-6.14\n"),
        "{steps}"
    );
    assert!(steps.contains("dist/amdgpu-expert-sched-6.14/"), "{steps}");
    assert!(steps.contains("cargo xtask build-hipblaslt hipblaslt-rocm-7.1-expert-sched-off"));
    assert!(
        steps.contains("cargo xtask build-config amdgpu-cwsr-off"),
        "{steps}"
    );
    assert!(steps.contains("amdgpu.cwsr_enable=0"), "{steps}");
    assert_eq!(report["machine"]["gpus"][0]["gfx"], "gfx1201");
    assert_eq!(report["machine"]["hipblaslt_version"], "1.1.0");
    assert_eq!(
        fault(&report, "tensile-gltr-dtvb1")["status"],
        "not-affected"
    );

    let text = m.doctor(&[]);
    text.fails_with(3)
        .stdout_has("gfx1201 (KFD node 1, device 0x7550)")
        .stdout_has("AFFECTED      cwsr-expert-sched")
        .stdout_has("  next  build the DKMS package of the fix (cost: ")
        .stdout_has("\n          cargo xtask build-dkms amdgpu-expert-sched-6.14\n")
        .stdout_has("https://github.com/ROCm/ROCm/issues/5051")
        .stdout_has("1 known fault affects this machine: cwsr-expert-sched (exit status 3)");
}

#[test]
fn debian_6_12_117_carries_the_fix_but_not_the_abi_flag() {
    let m = FakeMachine::new();
    m.gpu(1, 120000, 30016)
        .kernel("6.12.117+deb12-amd64")
        .amdgpu(1)
        .rocm("7.1.1", "1.1.0");
    let (run, report) = m.report();
    run.success();
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "fixed", "{cwsr:#}");
    assert!(cwsr["why"]
        .as_str()
        .unwrap()
        .contains("6.12.117+deb12-amd64 carries the fix"));
    let abi = fault(&report, "kfd-abi-expert-sched");
    assert_eq!(abi["status"], "info", "{abi:#}");
    assert_eq!(abi["severity"], "info");
    m.doctor(&[])
        .success()
        .stdout_has("fixed         cwsr-expert-sched")
        .stdout_has("info          kfd-abi-expert-sched: KFD ABI 1.20 missing: hipBLASLt cannot switch expert scheduling back on")
        .stdout_has("judged from the kernel version")
        .stdout_has("no known fault affects this machine unmitigated");
}

#[test]
fn cwsr_off_is_mitigated() {
    let m = rdna4_on_6_14();
    m.amdgpu(0);
    let (run, report) = m.report();
    run.success();
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "mitigated", "{cwsr:#}");
    assert!(next(cwsr).contains("cargo xtask build-dkms amdgpu-expert-sched-6.14"));

    // Without the module loaded, the kernel command line tells.
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.17.0-5-generic")
        .cmdline("BOOT_IMAGE=/vmlinuz ro quiet amdgpu.cwsr_enable=0");
    let (run, report) = m.report();
    run.success();
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "mitigated", "{cwsr:#}");
    assert!(cwsr["why"]
        .as_str()
        .unwrap()
        .contains("kernel command line"));
}

#[test]
fn gfx1100_is_not_affected() {
    let m = FakeMachine::new();
    m.gpu(1, 110000, 29772)
        .kernel("6.14.0-36-generic")
        .amdgpu(1)
        .rocm("7.1.1", "1.1.0");
    let (run, report) = m.report();
    run.success();
    for f in report["faults"].as_array().unwrap() {
        assert_eq!(f["status"], "not-affected", "{f:#}");
    }
    m.doctor(&[])
        .success()
        .stdout_has("gfx1100 is not affected: the fault is on gfx1200, gfx1201");
}

#[test]
fn unreadable_files_cannot_tell_and_are_named() {
    // A folder where the properties file should be: unreadable even as root.
    let m = FakeMachine::new();
    m.kernel("6.14.0-36-generic").amdgpu(1);
    std::fs::create_dir_all(
        m.root()
            .join("sys/class/kfd/kfd/topology/nodes/1/properties"),
    )
    .unwrap();
    let (run, report) = m.report();
    run.success();
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "cannot-tell");
    let unread = report["machine"]["unread"].as_array().unwrap();
    assert!(
        unread
            .iter()
            .any(|u| u["path"] == "/sys/class/kfd/kfd/topology/nodes/1/properties"),
        "{unread:#?}"
    );
    m.doctor(&[])
        .success()
        .stdout_has("cannot tell   cwsr-expert-sched")
        .stdout_has("could not read\n")
        .stdout_has("  - /sys/class/kfd/kfd/topology/nodes/1/properties: ");

    // Content that is not KFD's, and no kernel release.
    let m = FakeMachine::new();
    m.file(
        "sys/class/kfd/kfd/topology/nodes/1/properties",
        "gfx_target_version gfx1201\n",
    );
    let (run, report) = m.report();
    run.success();
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "cannot-tell");
    m.doctor(&[])
        .success()
        .stdout_has(
            "/sys/class/kfd/kfd/topology/nodes/1/properties: no numeric `gfx_target_version` line",
        )
        .stdout_has("/proc/sys/kernel/osrelease: does not exist");
}

#[test]
fn rdna2_with_miopen_gets_the_env_workaround() {
    let mut m = FakeMachine::new();
    m.gpu(1, 100300, 29631)
        .kernel("6.1.0-18-amd64")
        .amdgpu(1)
        .rocm("6.4.1", "0.12.1")
        .miopen();
    let (run, report) = m.report();
    run.fails_with(3);
    let miopen = fault(&report, "miopen-rdna12-conv");
    assert_eq!(miopen["status"], "affected", "{miopen:#}");
    assert!(next(miopen)
        .contains("export MIOPEN_DEBUG_CONV_GEMM=0 MIOPEN_DEBUG_CONV_DIRECT_OCL_WRW2=0"));
    assert_eq!(
        fault(&report, "cwsr-expert-sched")["status"],
        "not-affected"
    );

    m.env("MIOPEN_DEBUG_CONV_GEMM", "0")
        .env("MIOPEN_DEBUG_CONV_DIRECT_OCL_WRW2", "0");
    let (run, report) = m.report();
    run.success();
    assert_eq!(fault(&report, "miopen-rdna12-conv")["status"], "mitigated");
}

#[test]
fn rocm_7_2_on_gfx1201_has_the_tensile_fault() {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.19.2-arch1-1")
        .amdgpu(1)
        .rocm("7.2.1-81", "1.2.1");
    let (run, report) = m.report();
    run.fails_with(3);
    let tensile = fault(&report, "tensile-gltr-dtvb1");
    assert_eq!(tensile["status"], "affected", "{tensile:#}");
    assert!(next(tensile).starts_with("cargo xtask build-hipblaslt hipblaslt-rocm-7.2-gltr-bound"));
    assert!(tensile["links"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l == "https://github.com/ROCm/rocm-libraries/pull/8909"));
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "fixed");
}

#[test]
fn our_patched_hipblaslt_on_the_library_path_fixes_the_tensile_fault() {
    let mut m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.19.2-arch1-1")
        .amdgpu(1)
        .rocm("7.2.1-81", "1.2.1")
        .file(
            "opt/rocm-patchkit/hipblaslt-7.2.1/lib/libhipblaslt.so.1.2.1",
            "ELF",
        );
    let (run, report) = m.report();
    run.fails_with(3);
    let steps = next(fault(&report, "tensile-gltr-dtvb1"));
    assert!(
        steps.starts_with("export LD_LIBRARY_PATH=/opt/rocm-patchkit/hipblaslt-7.2.1/lib"),
        "{steps}"
    );
    m.env("LD_LIBRARY_PATH", "/opt/rocm-patchkit/hipblaslt-7.2.1/lib");
    let (run, report) = m.report();
    assert_eq!(fault(&report, "tensile-gltr-dtvb1")["status"], "fixed");
    // the K-tail over-read of the same kernels has no fix yet, ours included
    run.fails_with(3);
    assert_eq!(fault(&report, "tensile-dtvb-ktail")["status"], "affected");
}

#[test]
fn our_fix_package_loaded_is_fixed() {
    let m = rdna4_on_6_14();
    m.dkms("amdgpu-expert-sched", "6.14.0.1", "6.14.0-36-generic")
        .amdgpu_version("6.14.0.1");
    let (run, report) = m.report();
    run.success();
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "fixed", "{cwsr:#}");
    let dkms = &report["machine"]["dkms"][0];
    assert_eq!(dkms["loaded"], true);
    assert_eq!(dkms["built_for"], serde_json::json!(["6.14.0-36-generic"]));

    // Installed but the in-tree module still loaded: still affected, and said.
    std::fs::remove_file(m.root().join("sys/module/amdgpu/version")).unwrap();
    let (run, report) = m.report();
    run.fails_with(3);
    let why = fault(&report, "cwsr-expert-sched")["why"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.contains("is built for this kernel but not loaded: reboot"),
        "{why}"
    );
}

#[test]
fn our_build_without_a_version_is_told_by_srcversion() {
    let m = rdna4_on_6_14();
    // amdgpu() gives the loaded module srcversion 5D1F0E2A3B4C6D7E8F90A1B.
    m.dkms_built(
        "amdgpu-expert-sched",
        "6.14.0.1",
        "6.14.0-36-generic",
        "5D1F0E2A3B4C6D7E8F90A1B",
    )
    .dkms_built(
        "amdgpu-expert-sched",
        "6.14.0.0",
        "6.14.0-36-generic",
        "0000000000000000000000A",
    );
    let (run, report) = m.report();
    run.success();
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "fixed");
    let dkms = report["machine"]["dkms"].as_array().unwrap();
    assert_eq!(dkms[0]["loaded"], false);
    assert_eq!(dkms[1]["version"], "6.14.0.1");
    assert_eq!(dkms[1]["loaded_by"], "srcversion");
    m.doctor(&[]).success().stdout_has(
        "amdgpu-expert-sched 6.14.0.1 (ours, built for 6.14.0-36-generic, loaded, told by srcversion)",
    );
}

#[test]
fn the_json_report_is_stable_and_sorted() {
    let m = rdna4_on_6_14();
    let first = m.doctor(&["--json"]).stdout;
    assert_eq!(first, m.doctor(&["--json"]).stdout);
    let report: serde_json::Value = serde_json::from_str(&first).unwrap();
    let keys: Vec<&String> = report["machine"].as_object().unwrap().keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    let top = first.find("\"faults\"").unwrap();
    assert!(top < first.find("\"machine\"").unwrap());
}

#[test]
fn a_missing_root_is_a_usage_error() {
    let m = FakeMachine::new();
    let run = crate::support::Run::of(
        std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["doctor", "--root"])
            .arg(m.root().join("nope"))
            .env("PATCHKIT_ROOT", repo_root())
            .output()
            .unwrap(),
    );
    run.fails_with(2).stderr_has("is not a folder");
}

#[test]
fn every_recipe_the_knowledge_names_exists_or_is_announced() {
    let root = repo_root();
    let knowledge =
        xtask::input::knowledge::Knowledge::load(&root).unwrap_or_else(|e| panic!("{e:#}"));
    let recipes: BTreeSet<String> = xtask::input::recipe::list(&root)
        .unwrap()
        .into_iter()
        .collect();
    for name in knowledge.recipes() {
        assert!(
            recipes.contains(&name) || STILL_TO_COME.contains(&name.as_str()),
            "knowledge/faults.toml names recipe `{name}`, which is neither in recipes/ nor in STILL_TO_COME"
        );
    }
    for name in STILL_TO_COME {
        assert!(
            knowledge.recipes().contains(*name),
            "STILL_TO_COME lists `{name}`, which the knowledge file does not name"
        );
    }
    // A stop-gap is a config package, built by `cargo xtask build-config`.
    for fault in &knowledge.faults {
        for stopgap in fault.stopgap.iter().filter(|s| recipes.contains(*s)) {
            let recipe = xtask::input::recipe::Recipe::load(&root, stopgap)
                .unwrap_or_else(|e| panic!("recipe {stopgap}: {e:#}"));
            assert_eq!(
                recipe.kind.name(),
                xtask::input::recipe::KindName::Config,
                "fault {} names stop-gap {stopgap}, which is not a config recipe",
                fault.id
            );
        }
    }
    // A fix recipe that exists is built by the command the knowledge names,
    // and a DKMS kernel fix is recognised when its package is loaded.
    for fault in &knowledge.faults {
        for fix in fault.fixes.iter().filter(|f| recipes.contains(&f.recipe)) {
            let recipe = xtask::input::recipe::Recipe::load(&root, &fix.recipe)
                .unwrap_or_else(|e| panic!("recipe {}: {e:#}", fix.recipe));
            assert_eq!(
                recipe.kind.name().as_str(),
                format!("{:?}", fix.build).to_lowercase(),
                "fault {} names {} with the wrong build",
                fault.id,
                fix.recipe
            );
            if fix.recipe.starts_with("amdgpu-expert-sched-") {
                assert!(
                    fault.fixed_by_packages.contains(&recipe.package.name),
                    "{}: package {} missing from fixed_by_packages",
                    fix.recipe,
                    recipe.package.name
                );
            }
            // doctor offers a DKMS fix only where its package builds: every
            // kernel the fix is offered for is inside the recipe's range
            // (whose BUILD_EXCLUSIVE_KERNEL skips the others).
            if let (Some(offered), Some(builds)) = (&fix.kernel, &recipe.target.kernel) {
                let outside: Vec<String> = (0..=25)
                    .flat_map(|minor| (0..=300).map(move |patch| (minor, patch)))
                    .map(|(minor, patch)| xtask::input::kernel::KernelVersion(6, minor, patch))
                    .filter(|v| offered.matches(*v) && !builds.matches(*v))
                    .map(|v| v.to_string())
                    .collect();
                assert!(
                    outside.is_empty(),
                    "fault {} offers {} for kernels its `kernel = \"{}\"` refuses: {}",
                    fault.id,
                    fix.recipe,
                    builds.as_str(),
                    outside.join(", ")
                );
            }
        }
    }
}

#[test]
fn help_documents_the_exit_status() {
    crate::support::Project::new()
        .xtask(&["doctor", "--help"])
        .success()
        .stdout_has("3 when at least one does")
        .stdout_has("never changes the system");
}

#[test]
fn an_invalid_knowledge_file_is_located() {
    let p = crate::support::Project::new();
    p.file(
        "knowledge/faults.toml",
        "[[fault]]\nid = \"x\"\ntitle = \"t\"\nseverity = \"fault\"\ngfx = [\"gfx1201\"]\nsummary = \"s\"\nlinks = []\nworkaround = \"w\"\nrocm = \"7.1\"\n",
    );
    p.file(
        "knowledge/knobs.toml",
        include_str!("../../../knowledge/knobs.toml"),
    );
    let machine = FakeMachine::new();
    let root = machine.root().to_str().unwrap();
    p.xtask(&["doctor", "--root", root])
        .fails_with(2)
        .stderr_has("knowledge/faults.toml:9:8: `rocm`: `7.1` is not a comparator");
    let empty = crate::support::Project::new();
    empty
        .xtask(&["doctor", "--root", root])
        .fails_with(1)
        .stderr_has("reading the knowledge file");
}

#[test]
fn the_tensile_fault_follows_the_hipblaslt_version_on_gfx12() {
    for (gfx, rocm, hipblaslt, want) in [
        (120001, "7.2.1-81", "1.2.1", "affected"),
        (120001, "7.12.0", "1.3.0", "affected"),
        (120001, "7.14.0", "1.4.0", "affected"),
        (120000, "10.0.0", "1.4.2", "affected"),
        (120001, "10.1.0", "1.5.0", "fixed"),
        (110000, "7.2.1-81", "1.2.1", "not-affected"),
    ] {
        let m = FakeMachine::new();
        m.gpu(1, gfx, 30032)
            .kernel("6.19.2-arch1-1")
            .amdgpu(1)
            .rocm(rocm, hipblaslt);
        let (_, report) = m.report();
        let tensile = fault(&report, "tensile-gltr-dtvb1");
        assert_eq!(tensile["status"], want, "{gfx} {hipblaslt}: {tensile:#}");
    }
}
