//! Unit tests of the verdict functions against the real knowledge file and
//! machines built in memory (no files read).

use std::path::Path;

use super::*;
use crate::doctor::machine::{AmdgpuModule, DkmsPackage, Gpu};
use crate::doctor::module::{ModuleFile, TrapHandler};
use crate::input::knowledge::{self, Knowledge};

fn knowledge() -> Knowledge {
    let text = include_str!("../../../knowledge/faults.toml");
    knowledge::parse(Path::new("knowledge/faults.toml"), text).expect("the knowledge file parses")
}

fn fault(id: &str) -> Fault {
    knowledge()
        .faults
        .into_iter()
        .find(|f| f.id == id)
        .expect("fault in the knowledge file")
}

fn gpu(version: u32) -> Gpu {
    Gpu {
        node: "1".into(),
        gfx: crate::doctor::probe::gfx_name(version),
        gfx_target_version: version,
        device_id: None,
    }
}

fn machine(gfx: u32, kernel: &str, rocm: &str) -> Machine {
    Machine {
        gpus: Some(vec![gpu(gfx)]),
        kernel_release: Some(kernel.into()),
        cmdline: Some("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet".into()),
        cwsr_enable: Some(1),
        rocm_version: Some(rocm.into()),
        amdgpu: Some(AmdgpuModule {
            version: None,
            srcversion: Some("ABCDEF0123456789ABCDEF0".into()),
        }),
        ..Machine::default()
    }
}

const CWSR: &str = "cwsr-expert-sched";

#[test]
fn rdna4_on_6_14_is_affected_and_named_its_recipe() {
    let v = assess(
        &fault(CWSR),
        &machine(120001, "6.14.0-36-generic", "7.1.1-53"),
    );
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(
        v.why.contains("gfx1201") && v.why.contains("6.14.0-36-generic"),
        "{v:?}"
    );
    assert!(
        !v.why.contains("ROCm 7.1.1-53"),
        "judged by the kernels, not a ROCm number: {v:?}"
    );
    assert!(
        v.next[0]
            .to_string()
            .ends_with(": cargo xtask build-dkms amdgpu-expert-sched-6.14"),
        "{v:?}"
    );
    assert!(v.next.iter().any(|s| s
        .to_string()
        .contains("hipblaslt-rocm-7.1-expert-sched-off")));
    assert!(v
        .next
        .iter()
        .any(|s| s.to_string().contains("build-config amdgpu-cwsr-off")));
}

#[test]
fn a_6_11_kernel_is_affected_and_told_to_move_to_6_12_64() {
    let v = assess(&fault(CWSR), &machine(120001, "6.11.11", "7.1.1"));
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(
        v.next[0]
            .to_string()
            .starts_with("no package of ours for this kernel: 6.11")
            && v.next[0].to_string().contains("6.12.64 or later"),
        "{v:?}"
    );
    assert!(!v
        .next
        .iter()
        .any(|s| s.to_string().contains("amdgpu-expert-sched-6.11")));
    // 6.12 kernels are not retired: the stable upgrade comes first, then
    // their recipe.
    let v = assess(&fault(CWSR), &machine(120001, "6.12.63", "7.1.1"));
    assert!(
        v.next[0].to_string().contains("6.12.64 or later")
            && v.next[1].to_string().ends_with("amdgpu-expert-sched-6.12"),
        "{v:?}"
    );
}

