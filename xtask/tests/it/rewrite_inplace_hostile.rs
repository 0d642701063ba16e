//! `rewrite-hipblaslt` trusts nothing in a library it did not write: a
//! forged record (absolute, `..` and symlinked keys, a key naming
//! `/dev/zero`, an `original` outside the library, a record that is a FIFO,
//! a link or 1.5 GB), `.patchkit/` or its `originals/` made links; and
//! kernel files that are FIFOs, links to `/dev/zero`, 3 GB sparse files or
//! below a symlinked folder. The rewrite, `--check`, `--undo` (also through
//! `--all` and `VIRTUAL_ENV`) and doctor each refuse, naming what they
//! refused, and nothing outside the library is read, changed or deleted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::support::bounded;
use crate::support::codeobj;
use crate::support::doctor::FakeMachine;
use crate::support::inplace::{command, mkfifo, regular_digests, sparse};

const VENV: &str = "home/user/venv";
const TORCH_LIB: &str = "home/user/venv/lib/python3.12/site-packages/torch/lib";
/// From the kernel folder up to `home/user`.
const UP: &str = "../../../../../../../..";

/// A venv whose wheel holds two kernel files with sites and one without,
/// and a folder of the user's beside it (`home/user/beside`).
fn machine() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    m.file(
        &format!("{TORCH_LIB}/../version.py"),
        "__version__ = '2.9.1+rocm7.1'\nhip = '7.1.25424'\n",
    );
    m.file(&format!("{TORCH_LIB}/libhipblaslt.so"), "ELF");
    let k = kernels(&m);
    std::fs::create_dir_all(&k).unwrap();
    let on = codeobj::gfx12_kernel_file(true);
    std::fs::write(k.join("TensileLibrary_HH_gfx1201.co"), &on).unwrap();
    std::fs::write(k.join("TensileLibrary_BB_gfx1200.co"), &on).unwrap();
    std::fs::write(
        k.join("TensileLibrary_SS_gfx1201.co"),
        codeobj::gfx12_kernel_file(false),
    )
    .unwrap();
    let beside = beside(&m);
    std::fs::create_dir_all(beside.join("other/originals")).unwrap();
    std::fs::write(beside.join("victim.co"), "the user's own file\n").unwrap();
    std::fs::write(beside.join("secret.co"), "a secret of the user's\n").unwrap();
    std::fs::write(
        beside.join("other/originals/notes.txt"),
        "the user's notes\n",
    )
    .unwrap();
    std::fs::write(beside.join("other/record.json"), "{}\n").unwrap();
    mkfifo(&beside.join("pipe.co"));
    m
}

fn kernels(m: &FakeMachine) -> PathBuf {
    m.root().join(TORCH_LIB).join("hipblaslt/library")
}

fn beside(m: &FakeMachine) -> PathBuf {
    m.root().join("home/user/beside")
}

fn home(m: &FakeMachine) -> PathBuf {
    m.root().join("home/user")
}

/// A command run with a time and memory bound: a hang or a runaway read is
/// a failure of the test, not a hung test.
fn bounded_run(cmd: std::process::Command) -> bounded::Bounded {
    bounded::run(&cmd, 2 << 30, 60)
}

/// `rewrite-hipblaslt <args> <kernels>`, bounded.
fn rewrite(m: &FakeMachine, args: &[&str]) -> bounded::Bounded {
    let lib = kernels(m).display().to_string();
    let mut all = args.to_vec();
    all.push(&lib);
    bounded_run(command(&home(m), &all))
}

fn record_path(m: &FakeMachine) -> PathBuf {
    kernels(m).join(".patchkit/inplace.json")
}

fn record(m: &FakeMachine) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(record_path(m)).unwrap()).unwrap()
}

fn save(m: &FakeMachine, record: &serde_json::Value) {
    std::fs::write(
        record_path(m),
        serde_json::to_string_pretty(record).unwrap(),
    )
    .unwrap();
}

fn sha(bytes: &[u8]) -> String {
    xtask::shared::hash::sha256_hex(bytes)
}

