//! `doctor --pid` reads `/proc/PID/maps` as the kernel writes it (issue
//! #30), on real processes: a path holding a newline (which the kernel
//! writes `\012`) beside a folder literally named with those four bytes, a
//! mapped library deleted and replaced while the program runs, and a
//! program in its own mount namespace (`unshare -m`, as root) that maps a
//! library from a folder bind-mounted over the host's; and on a fake
//! `/proc` tree under `--root` whose process has a root of its own. Every
//! run is bounded in memory (at most 256 MiB resident) and time.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::codeobj;
use crate::support::doctor::{bounded_report, FakeMachine, Holder};
use crate::support::{bounded, ci, is_root, repo_root};

/// A hipBLASLt in `dir/lib` whose one gfx1201 kernel file switches expert
/// scheduling on or not; returns the library file.
fn library(dir: &Path, expert_sched: bool) -> PathBuf {
    let lib = dir.join("lib");
    let kernels = lib.join("hipblaslt/library");
    std::fs::create_dir_all(&kernels).unwrap();
    std::fs::write(
        kernels.join("TensileLibrary_HH_gfx1201.co"),
        codeobj::gfx12_kernel_file(expert_sched),
    )
    .unwrap();
    let so = lib.join("libhipblaslt.so.1.1");
    std::fs::write(&so, vec![0x7fu8; 8192]).unwrap();
    so
}

/// `doctor --root / --pid PID --json`, bounded, its verdict cache in `cache`.
fn doctor_pid(pid: u32, cache: &Path, what: &str) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["doctor", "--root", "/", "--json", "--pid", &pid.to_string()])
        .env("PATCHKIT_ROOT", repo_root())
        .env("CI", "true")
        .env("XDG_CACHE_HOME", cache);
    bounded_report(&mut cmd, what).1
}

/// The one hipBLASLt of a `--pid` report.
fn in_use(report: &serde_json::Value) -> &serde_json::Value {
    let libraries = report["machine"]["hipblaslt_libraries"].as_array().unwrap();
    assert_eq!(libraries.len(), 1, "{libraries:#?}");
    &libraries[0]
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn a_newline_in_a_mapped_path_is_read_as_the_kernel_escapes_it() {
    if !bounded::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let newline = library(&dir.path().join("app\nv2"), true);
    // the four bytes the kernel writes for the newline, as a real name
    let literal = library(&dir.path().join("app\\012v2"), false);
    let cache = dir.path().join("cache");
    for (lib, verdict) in [(&newline, "on"), (&literal, "off")] {
        let holder = Holder::start(&mut Holder::python(lib));
        let report = doctor_pid(holder.pid(), &cache, "a path with an escape");
        let process = &report["machine"]["process"];
        assert_eq!(
            process["libraries"]["libhipblaslt"][0],
            text(lib),
            "{process:#}"
        );
        let judged = in_use(&report);
        assert_eq!(judged["path"], text(lib), "{judged:#}");
        assert_eq!(judged["judgement"]["verdict"], verdict, "{judged:#}");
        assert_eq!(process["deleted"], serde_json::json!([]), "{process:#}");
    }
    let holder = Holder::start(&mut Holder::python(&newline));
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["doctor", "--root", "/", "--pid", &holder.pid().to_string()])
        .env("COLUMNS", "1000")
        .env("PATCHKIT_ROOT", repo_root())
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let shown = text(&newline).replace('\n', "\\x0a");
    assert!(
        stdout.contains(&format!("maps libhipblaslt: {shown}\n")),
        "{stdout}"
    );
}

