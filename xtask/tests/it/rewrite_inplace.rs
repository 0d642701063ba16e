//! `rewrite-hipblaslt` on a venv whose `torch/lib` holds Debian's real
//! libhipblaslt1 7.1.1 (a sample of its gfx12 kernel files): doctor says
//! affected, the rewrite, doctor says mitigated, `--undo` puts every byte
//! back; a second run and `--check` change nothing; kill -9 mid-rewrite
//! leaves every file whole and a re-run finishes; a file changed since makes
//! `--undo` refuse; an unreadable kernel file leaves its library alone; a
//! folder the user cannot write asks for root; comgr's cache loses the
//! entries that hold the old code.

use std::path::{Path, PathBuf};

use crate::support::codeobj;
use crate::support::doctor::{fault, next, FakeMachine};
use crate::support::inplace::{
    comgr_entry, command, debian, digests, kernel_digests, place, rewrite,
};

const VENV: &str = "home/user/venv";
const TORCH_LIB: &str = "home/user/venv/lib/python3.12/site-packages/torch/lib";

/// RDNA4 on an unfixed kernel, with a venv holding Debian's 7.1.1 sample.
fn machine(sid: &Path) -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    m.file(
        &format!("{TORCH_LIB}/../version.py"),
        "__version__ = '2.9.1+rocm7.1'\nhip = '7.1.25424'\n",
    );
    place(sid, &m.root().join(TORCH_LIB), "libhipblaslt.so");
    m
}

fn kernels(m: &FakeMachine) -> PathBuf {
    m.root().join(TORCH_LIB).join("hipblaslt/library")
}

fn home(m: &FakeMachine) -> PathBuf {
    m.root().join("home/user")
}

fn venv(m: &FakeMachine) -> String {
    m.root().join(VENV).display().to_string()
}

/// doctor's verdict on the expert-scheduling fault and the venv's library.
fn doctor(m: &FakeMachine) -> (serde_json::Value, serde_json::Value) {
    let run = m.doctor(&["--json", "--python", "/home/user/venv"]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}", run.stderr));
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
        .cloned()
        .unwrap_or_else(|| panic!("the venv's hipBLASLt in {:#}", report["machine"]));
    (fault(&report, "cwsr-expert-sched").clone(), lib)
}

/// Files whose bytes differ between two digest maps.
fn differing(
    a: &std::collections::BTreeMap<String, String>,
    b: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect()
}