/// A record entry saying `key` was rewritten to `after` from the bytes
/// kept at `original`.
fn entry(after: &[u8], before: &[u8], original: &str) -> serde_json::Value {
    serde_json::json!({
        "state": "done",
        "size_before": before.len(),
        "sha256_before": sha(before),
        "size_after": after.len(),
        "sha256_after": sha(after),
        "sites": 2,
        "original": original,
    })
}

/// A library rewritten by the tool, so its record and kept originals are real.
fn rewritten() -> FakeMachine {
    let m = machine();
    rewrite(&m, &[]).ended_with(&[0]);
    assert!(record_path(&m).is_file());
    m
}

/// Adds a forged entry `key` to the record: the user's `victim.co` is
/// "rewritten", and its "original" is the attacker's kept file.
fn forge_victim(m: &FakeMachine, key: &str) {
    let victim = std::fs::read(beside(m).join("victim.co")).unwrap();
    let kept = b"the attacker's bytes\n";
    let original = ".patchkit/originals/forged.co.orig";
    std::fs::write(kernels(m).join(original), kept).unwrap();
    let mut rec = record(m);
    rec["files"][key] = entry(&victim, kept, original);
    save(m, &rec);
}

/// A named way to forge a library's state.
type Forgery = (&'static str, fn(&FakeMachine));

/// A named hostile kernel file, made in a library; returns its name.
type HostileFile = (&'static str, fn(&FakeMachine) -> String);

/// Each forged state of a library, made from a rewritten one.
fn cases() -> Vec<Forgery> {
    vec![
        ("an absolute key", |m| {
            let key = beside(m).join("victim.co").display().to_string();
            forge_victim(m, &key);
        }),
        ("a key with ..", |m| {
            forge_victim(m, &format!("{UP}/beside/victim.co"))
        }),
        ("a key below a symlinked folder", |m| {
            std::os::unix::fs::symlink(beside(m), kernels(m).join("elsewhere")).unwrap();
            forge_victim(m, "elsewhere/victim.co");
        }),
        ("a key naming /dev/zero", |m| forge_victim(m, "/dev/zero")),
        ("a key naming a FIFO outside", |m| {
            forge_victim(m, &format!("{UP}/beside/pipe.co"))
        }),
        ("an original outside the library", |m| {
            let secret = std::fs::read(beside(m).join("secret.co")).unwrap();
            let mut rec = record(m);
            let files = rec["files"].as_object_mut().unwrap();
            let (_, first) = files.iter_mut().next().unwrap();
            first["original"] = format!("{UP}/beside/secret.co").into();
            first["sha256_before"] = sha(&secret).into();
            first["size_before"] = secret.len().into();
            save(m, &rec);
        }),
        ("a record that is a FIFO", |m| {
            std::fs::remove_file(record_path(m)).unwrap();
            mkfifo(&record_path(m));
        }),
        ("a record of 1.5 GB (sparse)", |m| {
            std::fs::remove_file(record_path(m)).unwrap();
            sparse(&record_path(m), 1536 << 20);
        }),
        ("a record that is a symlink", |m| {
            std::fs::remove_file(record_path(m)).unwrap();
            std::os::unix::fs::symlink(beside(m).join("other/record.json"), record_path(m))
                .unwrap();
        }),
        (".patchkit a symlink to another folder", |m| {
            let dir = kernels(m).join(".patchkit");
            std::fs::copy(
                dir.join("inplace.json"),
                beside(m).join("other/inplace.json"),
            )
            .unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            std::os::unix::fs::symlink(beside(m).join("other"), &dir).unwrap();
        }),
        ("originals a symlink to another folder", |m| {
            let dir = kernels(m).join(".patchkit/originals");
            std::fs::remove_dir_all(&dir).unwrap();
            std::os::unix::fs::symlink(beside(m).join("other/originals"), &dir).unwrap();
        }),
    ]
}

/// The library and the folder beside it, every regular file hashed.
fn state(m: &FakeMachine) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    (regular_digests(&kernels(m)), regular_digests(&beside(m)))
}

#[test]
fn a_forged_record_is_refused_by_every_reader_and_nothing_outside_is_touched() {
    if !bounded::available() {
        return;
    }
    for (case, forge) in cases() {
        let m = rewritten();
        forge(&m);
        let before = state(&m);
        let patchkit = kernels(&m).join(".patchkit").display().to_string();
        for args in [&[][..], &["--check"], &["--undo"], &["--undo", "--check"]] {
            let run = rewrite(&m, args);
            run.ended_with(&[1]);
            // the time and memory of each refusal, for `--nocapture` (never asserted)
            eprintln!(
                "{case}, {args:?}: {:.2}s, {} KiB",
                run.seconds, run.peak_kib
            );
            assert!(
                run.run.stderr.contains(&patchkit) && run.run.stderr.contains("refus"),
                "{case}, {args:?}: the refusal names the record\n{}",
                run.run.stderr
            );
            assert_eq!(state(&m), before, "{case}, {args:?}: nothing changed");
        }
        // doctor refuses the record too: not "patched", the refusal said
        let doctor = m.doctor_command(&["--json", "--python", &format!("/{VENV}")]);
        let run = bounded_run(doctor);
        run.ended_with(&[0, 3]);
        eprintln!("{case}, doctor: {:.2}s, {} KiB", run.seconds, run.peak_kib);
        let report: serde_json::Value = serde_json::from_str(&run.run.stdout).unwrap();
        let lib = report["machine"]["hipblaslt_libraries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| {
                l["path"]
                    .as_str()
                    .unwrap()
                    .ends_with("torch/lib/libhipblaslt.so")
            })
            .unwrap_or_else(|| panic!("{case}: the venv's library in {report:#}"))
            .clone();
        assert!(lib["rewritten"].is_null(), "{case}: {lib:#}");
        let refused = lib["record_refused"].as_str().unwrap_or_default();
        assert!(
            refused.contains(".patchkit") && refused.contains("refus"),
            "{case}: doctor names the refused record: {lib:#}"
        );
        assert_eq!(state(&m), before, "{case}: doctor changed nothing");
    }
}