#[test]
fn a_mapped_library_deleted_and_replaced_is_not_called_in_use() {
    if !bounded::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = library(&dir.path().join("app"), true);
    let holder = Holder::start(&mut Holder::python(&lib));
    // an upgrade while the program runs: a new library and kernels, off
    std::fs::remove_file(&lib).unwrap();
    library(&dir.path().join("app"), false);
    let report = doctor_pid(holder.pid(), &dir.path().join("cache"), "a deleted library");
    let judged = in_use(&report);
    assert_eq!(judged["judgement"]["verdict"], "cannot-tell", "{judged:#}");
    let why = judged["judgement"]["why"].as_str().unwrap();
    assert!(
        why.contains("deleted or replaced after it was loaded") && why.contains(text(&lib)),
        "{why}"
    );
    let process = &report["machine"]["process"];
    assert_eq!(
        process["deleted"],
        serde_json::json!([text(&lib)]),
        "{process:#}"
    );
}

#[test]
fn a_process_in_another_mount_namespace_is_judged_by_the_files_it_sees() {
    if !bounded::available() {
        return;
    }
    if !is_root() {
        assert!(!ci(), "CI must run the mount namespace test as root");
        eprintln!("skipping: unshare -m needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // the host sees an off library; the process, a bind mount of an on one
    let host = library(&dir.path().join("app"), false);
    library(&dir.path().join("theirs"), true);
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind \"$1\" \"$2\" && exec python3 -c \"$3\" \"$4\"")
        .arg("sh")
        .arg(dir.path().join("theirs"))
        .arg(dir.path().join("app"))
        .arg(Holder::SCRIPT)
        .arg(&host);
    let holder = Holder::start(&mut cmd);
    let pid = holder.pid();
    let report = doctor_pid(pid, &dir.path().join("cache"), "another mount namespace");
    let judged = in_use(&report);
    assert_eq!(judged["path"], text(&host), "{judged:#}");
    assert_eq!(judged["judgement"]["verdict"], "on", "{judged:#}");
    let process = &report["machine"]["process"];
    assert_eq!(process["root"], format!("/proc/{pid}/root"), "{process:#}");
}

#[test]
fn a_fake_proc_tree_gives_the_process_its_own_root() {
    use std::os::unix::fs::MetadataExt;
    if !bounded::available() {
        return;
    }
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    // the machine's copy of the folder is off; the process's root holds an
    // on one, below a folder whose name holds a newline
    library(&m.root().join("opt/app\nv2"), false);
    let theirs = m.root().join("proc/4242/root");
    let lib = library(&theirs.join("opt/app\nv2"), true);
    let inode = std::fs::metadata(&lib).unwrap().ino();
    let mut maps =
        format!("7f00-7f10 r--p 00000000 08:01 {inode}                        ").into_bytes();
    maps.extend(b"/opt/app\\012v2/lib/libhipblaslt.so.1.1\n");
    maps.extend(b"7f10-7f20 r--p 00000000 08:01 77                         /usr/lib/libamd_comgr.so.3.0 (deleted)\n");
    std::fs::write(m.root().join("proc/4242/maps"), maps).unwrap();
    let mut environ = b"HSA_FOO=1\0OLDPWD=/home/caf".to_vec();
    environ.extend(b"\xe9\0");
    std::fs::write(m.root().join("proc/4242/environ"), environ).unwrap();
    let (_, report) = bounded_report(
        &mut m.doctor_command(&["--json", "--pid", "4242"]),
        "a fake /proc tree",
    );
    let judged = in_use(&report);
    assert_eq!(
        judged["path"], "/opt/app\nv2/lib/libhipblaslt.so.1.1",
        "{judged:#}"
    );
    assert_eq!(judged["judgement"]["verdict"], "on", "{judged:#}");
    let file = judged["judgement"]["file"].as_str().unwrap();
    assert_eq!(
        Path::new(file),
        Path::new(OsStr::from_bytes(
            b"/opt/app\nv2/lib/hipblaslt/library/TensileLibrary_HH_gfx1201.co"
        )),
        "judged as the process names it, not as the host does"
    );
    let process = &report["machine"]["process"];
    assert_eq!(process["root"], "/proc/4242/root", "{process:#}");
    assert_eq!(
        process["deleted"],
        serde_json::json!(["/usr/lib/libamd_comgr.so.3.0"]),
        "{process:#}"
    );
}
