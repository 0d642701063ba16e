//! doctor finds every hipBLASLt a program can load and judges it by its
//! kernels: Debian's real libhipblaslt1 (7.1.1 from sid: expert scheduling
//! on; 7.2.4 from experimental: off), brought by `.ci/setup`, placed in the
//! three layouts (distribution, /opt/rocm, a venv's torch/lib) of fake
//! machine roots; and kernel files the tests assemble (a venv linked to our
//! patched build, truncated and corrupt files).

use std::path::Path;

use crate::support::codeobj;
use crate::support::doctor::{fault, next, FakeMachine};
use crate::support::inplace::debian;

const TRIPLET_LIB: &str = "usr/lib/x86_64-linux-gnu";

/// Hard-links (or copies) `from` to `to`.
fn link(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

/// Places Debian's library of `debian` in `libdir` below the machine root
/// as `lib_name`, with the kernel files a gfx12 judgement needs (the gfx12
/// ones and those whose names name no target).
fn place(m: &FakeMachine, debian: &Path, libdir: &str, lib_name: &str) {
    let src = debian.join(TRIPLET_LIB);
    let so = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.starts_with("libhipblaslt.so."))
        .max_by_key(|n| n.len())
        .expect("libhipblaslt.so.* in the package");
    let dst = m.root().join(libdir);
    link(&src.join(so), &dst.join(lib_name));
    for entry in std::fs::read_dir(src.join("hipblaslt/library"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().into_string().unwrap();
        if name.contains("gfx120") || !name.contains("gfx") {
            link(&entry.path(), &dst.join("hipblaslt/library").join(&name));
        }
    }
}

/// RDNA4 (gfx1201) on `kernel`, amdgpu loaded with CWSR on.
fn rdna4(kernel: &str) -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032).kernel(kernel).amdgpu(1);
    m
}

const VENV: &str = "home/user/venv";
const SITE: &str = "home/user/venv/lib/python3.12/site-packages";
const TORCH_LIB: &str = "home/user/venv/lib/python3.12/site-packages/torch/lib";

fn torch_version(m: &FakeMachine) {
    m.file(
        &format!("{SITE}/torch/version.py"),
        "__version__ = '2.9.1+rocm7.1'\ndebug = False\ncuda = None\nhip = '7.1.25424'\n",
    );
}

fn library<'a>(report: &'a serde_json::Value, path_end: &str) -> &'a serde_json::Value {
    report["machine"]["hipblaslt_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["path"].as_str().unwrap().ends_with(path_end))
        .unwrap_or_else(|| panic!("a hipBLASLt at ...{path_end} in {:#}", report["machine"]))
}

#[test]
fn debian_7_1_1_switches_expert_scheduling_on_in_every_layout() {
    let Some(sid) = debian("sid") else { return };
    let layouts: [(&str, &str, &[&str]); 3] = [
        (TRIPLET_LIB, "libhipblaslt.so.1.1", &[]),
        ("opt/rocm-7.1.1/lib", "libhipblaslt.so.1.1", &[]),
        (
            TORCH_LIB,
            "libhipblaslt.so",
            &["--python", "/home/user/venv"],
        ),
    ];
    for (libdir, name, args) in layouts {
        let m = rdna4("6.14.0-36-generic");
        place(&m, &sid, libdir, name);
        torch_version(&m);
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let run = m.doctor(&all);
        run.fails_with(3);
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let lib = library(&report, &format!("{libdir}/{name}"));
        let judged = &lib["judgement"];
        assert_eq!(judged["verdict"], "on", "{libdir}: {lib:#}");
        let file = judged["file"].as_str().unwrap();
        assert!(
            file.starts_with(&format!("/{libdir}/hipblaslt/library/")),
            "{file}"
        );
        assert!(file.contains("gfx120"), "{file}");
        let cwsr = fault(&report, "cwsr-expert-sched");
        assert_eq!(cwsr["status"], "affected", "{libdir}: {cwsr:#}");
        assert!(
            cwsr["why"]
                .as_str()
                .unwrap()
                .contains("switches expert scheduling on"),
            "{cwsr:#}"
        );
        // the rewrite first (no reboot), then the package of the fix
        let steps = next(cwsr);
        assert!(
            steps.starts_with("sudo ") || steps.starts_with("cargo xtask rewrite-hipblaslt /"),
            "{steps}"
        );
        assert!(
            steps.contains(&format!("rewrite-hipblaslt /{libdir}\n")),
            "{steps}"
        );
        assert!(
            steps.contains("\ncargo xtask build-dkms amdgpu-expert-sched-6.14\n"),
            "{steps}"
        );
        if libdir.ends_with("torch/lib") {
            assert_eq!(lib["kind"], "pytorch");
            assert!(
                lib["version"]
                    .as_str()
                    .unwrap()
                    .contains("PyTorch 2.9.1+rocm7.1"),
                "{lib:#}"
            );
        }
    }
}