#[test]
fn the_stable_fix_is_fixed_and_6_12_63_is_not() {
    let f = fault(CWSR);
    let v = assess(&f, &machine(120000, "6.12.117+deb12-amd64", "7.1.1"));
    assert_eq!(v.status, Status::Fixed, "{v:?}");
    assert!(v.next.is_empty());
    let v = assess(&f, &machine(120000, "6.12.63", "7.1.1"));
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(
        v.next[1].to_string().ends_with("amdgpu-expert-sched-6.12"),
        "{v:?}"
    );
    // Debian's own 6.12 tree (amdgpu-debian-6.12) builds only from 6.12.115
    // on (drm_sched_init_args): an affected Debian kernel is offered the
    // 6.12.63 tree instead.
    let v = assess(&f, &machine(120000, "6.12.50+deb13-amd64", "7.1.1"));
    assert!(
        v.next[1].to_string().ends_with("amdgpu-expert-sched-6.12"),
        "{v:?}"
    );
    assert!(
        !v.next
            .iter()
            .any(|s| s.to_string().ends_with("amdgpu-debian-6.12")),
        "{v:?}"
    );
    assert_eq!(
        assess(&f, &machine(120001, "6.19.0", "7.2.0")).status,
        Status::Fixed
    );
    assert_eq!(
        assess(&f, &machine(120001, "6.18.3-arch1-1", "7.2.0")).status,
        Status::Affected
    );
}

#[test]
fn kernels_before_6_11_do_not_support_rdna4() {
    let v = assess(&fault(CWSR), &machine(120001, "6.8.0-50-generic", "7.1.1"));
    assert_eq!(v.status, Status::NotAffected);
    assert!(v.why.contains("not supported there at all"), "{v:?}");
}

#[test]
fn cwsr_off_mitigates_and_says_how() {
    let f = fault(CWSR);
    let mut m = machine(120001, "6.14.0-36-generic", "7.1.1");
    m.cwsr_enable = Some(0);
    let v = assess(&f, &m);
    assert_eq!(v.status, Status::Mitigated, "{v:?}");
    assert!(v.why.contains("cwsr_enable is 0"));
    assert!(v
        .next
        .iter()
        .any(|s| s.to_string().ends_with("amdgpu-expert-sched-6.14")));
    m.cwsr_enable = None;
    m.cmdline = Some("quiet amdgpu.cwsr_enable=0".into());
    let v = assess(&f, &m);
    assert_eq!(v.status, Status::Mitigated);
    assert!(v.why.contains("command line"), "{v:?}");
    // The loaded module's parameter is the truth when it can be read.
    m.cwsr_enable = Some(1);
    assert_eq!(assess(&f, &m).status, Status::Affected);
}

#[test]
fn other_gpus_are_not_affected() {
    let v = assess(&fault(CWSR), &machine(110000, "6.14.0-36-generic", "7.1.1"));
    assert_eq!(v.status, Status::NotAffected);
    assert!(v.why.contains("gfx1100 is not affected"), "{v:?}");
    let mut m = machine(110000, "6.14.0", "7.1.1");
    m.gpus = Some(Vec::new());
    assert_eq!(assess(&fault(CWSR), &m).status, Status::NotAffected);
}

#[test]
fn unknown_gpus_or_kernel_cannot_tell() {
    let mut m = machine(120001, "6.14.0", "7.1.1");
    m.gpus = None;
    let v = assess(&fault(CWSR), &m);
    assert_eq!(v.status, Status::CannotTell);
    assert!(v.why.contains("no AMD GPU found"), "{v:?}");
    let mut m = machine(120001, "6.14.0", "7.1.1");
    m.kernel_release = None;
    assert_eq!(assess(&fault(CWSR), &m).status, Status::CannotTell);
}

#[test]
fn our_fix_package_loaded_is_fixed_and_a_foreign_driver_cannot_tell() {
    let f = fault(CWSR);
    let mut m = machine(120001, "6.14.0-36-generic", "7.1.1");
    m.amdgpu = Some(AmdgpuModule {
        version: Some("6.14.0.1".into()),
        srcversion: None,
    });
    m.dkms = vec![DkmsPackage {
        name: "amdgpu-expert-sched".into(),
        version: "6.14.0.1".into(),
        ours: true,
        built_for: vec!["6.14.0-36-generic".into()],
        loaded: true,
        loaded_by: Some("version".into()),
    }];
    let v = assess(&f, &m);
    assert_eq!(v.status, Status::Fixed, "{v:?}");
    m.dkms[0].loaded = false;
    let v = assess(&f, &m);
    assert_eq!(v.status, Status::CannotTell, "{v:?}");
    assert!(v.why.contains("out-of-tree driver"), "{v:?}");
    m.amdgpu = Some(AmdgpuModule {
        version: None,
        srcversion: None,
    });
    let v = assess(&f, &m);
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(v.why.contains("not loaded: reboot"), "{v:?}");
}