#[test]
fn undo_all_through_virtual_env_refuses_a_forged_absolute_key() {
    if !bounded::available() {
        return;
    }
    let m = rewritten();
    let key = beside(&m).join("victim.co").display().to_string();
    forge_victim(&m, &key);
    let before = state(&m);
    let mut cmd = command(&home(&m), &["--undo", "--all"]);
    cmd.env("VIRTUAL_ENV", m.root().join(VENV));
    let run = bounded_run(cmd);
    run.ended_with(&[1]);
    assert!(
        run.run.stderr.contains("inplace.json") && run.run.stderr.contains("absolute"),
        "{}",
        run.run.stderr
    );
    assert_eq!(state(&m), before);
}

#[test]
fn kernel_files_that_are_fifos_devices_huge_or_behind_a_folder_link_are_refused() {
    if !bounded::available() {
        return;
    }
    let cases: [HostileFile; 4] = [
        ("a FIFO", |m| {
            mkfifo(&kernels(m).join("TensileLibrary_FIFO_gfx1201.co"));
            "TensileLibrary_FIFO_gfx1201.co".to_owned()
        }),
        ("a link to /dev/zero", |m| {
            let name = "TensileLibrary_ZERO_gfx1201.co";
            std::os::unix::fs::symlink("/dev/zero", kernels(m).join(name)).unwrap();
            name.to_owned()
        }),
        ("a 3 GB sparse file", |m| {
            sparse(&kernels(m).join("TensileLibrary_HUGE_gfx1201.co"), 3 << 30);
            "TensileLibrary_HUGE_gfx1201.co".to_owned()
        }),
        ("a symlinked subfolder", |m| {
            let outside = beside(m).join("kernels");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(
                outside.join("TensileLibrary_OUT_gfx1201.co"),
                codeobj::gfx12_kernel_file(true),
            )
            .unwrap();
            std::os::unix::fs::symlink(&outside, kernels(m).join("more")).unwrap();
            "more".to_owned()
        }),
    ];
    for (case, plant) in cases {
        let m = machine();
        let name = plant(&m);
        let before = state(&m);
        for args in [&["--check"][..], &[]] {
            let run = rewrite(&m, args);
            run.ended_with(&[1]);
            assert!(
                run.run.stderr.contains(&name),
                "{case}, {args:?}: the file is named\n{}",
                run.run.stderr
            );
            assert_eq!(state(&m), before, "{case}, {args:?}: nothing changed");
        }
        assert!(!kernels(&m).join(".patchkit").exists(), "{case}");
    }
}