#[test]
fn debian_7_2_4_keeps_it_off_so_an_unfixed_kernel_is_not_affected() {
    let Some(exp) = debian("experimental") else {
        return;
    };
    let m = rdna4("6.14.0-36-generic");
    place(&m, &exp, TRIPLET_LIB, "libhipblaslt.so.1.2");
    let (run, report) = m.report();
    // hipBLASLt 1.2 carries the DTVB1 over-read: that fault, not this one
    run.fails_with(3);
    let lib = library(&report, "libhipblaslt.so.1.2");
    assert_eq!(lib["judgement"]["verdict"], "off", "{lib:#}");
    assert!(lib["judgement"]["files"].as_u64().unwrap() > 100, "{lib:#}");
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "not-affected", "{cwsr:#}");
    assert!(
        cwsr["why"]
            .as_str()
            .unwrap()
            .contains("every hipBLASLt found keeps expert scheduling off"),
        "{cwsr:#}"
    );
    // a second look reads the same verdict through the cache
    let (_, again) = m.report();
    assert_eq!(
        library(&again, "libhipblaslt.so.1.2")["judgement"],
        lib["judgement"]
    );
    m.doctor(&[])
        .fails_with(3)
        .stdout_has("expert scheduling off (")
        .stdout_has("not affected  cwsr-expert-sched");
}

#[test]
fn debian_7_1_1_on_a_fixed_kernel_is_fine() {
    let Some(sid) = debian("sid") else { return };
    let m = rdna4("6.18.4-arch1-1");
    place(&m, &sid, TRIPLET_LIB, "libhipblaslt.so.1.1");
    let (run, report) = m.report();
    run.success();
    assert_eq!(
        library(&report, "libhipblaslt.so.1.1")["judgement"]["verdict"],
        "on"
    );
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "fixed", "{cwsr:#}");
}