#[test]
fn the_abi_flag_is_info_until_7_0_or_read_from_kfd() {
    let f = fault("kfd-abi-expert-sched");
    let v = assess(&f, &machine(120000, "6.12.117+deb12-amd64", "7.1.1"));
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(v.why.contains("judged from the kernel version"), "{v:?}");
    assert!(
        v.next.iter().any(|s| s.to_string().contains("Linux 7.0")),
        "{v:?}"
    );
    assert_eq!(
        assess(&f, &machine(120000, "7.0.1", "7.1.1")).status,
        Status::Fixed
    );
    let mut m = machine(120000, "6.12.117", "7.1.1");
    m.kfd_abi = Some((1, 20));
    assert_eq!(assess(&f, &m).status, Status::Fixed);
    m.kfd_abi = Some((1, 18));
    assert_eq!(assess(&f, &m).status, Status::Affected);
}

#[test]
fn the_tensile_fault_follows_hipblaslt_1_2_to_1_5_on_gfx12() {
    let f = fault("tensile-gltr-dtvb1");
    let with = |gfx: u32, rocm: &str, hipblaslt: &str| {
        let mut m = machine(gfx, "6.19.0", rocm);
        m.hipblaslt_version = Some(hipblaslt.into());
        assess(&f, &m)
    };
    let v = with(120001, "7.2.1", "1.2.1");
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(
        v.next[0]
            .to_string()
            .ends_with(": cargo xtask build-hipblaslt hipblaslt-rocm-7.2-gltr-bound"),
        "{v:?}"
    );
    // ROCm 7.12, 7.14 and 10.0 ship hipBLASLt 1.3 and 1.4: still affected,
    // on gfx1200 too.
    for (rocm, hipblaslt) in [
        ("7.12.0", "1.3.0"),
        ("7.14.0", "1.4.0"),
        ("10.0.0", "1.4.2"),
    ] {
        for gfx in [120001, 120000] {
            let v = with(gfx, rocm, hipblaslt);
            assert_eq!(v.status, Status::Affected, "{rocm} {gfx}: {v:?}");
        }
    }
    assert_eq!(with(120001, "7.1.1", "1.1.0").status, Status::NotAffected);
    assert_eq!(with(120001, "10.1.0", "1.5.0").status, Status::Fixed);
    assert_eq!(with(110000, "7.2.1", "1.2.1").status, Status::NotAffected);
    let mut m = machine(120001, "6.19.0", "7.2.1");
    m.hipblaslt_version = None;
    assert_eq!(assess(&f, &m).status, Status::CannotTell);
}

#[test]
fn the_miopen_fault_needs_miopen_and_is_mitigated_by_its_env() {
    let f = fault("miopen-rdna12-conv");
    let mut m = machine(100300, "6.1.0-18-amd64", "6.4.1");
    assert_eq!(assess(&f, &m).status, Status::CannotTell);
    m.miopen = Some("/opt/rocm/lib/libMIOpen.so.1.0.60401".into());
    let v = assess(&f, &m);
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(v.next[0]
        .to_string()
        .contains("MIOPEN_DEBUG_CONV_GEMM=0 MIOPEN_DEBUG_CONV_DIRECT_OCL_WRW2=0"));
    assert_eq!(
        assess(&f, &machine(100100, "6.1.0", "6.4.1")).status,
        Status::CannotTell
    );
    m.env.insert("MIOPEN_DEBUG_CONV_GEMM".into(), "0".into());
    assert_eq!(assess(&f, &m).status, Status::Affected);
    m.env
        .insert("MIOPEN_DEBUG_CONV_DIRECT_OCL_WRW2".into(), "0".into());
    assert_eq!(assess(&f, &m).status, Status::Mitigated);
}

