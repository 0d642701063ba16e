//! doctor on hostile machine copies (issue #25): a sparse huge module, a
//! kernel file that is a link to /dev/zero, FIFOs named like the files it
//! reads, symlink loops under /lib/modules, a 1 GiB /proc/cmdline, modules.dep
//! paths and symlinks that lead out of `--root`, `--python` folders it cannot
//! search, control bytes in osrelease. Every run is bounded in memory
//! (`prlimit --as`, and at most 256 MiB resident) and time; each ends with a report that names what it
//! could not read and why, never a crash, a hang or exit 101.

use std::os::unix::fs::symlink;
use std::path::Path;

use xtask::doctor::module;

use crate::support::bounded::{self, Bounded};
use crate::support::doctor::{self, FakeMachine};

const RELEASE: &str = "6.14.0-36-generic";
const MODULES: &str = "lib/modules/6.14.0-36-generic";
const KERNELS: &str = "opt/rocm/lib/hipblaslt/library";

/// An RDNA4 machine on 6.14 with ROCm 7.1.1 and its hipBLASLt.
fn machine() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel(RELEASE)
        .amdgpu(1)
        .rocm("7.1.1-53", "1.1.0");
    m
}

/// `doctor --json` on `m` under the memory and time limits; it must end by
/// itself with 0 or 3 (affected), print a report and peak under 256 MiB.
fn bounded_report(m: &FakeMachine, args: &[&str]) -> (Bounded, serde_json::Value) {
    let mut all = vec!["--json"];
    all.extend(args);
    doctor::bounded_report(&mut m.doctor_command(&all), "a hostile machine copy")
}

/// The `could not read` entry for `path`, its reason.
fn unread<'a>(report: &'a serde_json::Value, path: &str) -> &'a str {
    report["machine"]["unread"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["path"] == path)
        .unwrap_or_else(|| panic!("no could-not-read entry for {path} in {report:#}"))["why"]
        .as_str()
        .unwrap()
}

/// The judgement of the hipBLASLt library at `path`.
fn judgement<'a>(report: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    &report["machine"]["hipblaslt_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["path"] == path)
        .unwrap_or_else(|| panic!("no hipBLASLt library {path} in {report:#}"))["judgement"]
}

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {path:?}"
    );
}

fn sparse(path: &Path, len: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

fn link(target: &str, path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, path).unwrap();
}

/// A kernel module doctor judges by its gfx12 trap handler: the fixed
/// handler's words when `fixed`, else the unfixed ones.
fn module_elf(fixed: bool) -> Vec<u8> {
    let mut elf = vec![0u8; 64];
    elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
    let words: Vec<u32> = if fixed {
        module::FIXED.to_vec()
    } else {
        std::iter::once(0xbfa00001).chain(module::UNFIXED).collect()
    };
    for w in words {
        elf.extend(w.to_le_bytes());
    }
    elf.extend(format!("\0vermagic={RELEASE} SMP mod_unload \0").as_bytes());
    while !elf.len().is_multiple_of(8) {
        elf.push(0);
    }
    let shoff = elf.len() as u64;
    elf[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    elf[0x3c..0x3e].copy_from_slice(&1u16.to_le_bytes());
    elf.extend([0u8; 64]);
    elf
}

/// A fixed module on the host, outside the machine copy (what doctor must
/// never judge for it), in a folder of its own.
fn host_module() -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix("patchkit-host-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("amdgpu.ko");
    std::fs::write(&path, module_elf(true)).unwrap();
    let path = path.to_str().unwrap().to_owned();
    (dir, path)
}

#[test]
fn a_sparse_huge_amdgpu_ko_is_cannot_tell_not_read() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let rel = format!("{MODULES}/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko");
    sparse(&m.root().join(&rel), 2 << 30);
    let (_, report) = bounded_report(&m, &[]);
    let file = &report["machine"]["amdgpu_file"];
    assert_eq!(file["path"], format!("/{rel}"), "{file:#}");
    assert_eq!(file["trap_handler"], "cannot-tell", "{file:#}");
    let why = file["why"].as_str().unwrap();
    assert!(
        why.contains("larger than") && why.contains("2.0 GiB"),
        "{why}"
    );
}

