//! Publishing into dist/: atomic, checksums last, checked by `sha256sum -c`
//! and by our own verify.

use std::fs;
use std::process::Command;

use xtask::release::dist::{self, Staging};

fn publish(out: &std::path::Path, files: &[(&str, &str)]) {
    let staging = Staging::begin(out).unwrap();
    for (name, text) in files {
        let path = staging.dir().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    staging
        .publish(|outputs| serde_json::json!({ "outputs": outputs }))
        .unwrap();
}

#[test]
fn a_publication_verifies_and_sha256sum_accepts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dist/demo");
    publish(
        &out,
        &[("a.deb", "deb"), ("source/patches/series", "0001.patch\n")],
    );
    assert_eq!(dist::verify(&out).unwrap(), Vec::<String>::new());
    let status = Command::new("sha256sum")
        .args(["-c", "--strict", "--quiet", "SHA256SUMS"])
        .current_dir(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let sums = fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    assert!(
        sums.contains("  manifest.json\n") && sums.contains("  source/patches/series\n"),
        "{sums}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["outputs"]["a.deb"]["size"], 3);
}

#[test]
fn verify_names_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    publish(&out, &[("a.deb", "deb"), ("b.rpm", "rpm")]);
    fs::write(out.join("a.deb"), "tampered").unwrap();
    fs::remove_file(out.join("b.rpm")).unwrap();
    fs::write(out.join("stray"), "x").unwrap();
    let problems = dist::verify(&out).unwrap().join("\n");
    assert!(problems.contains("a.deb: sha256"), "{problems}");
    assert!(
        problems.contains("b.rpm: listed in SHA256SUMS but missing"),
        "{problems}"
    );
    assert!(
        problems.contains("stray: present but not listed in SHA256SUMS"),
        "{problems}"
    );
}

#[test]
fn a_new_publication_replaces_the_old_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    publish(&out, &[("old.deb", "1")]);
    publish(&out, &[("new.deb", "2")]);
    assert!(!out.join("old.deb").exists());
    assert_eq!(fs::read_to_string(out.join("new.deb")).unwrap(), "2");
    let siblings: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        siblings,
        vec![std::ffi::OsString::from("demo")],
        "leftovers beside the publication"
    );
}

#[test]
fn an_abandoned_staging_leaves_the_old_publication() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    publish(&out, &[("old.deb", "1")]);
    {
        let staging = Staging::begin(&out).unwrap();
        fs::write(staging.dir().join("half.deb"), "half").unwrap();
        // dropped: a failed build
    }
    assert_eq!(dist::verify(&out).unwrap(), Vec::<String>::new());
    assert!(out.join("old.deb").exists() && !out.join("half.deb").exists());
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[test]
fn leftovers_of_a_killed_run_are_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    publish(&out, &[("old.deb", "1")]);
    // a run that died: its pid is gone (pid_max is below 2^22 on Linux)
    fs::create_dir(tmp.path().join("demo.staging-4194304")).unwrap();
    publish(&out, &[("new.deb", "2")]);
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[test]
fn verify_while_a_build_publishes_again_reads_one_publication() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dist/demo");
    let a: &[(&str, &str)] = &[("a.deb", "the first build\n"), ("source/series", "0001\n")];
    let b: &[(&str, &str)] = &[("a.deb", "the second build, longer\n"), ("b.rpm", "rpm\n")];
    publish(&out, a);
    let done = std::sync::atomic::AtomicBool::new(false);
    let (verified, wrong) = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..300 {
                publish(&out, if i % 2 == 0 { b } else { a });
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let (mut verified, mut wrong) = (0, Vec::new());
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            match dist::verify(&out) {
                Ok(problems) if problems.is_empty() => verified += 1,
                Ok(problems) => wrong.push(problems.join("; ")),
                Err(e) => wrong.push(format!("{e:#}")),
            }
        }
        (verified, wrong)
    });
    assert!(
        wrong.is_empty(),
        "{} of {} verifies mixed two publications, the first: {}",
        wrong.len(),
        verified + wrong.len(),
        wrong[0]
    );
    assert!(verified > 0);
}