#[test]
fn our_patched_hipblaslt_counts_only_on_the_library_path() {
    let f = fault("tensile-gltr-dtvb1");
    let mut m = machine(120001, "6.19.0", "7.2.1");
    m.hipblaslt_version = Some("1.2.1".into());
    m.patched_hipblaslt = vec!["/opt/rocm-patchkit/hipblaslt-7.1.1".into()];
    assert_eq!(assess(&f, &m).status, Status::Affected);
    m.patched_hipblaslt
        .push("/opt/rocm-patchkit/hipblaslt-7.2.1".into());
    let v = assess(&f, &m);
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(v.next[0]
        .to_string()
        .contains(": export LD_LIBRARY_PATH=/opt/rocm-patchkit/hipblaslt-7.2.1/lib"));
    m.env.insert(
        "LD_LIBRARY_PATH".into(),
        "/usr/local/lib:/opt/rocm-patchkit/hipblaslt-7.2.1/lib/".into(),
    );
    assert_eq!(assess(&f, &m).status, Status::Fixed);
    // For the kernel fault, the userspace side mitigates.
    let mut m = machine(120001, "6.14.0-36-generic", "7.1.1");
    m.patched_hipblaslt = vec!["/opt/rocm-patchkit/hipblaslt-7.1.1".into()];
    m.env.insert(
        "LD_LIBRARY_PATH".into(),
        "/opt/rocm-patchkit/hipblaslt-7.1.1/lib".into(),
    );
    assert_eq!(assess(&fault(CWSR), &m).status, Status::Mitigated);
}

fn with_module(mut m: Machine, trap_handler: TrapHandler, srcversion: &str) -> Machine {
    m.amdgpu_file = Some(ModuleFile {
        path: "/lib/modules/k/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz".into(),
        sha256: Some("0".repeat(64)),
        trap_handler,
        why: format!("the module reads {trap_handler:?}"),
        srcversion: Some(srcversion.into()),
    });
    m
}

const LOADED: &str = "ABCDEF0123456789ABCDEF0";

#[test]
fn a_fixed_module_wins_over_an_affected_version() {
    // Ubuntu's 6.14.0-NN with the fix backported.
    let m = with_module(
        machine(120001, "6.14.0-36-generic", "7.1.1"),
        TrapHandler::Fixed,
        LOADED,
    );
    let v = assess(&fault(CWSR), &m);
    assert_eq!(v.status, Status::Fixed, "{v:?}");
    assert!(v.why.contains("the module reads Fixed"), "{v:?}");
}

#[test]
fn an_unfixed_module_wins_over_a_fixed_version() {
    let m = with_module(
        machine(120001, "6.12.117+deb12-amd64", "7.1.1"),
        TrapHandler::Unfixed,
        LOADED,
    );
    let v = assess(&fault(CWSR), &m);
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(v.why.contains("the module reads Unfixed"), "{v:?}");
    assert!(
        v.next[0].to_string().ends_with("amdgpu-debian-6.12"),
        "{v:?}"
    );
}

#[test]
fn a_module_that_cannot_tell_falls_back_to_the_range_and_says_so() {
    let m = with_module(
        machine(120001, "6.14.0-36-generic", "7.1.1"),
        TrapHandler::CannotTell,
        LOADED,
    );
    let v = assess(&fault(CWSR), &m);
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(
        v.why.contains("cannot tell from the module")
            && v.why.contains("judged by the kernel version"),
        "{v:?}"
    );
}

