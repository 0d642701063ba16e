//! `doctor --pid` on real processes: a python3 that memory-maps a copy of
//! Debian's real libhipblaslt (sid's 7.1.1, from `.ci/setup`) with its
//! kernel folder beside it and has knobs in its environment; and a process
//! that has exited.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::doctor::Holder;
use crate::support::{repo_root, Run};

/// Debian's unpacked libhipblaslt1 of sid; `None` (a skip) only outside CI.
fn debian_sid() -> Option<PathBuf> {
    let base = std::env::var_os("PATCHKIT_DEBIAN_HIPBLASLT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocm-patchkit/debian-hipblaslt"));
    let dir = base.join("sid");
    if dir.join("VERSION").is_file() {
        return Some(dir);
    }
    assert!(
        !crate::support::ci(),
        "{} is missing and CI=true: .ci/setup must bring Debian's libhipblaslt1",
        dir.display()
    );
    eprintln!("skipping: {} is missing (run .ci/setup)", dir.display());
    None
}

/// `cargo xtask doctor --root / --pid PID <args>`, its verdict cache in `cache`.
fn doctor(pid: u32, cache: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["doctor", "--root", "/", "--pid", &pid.to_string()])
        .args(args)
        .env("COLUMNS", "1000")
        .env("PATCHKIT_ROOT", repo_root())
        .env("CI", "true")
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("running xtask doctor");
    Run::of(out)
}

#[test]
fn doctor_pid_judges_the_hipblaslt_a_running_program_mapped_and_its_knobs() {
    let Some(sid) = debian_sid() else { return };
    let dir = tempfile::tempdir().unwrap();
    let lib_dir = dir.path().join("app/lib");
    std::fs::create_dir_all(lib_dir.join("hipblaslt")).unwrap();
    let real = sid.join("usr/lib/x86_64-linux-gnu");
    let lib = lib_dir.join("libhipblaslt.so.1.1");
    std::fs::copy(real.join("libhipblaslt.so.1.1"), &lib).unwrap();
    std::os::unix::fs::symlink(
        real.join("hipblaslt/library"),
        lib_dir.join("hipblaslt/library"),
    )
    .unwrap();
    let holder = Holder::start(Holder::python(&lib).envs([
        ("HSA_OVERRIDE_GFX_VERSION", "10.3.0"),
        ("AMD_SERIALIZE_KERNEL", "3"),
        ("HSA_FOO", "1"),
        ("AMD_COMGR_CACHE", "0"),
    ]));
    let pid = holder.pid();
    let cache = dir.path().join("cache");
    let run = doctor(pid, &cache, &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}\n{}", run.stdout, run.stderr));
    let process = &report["machine"]["process"];
    assert_eq!(process["pid"], pid);
    let mapped = lib.display().to_string();
    assert_eq!(
        process["libraries"]["libhipblaslt"][0],
        mapped.as_str(),
        "{process:#}"
    );
    let libraries = report["machine"]["hipblaslt_libraries"].as_array().unwrap();
    assert_eq!(
        libraries.len(),
        1,
        "only the library in use: {libraries:#?}"
    );
    assert_eq!(libraries[0]["path"], mapped.as_str());
    assert_eq!(libraries[0]["kind"], "in use");
    // sid's 7.1.1 switches expert scheduling on in its gfx12 kernels
    assert_eq!(
        libraries[0]["judgement"]["verdict"], "on",
        "{:#}",
        libraries[0]
    );
    assert_eq!(report["machine"]["hipblaslt_version"], "1.1");
    let knob = |name: &str| crate::support::doctor::knob(&report, name).clone();
    assert_eq!(knob("HSA_OVERRIDE_GFX_VERSION")["judgement"], "harmful");
    assert_eq!(knob("AMD_SERIALIZE_KERNEL")["judgement"], "diagnosis");
    assert_eq!(knob("HSA_FOO")["judgement"], "no-known-effect");
    assert_eq!(knob("HSA_FOO")["from"], "environment");
    assert_eq!(report["machine"]["env"]["AMD_COMGR_CACHE"], "0");

    let text = doctor(pid, &cache, &[]);
    text.stdout_has(&format!("process    {pid} ("))
        .stdout_has(&format!("maps libhipblaslt: {mapped}"))
        .stdout_has(&format!(
            "library    [1] in use, 1.1\n               {mapped}\n"
        ))
        .stdout_has("HSA_FOO=1 (environment): no known effect\n");
}

#[test]
fn doctor_pid_on_a_process_that_has_exited_says_so() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = doctor(pid, dir.path(), &[]);
    run.fails_with(1);
    assert!(
        run.stderr
            .contains(&format!("process {pid} is not running")),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn doctor_pid_on_a_process_it_may_not_read_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // as root: a process of ours, read by doctor running as nobody; as
    // anyone else: init, which belongs to root
    let root = unsafe { libc::geteuid() } == 0;
    let mut sleeper = None;
    let pid = if root {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id();
        sleeper = Some(child);
        pid
    } else {
        1
    };
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_xtask"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_xtask"))
    };
    let out = cmd
        .args(["doctor", "--root", "/", "--pid", &pid.to_string()])
        .env("COLUMNS", "1000")
        .env("PATCHKIT_ROOT", repo_root())
        .env("CI", "true")
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path())
        .output()
        .expect("running xtask doctor");
    if let Some(mut child) = sleeper {
        let _ = child.kill();
        let _ = child.wait();
    }
    let run = Run::of(out);
    run.success()
        .stdout_has(&format!(
            "could not read /proc/{pid}/environ: permission denied: process {pid} belongs to another user; run doctor as that user or as root"
        ))
        .stdout_has(&format!("could not read /proc/{pid}/maps: permission denied"));
    assert!(
        !run.stdout.contains("maps no ROCm library"),
        "{}",
        run.stdout
    );
}