fn record(m: &FakeMachine) -> serde_json::Value {
    let text = std::fs::read_to_string(kernels(m).join(".patchkit/inplace.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_venv_rewritten_in_place_is_mitigated_and_undone_byte_for_byte() {
    let Some(sid) = debian("sid") else { return };
    let m = machine(&sid);
    let lib_dir = m.root().join(TORCH_LIB);
    let original = digests(&lib_dir);

    let (cwsr, lib) = doctor(&m);
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    assert_eq!(lib["judgement"]["verdict"], "on", "{lib:#}");
    assert!(
        next(&cwsr).contains(&format!("cargo xtask rewrite-hipblaslt /{TORCH_LIB}")),
        "{cwsr:#}"
    );

    // comgr's cache: an entry holding the old code, one holding code
    // without the switch, and the pruner's timestamp
    let cache = home(&m).join(".cache/comgr");
    std::fs::create_dir_all(&cache).unwrap();
    let on = codeobj::elf(codeobj::GFX1201, &codeobj::kernel(true));
    let off = codeobj::elf(codeobj::GFX1201, &codeobj::kernel(false));
    std::fs::write(cache.join("llvmcache-0123abcd"), comgr_entry(&[&on], "")).unwrap();
    std::fs::write(cache.join("llvmcache-4567ef01"), comgr_entry(&[&off], "")).unwrap();
    std::fs::write(cache.join("llvmcache.timestamp"), "").unwrap();

    // --check changes nothing, the cache included
    let check = rewrite(&home(&m), &["--check", "--python", &venv(&m)]);
    check
        .success()
        .stdout_has("8 kernel files would be rewritten")
        .stdout_has("1 entry holding kernels with expert scheduling on would be removed");
    assert_eq!(digests(&lib_dir), original);
    assert!(cache.join("llvmcache-0123abcd").is_file());

    let run = rewrite(&home(&m), &["--python", &venv(&m)]);
    run.success()
        .stdout_has("8 kernel files rewritten")
        .stdout_has("1 entry holding kernels with expert scheduling on removed");
    let rewritten = kernel_digests(&lib_dir);
    let changed = differing(&original, &rewritten);
    assert_eq!(changed.len(), 8, "{changed:?}");
    assert!(
        changed
            .iter()
            .all(|f| f.contains("_gfx120") && !f.contains("SS_SS")),
        "{changed:?}"
    );
    assert!(!cache.join("llvmcache-0123abcd").exists());
    assert!(cache.join("llvmcache-4567ef01").is_file());
    assert!(cache.join("llvmcache.timestamp").is_file());
    // the record agrees with the files and keeps the originals
    let rec = record(&m);
    let files = rec["files"].as_object().unwrap();
    assert_eq!(files.len(), 8);
    for (rel, entry) in files {
        assert_eq!(entry["state"], "done");
        assert_eq!(
            entry["sha256_after"],
            rewritten[&format!("hipblaslt/library/{rel}")]
        );
        assert_eq!(
            entry["sha256_before"],
            original[&format!("hipblaslt/library/{rel}")]
        );
        assert!(entry["sites"].as_u64().unwrap() >= 1, "{entry:#}");
        let kept = kernels(&m).join(entry["original"].as_str().unwrap());
        assert!(!kept.to_string_lossy().ends_with(".co"));
        assert_eq!(
            xtask::shared::hash::sha256_file(&kept).unwrap(),
            entry["sha256_before"].as_str().unwrap()
        );
    }

    let (cwsr, lib) = doctor(&m);
    assert_eq!(lib["judgement"]["verdict"], "off", "{lib:#}");
    assert!(
        lib["rewritten"]
            .as_str()
            .unwrap()
            .contains("rewritten off in place (8 kernel files"),
        "{lib:#}"
    );
    assert_eq!(cwsr["status"], "mitigated", "{cwsr:#}");
    assert!(
        cwsr["why"]
            .as_str()
            .unwrap()
            .contains("patched: expert scheduling rewritten off"),
        "{cwsr:#}"
    );
    m.doctor(&["--python", "/home/user/venv"])
        .success()
        .stdout_has("patched: expert scheduling rewritten off");

    // a second run and --check change nothing
    let after = digests(&lib_dir);
    rewrite(&home(&m), &["--python", &venv(&m)])
        .success()
        .stdout_has("nothing to rewrite (8 kernel files rewritten before, 4 without a site)");
    rewrite(&home(&m), &["--check", &lib_dir.display().to_string()]).success();
    assert_eq!(digests(&lib_dir), after);

    rewrite(&home(&m), &["--undo", "--python", &venv(&m)])
        .success()
        .stdout_has("8 kernel files restored");
    assert_eq!(
        digests(&lib_dir),
        original,
        "every byte back, nothing of ours left"
    );
    let (cwsr, lib) = doctor(&m);
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    assert!(lib["rewritten"].is_null(), "{lib:#}");
}

#[test]
fn undo_refuses_naming_a_file_changed_since_the_rewrite() {
    let Some(sid) = debian("sid") else { return };
    let m = machine(&sid);
    let lib_dir = m.root().join(TORCH_LIB);
    rewrite(&home(&m), &[&lib_dir.display().to_string()]).success();
    // a package upgrade replaces one file
    let (rel, _) = record(&m)["files"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    let upgraded = kernels(&m).join(&rel);
    std::fs::remove_file(&upgraded).unwrap();
    std::fs::write(&upgraded, codeobj::gfx12_kernel_file(true)).unwrap();
    let before = digests(&lib_dir);
    rewrite(&home(&m), &["--undo", &lib_dir.display().to_string()])
        .fails_with(1)
        .stderr_has(&rel)
        .stderr_has("changed since the rewrite");
    assert_eq!(digests(&lib_dir), before, "nothing restored");
    // doctor no longer calls it ours, and the file with the switch is affected again
    let (cwsr, lib) = doctor(&m);
    assert!(lib["rewritten"].is_null(), "{lib:#}");
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    // a new run takes the upgraded file as it is now
    rewrite(&home(&m), &[&lib_dir.display().to_string()])
        .success()
        .stderr_has("changed since it was rewritten")
        .stdout_has("1 kernel files rewritten");
}

#[test]
fn an_unreadable_kernel_file_leaves_its_library_unchanged() {
    let Some(sid) = debian("sid") else { return };
    let m = machine(&sid);
    let lib_dir = m.root().join(TORCH_LIB);
    // a CCOB header whose sizes lie
    let mut hostile = codeobj::gfx12_kernel_file(true);
    hostile[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let name = "TensileLibrary_ZZ_Hostile_gfx1201.co";
    std::fs::write(kernels(&m).join(name), &hostile).unwrap();
    let before = digests(&lib_dir);
    rewrite(&home(&m), &[&lib_dir.display().to_string()])
        .fails_with(1)
        .stderr_has(name)
        .stderr_has("left unchanged");
    assert_eq!(digests(&lib_dir), before);
    assert!(!kernels(&m).join(".patchkit").exists());
}

#[test]
fn a_folder_this_user_cannot_write_needs_root() {
    let Some(sid) = debian("sid") else { return };
    let m = machine(&sid);
    let lib_dir = m.root().join(TORCH_LIB);
    let before = digests(&lib_dir);
    let root = crate::support::is_root();
    if root {
        // root writes anywhere: run as nobody, who can read the tree, a copy
        // of the binary nobody can run wherever the checkout is
        let bin = m.root().join("xtask");
        crate::support::tools::copy_program(Path::new(env!("CARGO_BIN_EXE_xtask")), &bin);
        std::process::Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(m.root())
            .status()
            .unwrap();
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(kernels(&m), std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let as_user = |args: &[&str]| {
        let mut cmd = command(&home(&m), args);
        if !root {
            return crate::support::Run::of(cmd.output().unwrap());
        }
        let mut nobody = std::process::Command::new("setpriv");
        nobody
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(m.root().join("xtask"))
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => nobody.env(k, v),
                None => nobody.env_remove(k),
            };
        }
        crate::support::Run::of(nobody.output().unwrap())
    };
    let lib = lib_dir.display().to_string();
    as_user(&["--check", &lib])
        .success()
        .stdout_has("8 kernel files would be rewritten")
        .stdout_has("note: ")
        .stdout_has("needs root");
    as_user(&[&lib])
        .fails_with(1)
        .stderr_has("not writable by this user")
        .stderr_has("needs root")
        .stderr_has("puts the original kernel files back");
    assert_eq!(digests(&lib_dir), before);
}

#[test]
fn kill_9_during_a_rewrite_leaves_every_file_whole_and_a_rerun_finishes() {
    let Some(sid) = debian("sid") else { return };
    // what a finished rewrite makes of each file
    let reference = machine(&sid);
    let ref_dir = reference.root().join(TORCH_LIB);
    let original = kernel_digests(&ref_dir);
    rewrite(&home(&reference), &[&ref_dir.display().to_string()]).success();
    let finished = kernel_digests(&ref_dir);

    let mut killed_midway = false;
    for _attempt in 0..20 {
        let m = machine(&sid);
        let lib_dir = m.root().join(TORCH_LIB);
        let record_path = kernels(&m).join(".patchkit/inplace.json");
        let mut child = command(
            &home(&m),
            &["--threads", "1", &lib_dir.display().to_string()],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
        // the record names a second file only after the first one's rename
        let recorded = || {
            std::fs::read(&record_path)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .map_or(0, |r| r["files"].as_object().map_or(0, |f| f.len()))
        };
        let started = std::time::Instant::now();
        while recorded() < 2 && started.elapsed().as_secs() < 60 {
            if child.try_wait().unwrap().is_some() {
                break;
            }
        }
        let _ = child.kill();
        let status = child.wait().unwrap();
        if status.success() {
            continue;
        }
        // every file original or rewritten, never partial
        let now = kernel_digests(&lib_dir);
        let mut rewritten_files = 0;
        for (rel, sha) in &now {
            if rel.contains("/.") {
                continue; // a staged rewrite beside its file, hidden
            }
            assert!(
                original.get(rel) == Some(sha) || finished.get(rel) == Some(sha),
                "{rel} is neither original nor rewritten"
            );
            if original.get(rel) != Some(sha) {
                rewritten_files += 1;
            }
        }
        // the record agrees: a done file is rewritten, an intended one
        // either, and no file outside it is rewritten
        let rec = record(&m);
        let files = rec["files"].as_object().unwrap();
        for (rel, entry) in files {
            let sha = &now[&format!("hipblaslt/library/{rel}")];
            match entry["state"].as_str().unwrap() {
                "done" => assert_eq!(entry["sha256_after"], sha.as_str()),
                "intent" => assert!(
                    entry["sha256_after"] == sha.as_str() || entry["sha256_before"] == sha.as_str()
                ),
                other => panic!("state {other}"),
            }
        }
        assert!(rewritten_files <= files.len());
        if (1..8).contains(&rewritten_files) {
            killed_midway = true;
        }
        // a re-run finishes the job
        rewrite(&home(&m), &[&lib_dir.display().to_string()]).success();
        assert_eq!(kernel_digests(&lib_dir), finished);
        assert!(record(&m)["files"]
            .as_object()
            .unwrap()
            .values()
            .all(|e| e["state"] == "done"));
        if killed_midway {
            break;
        }
    }
    assert!(
        killed_midway,
        "no run was killed after its first rename and before its last"
    );
}

#[test]
fn our_rewritten_debian_package_is_reported_patched() {
    let Some(sid) = debian("sid") else { return };
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    let lib_dir = m.root().join("usr/lib/x86_64-linux-gnu");
    place(&sid, &lib_dir, "libhipblaslt.so.1.1");
    // what our package holds: the rewritten kernels, without our record
    rewrite(&home(&m), &[&lib_dir.display().to_string()]).success();
    std::fs::remove_dir_all(lib_dir.join("hipblaslt/library/.patchkit")).unwrap();
    let dpkg = |version: &str| {
        m.file(
            "var/lib/dpkg/status",
            &format!(
                "Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.3.dfsg-3\n\n\
                 Package: libhipblaslt1\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n"
            ),
        )
        .file(
            "var/lib/dpkg/info/libhipblaslt1:amd64.list",
            "/usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.1\n/usr/lib/x86_64-linux-gnu/libhipblaslt.so.1\n",
        );
    };
    let judged = || {
        let (run, report) = m.report();
        run.success();
        let lib = report["machine"]["hipblaslt_libraries"][0].clone();
        (fault(&report, "cwsr-expert-sched").clone(), lib)
    };
    dpkg("7.1.1+dfsg-4+patchkit1");
    let (cwsr, lib) = judged();
    assert_eq!(cwsr["status"], "mitigated", "{cwsr:#}");
    assert_eq!(
        lib["rewritten"],
        "expert scheduling rewritten off by our package libhipblaslt1 7.1.1+dfsg-4+patchkit1"
    );
    // Debian's own version: its kernels are off, but not ours
    dpkg("7.1.1+dfsg-4");
    let (cwsr, lib) = judged();
    assert_eq!(cwsr["status"], "not-affected", "{cwsr:#}");
    assert!(lib["rewritten"].is_null(), "{lib:#}");
}

#[test]
fn a_venv_rewritten_by_root_stays_its_owners() {
    use std::os::unix::fs::MetadataExt;
    let Some(sid) = debian("sid") else { return };
    if !crate::support::is_root() {
        eprintln!("skipping: only root gives files to another user");
        return;
    }
    let m = machine(&sid);
    let lib_dir = m.root().join(TORCH_LIB);
    let status = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&lib_dir)
        .status()
        .unwrap();
    assert!(status.success());
    rewrite(&home(&m), &[&lib_dir.display().to_string()]).success();
    let mut stack = vec![lib_dir.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            assert_eq!(
                (meta.uid(), meta.gid()),
                (65534, 65534),
                "{}",
                entry.path().display()
            );
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    assert!(kernels(&m).join(".patchkit/inplace.json").is_file());
}