#[test]
fn a_fixed_file_that_is_not_the_loaded_module_is_not_trusted() {
    let m = with_module(
        machine(120001, "6.14.0-36-generic", "7.1.1"),
        TrapHandler::Fixed,
        "0000000000000000000000",
    );
    let v = assess(&fault(CWSR), &m);
    assert_eq!(v.status, Status::Affected, "{v:?}");
    assert!(v.why.contains("reboot to load it"), "{v:?}");
}

#[test]
fn no_gfx12_handler_is_not_affected() {
    let m = with_module(
        machine(120001, "6.1.0-56-amd64", "7.1.1"),
        TrapHandler::NoGfx12,
        LOADED,
    );
    let v = assess(&fault(CWSR), &m);
    assert_eq!(v.status, Status::NotAffected, "{v:?}");
}

fn library(
    path: &str,
    judgement: crate::gpu::codeobj::Judgement,
) -> crate::doctor::hipblaslt::HipblasltLibrary {
    crate::doctor::hipblaslt::HipblasltLibrary {
        path: path.into(),
        kind: crate::doctor::hipblaslt::LibraryKind::Pytorch,
        version: Some("1.4".into()),
        rocm: None,
        kernels: format!("{path}/../hipblaslt/library"),
        ours: None,
        rewritten: None,
        record_refused: None,
        judgement,
    }
}

fn gated() -> crate::gpu::codeobj::Judgement {
    crate::gpu::codeobj::Judgement::Gated {
        file: "/venv/torch/lib/hipblaslt/library/k_gfx1201.co".into(),
        gfx: "gfx1201".into(),
        offset: 0x40,
        gate: crate::gpu::codeobj::gate::Gate {
            kernel: "Cijk_k".into(),
            argument: "ESMRuntimeSupported".into(),
            arg_offset: 104,
            register: "v5 <- s47".into(),
        },
        files: 3,
    }
}

#[test]
fn gated_libraries_are_no_trigger_below_kfd_1_20_and_the_fast_path_with_it() {
    let mut m = machine(120001, "6.14.0-36-generic", "7.1.1");
    m.hipblaslt_libraries = vec![library("/venv/torch/lib/libhipblaslt.so", gated())];
    let v = assess(&fault(CWSR), &m);
    assert_eq!(v.status, Status::NotAffected, "{v:?}");
    assert!(
        v.why.contains("gated on KFD ABI 1.20: off on this kernel"),
        "{v:?}"
    );
    let abi = assess(&fault("kfd-abi-expert-sched"), &m);
    assert_eq!(abi.status, Status::Affected, "{abi:?}");
    assert!(
        abi.why
            .contains("libhipblaslt.so gates expert scheduling on KFD ABI 1.20: off"),
        "{abi:?}"
    );

    // Linux 7.0 with KFD ABI 1.20 read from /dev/kfd: the fast path
    m.kernel_release = Some("7.0.0-10-generic".into());
    m.kfd_abi = Some((1, 20));
    let v = assess(&fault("kfd-abi-expert-sched"), &m);
    assert_eq!(v.status, Status::Fixed, "{v:?}");
    assert!(
        v.why
            .contains("expert scheduling on here (KFD ABI 1.20 read from /dev/kfd): the fast path"),
        "{v:?}"
    );
    assert_eq!(assess(&fault(CWSR), &m).status, Status::Fixed);

    // one library that switches it on unconditionally keeps the fault
    m.kernel_release = Some("6.14.0-36-generic".into());
    m.kfd_abi = Some((1, 18));
    let on = crate::gpu::codeobj::Judgement::On {
        file: "/opt/rocm/lib/hipblaslt/library/k.co".into(),
        gfx: "gfx1201".into(),
        offset: 0x10,
    };
    m.hipblaslt_libraries
        .push(library("/opt/rocm/lib/libhipblaslt.so.1.1", on));
    assert_eq!(assess(&fault(CWSR), &m).status, Status::Affected);
}