/// Writes `bytes` to `rel` below the machine root, creating parents.
fn bytes(m: &FakeMachine, rel: &str, bytes: &[u8]) {
    let path = m.root().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Our patched build below /opt/rocm-patchkit, with assembled kernels that
/// keep expert scheduling off.
fn ours(m: &FakeMachine) {
    let lib = "opt/rocm-patchkit/hipblaslt-7.1.1/lib";
    m.file(&format!("{lib}/libhipblaslt.so.1.1"), "ELF");
    bytes(
        m,
        &format!("{lib}/hipblaslt/library/TensileLibrary_HH_gfx1201.co"),
        &codeobj::gfx12_kernel_file(false),
    );
}

#[test]
fn a_venv_whose_torch_loads_our_build_is_reported_patched() {
    let m = rdna4("6.14.0-36-generic");
    ours(&m);
    torch_version(&m);
    let torch_lib = m.root().join(format!("{SITE}/torch/lib"));
    std::fs::create_dir_all(&torch_lib).unwrap();
    // what docs/build-hipblaslt.md tells a PyTorch user to do: the wheel's copy and its
    // kernel folder replaced by links to ours (absolute, as ln -s makes them)
    std::os::unix::fs::symlink(
        "/opt/rocm-patchkit/hipblaslt-7.1.1/lib/libhipblaslt.so.1.1",
        torch_lib.join("libhipblaslt.so"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "/opt/rocm-patchkit/hipblaslt-7.1.1/lib/hipblaslt",
        torch_lib.join("hipblaslt"),
    )
    .unwrap();
    let mut m = m;
    m.env("VIRTUAL_ENV", &format!("/{VENV}"));
    let (run, report) = m.report();
    run.success();
    let lib = library(&report, "torch/lib/libhipblaslt.so");
    assert_eq!(lib["ours"], "/opt/rocm-patchkit/hipblaslt-7.1.1", "{lib:#}");
    assert_eq!(lib["judgement"]["verdict"], "off", "{lib:#}");
    assert_eq!(
        lib["kernels"],
        "/opt/rocm-patchkit/hipblaslt-7.1.1/lib/hipblaslt/library"
    );
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "mitigated", "{cwsr:#}");
    assert!(
        cwsr["why"]
            .as_str()
            .unwrap()
            .contains("patched: ours from /opt/rocm-patchkit/hipblaslt-7.1.1"),
        "{cwsr:#}"
    );
    m.doctor(&[])
        .success()
        .stdout_has("patched: loads ours from /opt/rocm-patchkit/hipblaslt-7.1.1");

    // the wheel's own copy, with kernels that switch it on: affected again
    let m2 = rdna4("6.14.0-36-generic");
    ours(&m2);
    m2.file(&format!("{SITE}/torch/lib/libhipblaslt.so"), "ELF");
    bytes(
        &m2,
        &format!("{SITE}/torch/lib/hipblaslt/library/TensileLibrary_BB_gfx1201.co"),
        &codeobj::gfx12_kernel_file(true),
    );
    let run = m2.doctor(&["--json", "--python", &format!("/{VENV}")]);
    run.fails_with(3);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    assert!(
        cwsr["why"]
            .as_str()
            .unwrap()
            .contains("torch/lib/libhipblaslt.so switches expert scheduling on"),
        "{cwsr:#}"
    );
}

#[test]
fn truncated_or_corrupt_kernel_files_cannot_be_told_and_name_the_file() {
    let good = codeobj::gfx12_kernel_file(false);
    let mut corrupt = good.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid..].iter_mut().for_each(|b| *b ^= 0x5a);
    let cases: [(&str, Vec<u8>); 4] = [
        ("truncated", good[..good.len() - 7].to_vec()),
        ("corrupt", corrupt),
        (
            "elf-cut",
            codeobj::elf(codeobj::GFX1201, &codeobj::kernel(true))[..80].to_vec(),
        ),
        ("not-a-kernel", b"hello".to_vec()),
    ];
    for (what, file) in cases {
        let m = rdna4("6.14.0-36-generic");
        let dir = format!("{TRIPLET_LIB}/hipblaslt/library");
        m.file(&format!("{TRIPLET_LIB}/libhipblaslt.so.1.1"), "ELF");
        bytes(
            &m,
            &format!("{dir}/TensileLibrary_AA_gfx1201.co"),
            &codeobj::gfx12_kernel_file(false),
        );
        bytes(
            &m,
            &format!("{dir}/TensileLibrary_{what}_gfx1200.co"),
            &file,
        );
        let (run, report) = m.report();
        run.fails_with(3);
        let lib = library(&report, "libhipblaslt.so.1.1");
        assert_eq!(
            lib["judgement"]["verdict"], "cannot-tell",
            "{what}: {lib:#}"
        );
        let why = lib["judgement"]["why"].as_str().unwrap();
        assert!(
            why.starts_with(&format!(
                "/{TRIPLET_LIB}/hipblaslt/library/TensileLibrary_{what}_gfx1200.co: "
            )),
            "{what}: {why}"
        );
        let cwsr = fault(&report, "cwsr-expert-sched");
        assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
        assert!(
            cwsr["why"].as_str().unwrap().contains("cannot be judged"),
            "{cwsr:#}"
        );
    }
}

#[test]
fn a_truncated_real_kernel_file_cannot_be_told() {
    let Some(sid) = debian("sid") else { return };
    let dir = sid.join(TRIPLET_LIB).join("hipblaslt/library");
    let real = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("gfx1201.co"))
        .unwrap();
    let bytes = std::fs::read(&real).unwrap();
    for cut in [10, 30, bytes.len() / 2, bytes.len() - 1] {
        match xtask::gpu::codeobj::judge_bytes(&bytes[..cut]) {
            xtask::gpu::codeobj::FileVerdict::Unreadable(why) => assert!(!why.is_empty()),
            other => panic!("{} cut at {cut}: {other:?}", real.display()),
        }
    }
}