#[test]
fn a_kernel_file_and_a_module_linking_to_dev_zero_are_not_read() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let kernel = format!("{KERNELS}/Kernels.so-000-gfx1201.hsaco");
    link("/dev/zero", &m.root().join(&kernel));
    // our DKMS build, told by srcversion: its module file is read
    m.dkms("amdgpu-expert-sched", "6.14.0.1", RELEASE);
    let built =
        format!("var/lib/dkms/amdgpu-expert-sched/6.14.0.1/{RELEASE}/x86_64/module/amdgpu.ko");
    std::fs::remove_file(m.root().join(format!("{built}.xz"))).unwrap();
    link("/dev/zero", &m.root().join(&built));
    let (_, report) = bounded_report(&m, &[]);
    let judged = judgement(&report, "/opt/rocm/lib/libhipblaslt.so.1.1.0");
    assert_eq!(judged["verdict"], "cannot-tell", "{judged:#}");
    let why = judged["why"].as_str().unwrap();
    assert!(
        why.contains(&format!("/{kernel}")) && why.contains("leads out of the machine's tree"),
        "{why}"
    );
    // inside the root, /dev/zero is the machine's: this copy has none
    assert_eq!(unread(&report, &format!("/{built}")), "does not exist");
}

#[test]
fn fifos_named_like_the_files_doctor_reads_do_not_block_it() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let kernel = format!("{KERNELS}/TensileLibrary_HH_gfx1201.co");
    mkfifo(&m.root().join(&kernel));
    let module = format!("{MODULES}/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz");
    mkfifo(&m.root().join(&module));
    m.dkms("amdgpu-expert-sched", "6.14.0.1", RELEASE);
    let built =
        format!("var/lib/dkms/amdgpu-expert-sched/6.14.0.1/{RELEASE}/x86_64/module/amdgpu.ko.xz");
    std::fs::remove_file(m.root().join(&built)).unwrap();
    mkfifo(&m.root().join(&built));
    std::fs::remove_file(m.root().join("proc/cmdline")).unwrap();
    mkfifo(&m.root().join("proc/cmdline"));
    let (_, report) = bounded_report(&m, &[]);
    for path in [&module, &built, &"proc/cmdline".to_owned()] {
        let why = unread(&report, &format!("/{path}"));
        assert!(why.contains("is a FIFO, not a"), "{path}: {why}");
    }
    let judged = judgement(&report, "/opt/rocm/lib/libhipblaslt.so.1.1.0");
    let why = judged["why"].as_str().unwrap();
    assert!(why.contains("is a FIFO, not a file"), "{why}");
    assert_eq!(
        unread(&report, &format!("/{kernel}")),
        "is a FIFO, not a file: not read"
    );
}

#[test]
fn two_symlink_loops_under_lib_modules_end_the_module_search() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let drm = m.root().join(format!("{MODULES}/kernel/drivers/gpu/drm"));
    link("..", &drm.join("up"));
    link("../..", &drm.join("top"));
    link(
        "loop-b",
        &m.root().join(format!("{MODULES}/updates/loop-a")),
    );
    link(
        "loop-a",
        &m.root().join(format!("{MODULES}/updates/loop-b")),
    );
    let (run, report) = bounded_report(&m, &[]);
    assert!(run.seconds < 10.0, "{:.1}s", run.seconds);
    assert!(report["machine"]["amdgpu_file"].is_null(), "{report:#}");
    let why = unread(&report, &format!("/{MODULES}/updates/loop-a"));
    assert!(why.contains("symlink loop"), "{why}");
    let why = unread(&report, &format!("/{MODULES}/kernel/drivers/gpu/drm/top"));
    assert!(why.contains("already searched"), "{why}");
}

#[test]
fn a_gigabyte_cmdline_is_not_read() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    sparse(&m.root().join("proc/cmdline"), 1 << 30);
    let (_, report) = bounded_report(&m, &[]);
    assert!(report["machine"]["cmdline"].is_null(), "{report:#}");
    let why = unread(&report, "/proc/cmdline");
    assert!(
        why.contains("larger than") && why.contains("1.0 GiB"),
        "{why}"
    );
}

#[test]
fn modules_dep_paths_stay_inside_the_root() {
    if !bounded::available() {
        return;
    }
    let (_host, outside) = host_module();
    let up = "../".repeat(16);
    let climbing = format!("{up}{}", &outside[1..]);
    for (line, named) in [
        (outside.clone(), outside.clone()),
        (climbing.clone(), format!("/{MODULES}/{climbing}")),
    ] {
        let m = machine();
        m.file(
            &format!("{MODULES}/modules.dep"),
            &format!("{line}: kernel/drivers/gpu/drm/drm.ko\n"),
        );
        let (_, report) = bounded_report(&m, &[]);
        let file = &report["machine"]["amdgpu_file"];
        assert!(
            file.is_null(),
            "{line}: judged a file of the host: {file:#}"
        );
        // taken below the root, as modprobe in a chroot would
        let why = unread(&report, &named);
        assert_eq!(why, "named by modules.dep: does not exist", "{line}");
    }
}

#[test]
fn an_absolute_symlink_module_resolves_inside_the_root() {
    if !bounded::available() {
        return;
    }
    let (_host, outside) = host_module();
    let m = machine();
    let rel = format!("{MODULES}/updates/dkms/amdgpu.ko");
    link(&outside, &m.root().join(&rel));
    // the same path inside the machine copy holds the unfixed module
    m.file(&outside[1..], "");
    std::fs::write(m.root().join(&outside[1..]), module_elf(false)).unwrap();
    let (_, report) = bounded_report(&m, &[]);
    let file = &report["machine"]["amdgpu_file"];
    assert_eq!(file["path"], format!("/{rel}"), "{file:#}");
    assert_eq!(file["trap_handler"], "unfixed", "{file:#}");
    std::fs::remove_file(m.root().join(&outside[1..])).unwrap();
    let (_, report) = bounded_report(&m, &[]);
    assert!(report["machine"]["amdgpu_file"].is_null(), "{report:#}");
    assert!(
        report["machine"]["unread"]
            .to_string()
            .contains(&format!("/{MODULES}")),
        "{report:#}"
    );
}

#[test]
fn python_folders_doctor_cannot_search_are_listed_with_the_reason() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    link("loop", &m.root().join("home/user/loop"));
    m.file("home/user/venv", "not a folder");
    let (_, report) = bounded_report(
        &m,
        &[
            "--python",
            "/home/user/missing",
            "--python",
            "/home/user/loop",
            "--python",
            "/home/user/venv",
        ],
    );
    let why = unread(&report, "/home/user/missing");
    assert!(why.starts_with("--python: does not exist"), "{why}");
    let why = unread(&report, "/home/user/loop");
    assert!(why.starts_with("--python: symlink loop"), "{why}");
    let why = unread(&report, "/home/user/venv");
    assert!(
        why.starts_with("--python: is a file, not a folder"),
        "{why}"
    );
    let text = m.doctor(&["--python", "/home/user/missing"]);
    text.stdout_has("could not read\n")
        .stdout_has("/home/user/missing: --python: does not exist");
}

#[test]
fn control_bytes_in_osrelease_are_shown_escaped() {
    let m = machine();
    m.file(
        "proc/sys/kernel/osrelease",
        "6.14.0-36-generic\x1b]0;pwned\x07\x1b[2J\u{9b}1m\r\n",
    );
    let text = m.doctor(&[]);
    assert!(
        !text.stdout.contains(['\x1b', '\x07', '\u{9b}', '\r']),
        "raw control bytes reach the terminal:\n{:?}",
        text.stdout
    );
    text.stdout_has("6.14.0-36-generic\\x1b]0;pwned\\x07\\x1b[2J\\u{9b}1m");
    let json = m.doctor(&["--json"]);
    assert!(
        !json.stdout.contains(['\x1b', '\x07', '\u{9b}', '\r']),
        "{:?}",
        json.stdout
    );
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        report["machine"]["kernel_release"], "6.14.0-36-generic\x1b]0;pwned\x07\x1b[2J\u{9b}1m",
        "the JSON keeps the value, escaped"
    );
}

#[test]
fn a_hostile_machine_copy_is_read_in_seconds_and_little_memory() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    sparse(
        &m.root().join(format!("{MODULES}/updates/dkms/amdgpu.ko")),
        100 << 30,
    );
    link(
        "/dev/zero",
        &m.root()
            .join(format!("{KERNELS}/Kernels.so-000-gfx1201.hsaco")),
    );
    mkfifo(
        &m.root()
            .join(format!("{KERNELS}/TensileLibrary_HH_gfx1201.co")),
    );
    let drm = m.root().join(format!("{MODULES}/kernel/drivers/gpu/drm"));
    link("..", &drm.join("up"));
    link("../..", &drm.join("top"));
    sparse(&m.root().join("proc/cmdline"), 1 << 30);
    let (run, report) = bounded_report(&m, &[]);
    assert!(run.seconds < 10.0, "{:.1}s", run.seconds);
    let file = &report["machine"]["amdgpu_file"];
    assert_eq!(file["trap_handler"], "cannot-tell", "{file:#}");
    assert!(unread(&report, "/proc/cmdline").contains("larger than"));
}
