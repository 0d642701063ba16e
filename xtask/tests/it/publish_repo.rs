//! `publish-repo` of the demo's and `amdgpu-cwsr-off`'s dist folders,
//! signed with a throwaway key, checked with the distributions' own tools:
//! apt-ftparchive's `Packages`, gpgv on `InRelease` and `Release.gpg`,
//! `rpm -K` on every rpm, repo-add's database entries and `pacman-key
//! --verify`, dpkg-genchanges' `.changes` and `dput --simulate`; the same
//! inputs give the same bytes, and `dist/` is never changed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::support::repos::{built, one_file, publish, TestKey};
use crate::support::tools::{run, stdout};
use crate::support::{have_tools, snapshot, snapshot_diff};

const URL: &str = "https://packages.example.invalid/rocm-patchkit";

#[test]
fn publishing_twice_gives_the_same_bytes_and_leaves_dist_alone() {
    if !have_tools(&["gpg", "rpmsign", "createrepo_c"]) {
        return;
    }
    let (p, dists) = built();
    let before: Vec<_> = dists.iter().map(|d| snapshot(d)).collect();
    let key = TestKey::new("repo");
    let (a, b) = (p.root().join("repo-a"), p.root().join("repo-b"));
    let first = publish(&p, &dists, &a, URL, &key);
    first.success().stdout_has(&key.fingerprint);
    first.stdout_has("sudo apt-get install -y /tmp/rocm-patchkit-archive-keyring.deb");
    publish(&p, &dists, &b, URL, &key).success();
    let differ = snapshot_diff(&snapshot(&a), &snapshot(&b));
    assert!(
        differ.is_empty(),
        "two publications of the same inputs differ in {differ:?}"
    );
    let after: Vec<_> = dists.iter().map(|d| snapshot(d)).collect();
    assert!(before == after, "publish-repo changed a dist folder");
    for rel in [
        "apt/dists/stable/InRelease",
        "apt/dists/stable/Release.gpg",
        "apt/dists/stable/main/binary-amd64/Packages.xz",
        "apt/pool/main/a/amdgpu-cwsr-off/amdgpu-cwsr-off_1.0-1_all.deb",
        "apt/pool/main/p/patchkit-hello/patchkit-hello-dkms_0.1.0-1_all.deb",
        "rpm/repodata/repomd.xml.asc",
        "rpm/amdgpu-cwsr-off-1.0-1.noarch.rpm",
        "rpm/rocm-patchkit.repo",
        "pacman/rocm-patchkit.db",
        "pacman/rocm-patchkit.db.sig",
        "pacman/amdgpu-cwsr-off-1.0-1-any.pkg.tar.zst.sig",
        "upload/debian/patchkit-hello_0.1.0-1_source.changes",
        "upload/rpm/patchkit-hello-dkms-0.1.0-1.src.rpm",
        "rocm-patchkit-archive-keyring.gpg",
        "setup.txt",
    ] {
        assert!(a.join(rel).is_file(), "{rel} is missing");
    }
    p.xtask(&["verify", &a.display().to_string()])
        .success()
        .stdout_has("exactly as published");
    // Published again in place: replaced, the same bytes.
    publish(&p, &dists, &a, URL, &key).success();
    let differ = snapshot_diff(&snapshot(&a), &snapshot(&b));
    assert!(
        differ.is_empty(),
        "published again in place, {differ:?} differ"
    );
}

#[test]
fn the_apt_indexes_are_apt_ftparchives_and_gpgv_checks_their_signatures() {
    if !have_tools(&[
        "gpg",
        "gpgv",
        "rpmsign",
        "createrepo_c",
        "apt-ftparchive",
        "lintian",
    ]) {
        return;
    }
    let (p, dists) = built();
    let key = TestKey::new("apt");
    let repo = p.root().join("repo");
    publish(&p, &dists, &repo, URL, &key).success();
    let apt = repo.join("apt");
    let reference = stdout(
        Command::new("apt-ftparchive")
            .args(["packages", "pool"])
            .current_dir(&apt),
    );
    let ours =
        std::fs::read_to_string(apt.join("dists/stable/main/binary-amd64/Packages")).unwrap();
    assert_eq!(
        stanzas(&ours),
        stanzas(&reference),
        "our Packages is not apt-ftparchive's"
    );
    assert_eq!(stanzas(&ours).len(), 3, "cwsr-off, demo and the keyring");
    let keyring = repo.join("rocm-patchkit-archive-keyring.gpg");
    let dists_dir = apt.join("dists/stable");
    let gpgv = |args: &[&Path]| {
        run(Command::new("gpgv")
            .arg("--keyring")
            .arg(&keyring)
            .args(args))
    };
    gpgv(&[&dists_dir.join("InRelease")]).success();
    gpgv(&[&dists_dir.join("Release.gpg"), &dists_dir.join("Release")]).success();
    let release = std::fs::read_to_string(dists_dir.join("Release")).unwrap();
    for rel in [
        "main/binary-amd64/Packages",
        "main/binary-amd64/Packages.xz",
    ] {
        let sha = xtask::shared::hash::sha256_file(&dists_dir.join(rel)).unwrap();
        assert!(
            release
                .lines()
                .any(|l| l.starts_with(&format!(" {sha} ")) && l.ends_with(rel)),
            "{rel}: {release}"
        );
    }
    let tampered = p.root().join("Release.tampered");
    std::fs::write(
        &tampered,
        release.replace("Suite: stable", "Suite: unstable"),
    )
    .unwrap();
    assert_ne!(
        gpgv(&[&dists_dir.join("Release.gpg"), &tampered]).code,
        0,
        "gpgv took a changed Release"
    );
    // The keyring package: lintian-clean, carrying the very key and a source for the URL.
    let deb = one_file(
        &apt.join("pool/main/r/rocm-patchkit-archive-keyring"),
        "rocm-patchkit-archive-keyring_",
        "_all.deb",
    );
    // `.gpg`, as Debian 12's own archive keyrings are named, where lintian
    // would pedantically like `.pgp`.
    crate::support::tools::lintian(&deb).assert_only(
        Some(&['P']),
        &["openpgp-file-has-implementation-specific-extension [usr/share/keyrings/rocm-patchkit-archive-keyring.gpg]"],
    );
    let unpacked = p.root().join("keyring-deb");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked)).success();
    assert_eq!(
        std::fs::read(unpacked.join("usr/share/keyrings/rocm-patchkit-archive-keyring.gpg"))
            .unwrap(),
        std::fs::read(&keyring).unwrap()
    );
    let sources =
        std::fs::read_to_string(unpacked.join("etc/apt/sources.list.d/rocm-patchkit.sources"))
            .unwrap();
    assert!(
        sources.contains(&format!("URIs: {URL}/apt\nSuites: stable\n")),
        "{sources}"
    );
}

/// The stanzas of a `Packages` file, each as a map of field to value.
fn stanzas(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut out: Vec<BTreeMap<String, String>> = Vec::new();
    for para in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
        let mut map = BTreeMap::new();
        let mut last = String::new();
        for line in para.lines() {
            if line.starts_with(' ') {
                if let Some(value) = map.get_mut(&last) {
                    let value: &mut String = value;
                    value.push_str(&format!("\n{line}"));
                }
            } else if let Some((k, v)) = line.split_once(':') {
                last = k.to_owned();
                map.insert(last.clone(), v.trim().to_owned());
            }
        }
        out.push(map);
    }
    out.sort_by(|a, b| a.get("Package").cmp(&b.get("Package")));
    out
}

#[test]
fn every_rpm_is_signed_with_the_key_and_only_that_key() {
    if !have_tools(&["gpg", "gpgv", "rpm", "rpmsign", "createrepo_c"]) {
        return;
    }
    let (p, dists) = built();
    let key = TestKey::new("rpm");
    let repo = p.root().join("repo");
    publish(&p, &dists, &repo, URL, &key).success();
    let rpms: Vec<_> = ["rpm", "upload/rpm"]
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(repo.join(d))
                .unwrap()
                .flatten()
                .map(|e| e.path())
        })
        .filter(|p| p.extension().is_some_and(|e| e == "rpm"))
        .collect();
    assert_eq!(
        rpms.len(),
        5,
        "3 packages (the keyring's too) and 2 source rpms: {rpms:?}"
    );
    let db = p.root().join("rpmdb");
    let rpm = |args: &[&str], files: &[&Path]| {
        run(Command::new("rpm")
            .arg("--dbpath")
            .arg(&db)
            .args(args)
            .args(files)
            .env("LC_ALL", "C.UTF-8"))
    };
    rpm(
        &["--import"],
        &[&repo.join("rocm-patchkit-archive-keyring.asc")],
    )
    .success();
    for file in &rpms {
        rpm(&["-K"], &[file])
            .success()
            .stdout_has("digests signatures OK");
    }
    // The published dist rpm stays unsigned.
    let unsigned = rpm(
        &["-Kv"],
        &[&dists[1].join("amdgpu-cwsr-off-1.0-1.noarch.rpm")],
    );
    assert!(
        !unsigned.stdout.contains("Signature"),
        "{}",
        unsigned.stdout
    );
    // Another key in the database: no signature verifies.
    let other = TestKey::new("other");
    let other_asc = p.root().join("other.asc");
    std::fs::write(
        &other_asc,
        other
            .gpg(&["--armor", "--export", &other.fingerprint])
            .stdout,
    )
    .unwrap();
    let other_db = p.root().join("other-rpmdb");
    run(Command::new("rpm")
        .arg("--dbpath")
        .arg(&other_db)
        .arg("--import")
        .arg(&other_asc))
    .success();
    let refused = run(Command::new("rpm")
        .arg("--dbpath")
        .arg(&other_db)
        .arg("-K")
        .arg(&rpms[0])
        .env("LC_ALL", "C.UTF-8"));
    assert_ne!(
        refused.code, 0,
        "rpm -K took a signature by a key it does not hold:\n{}",
        refused.stdout
    );
    run(Command::new("gpgv")
        .arg("--keyring")
        .arg(repo.join("rocm-patchkit-archive-keyring.gpg"))
        .arg(repo.join("rpm/repodata/repomd.xml.asc"))
        .arg(repo.join("rpm/repodata/repomd.xml")))
    .success();
}

#[test]
fn the_keyring_snippets_are_as_reviewed() {
    let site = xtask::release::repos::Site {
        url: URL.to_owned(),
        suite: "stable".to_owned(),
        fingerprint: "0123456789ABCDEF0123456789ABCDEF01234567".to_owned(),
    };
    let templates = crate::support::repo_root().join("templates");
    let snippets = xtask::release::repos::keyring::snippets(&templates, &site).unwrap();
    assert_eq!(
        snippets.len(),
        xtask::release::repos::keyring::TEMPLATES.len()
    );
    for (name, text) in &snippets {
        insta::assert_snapshot!(format!("repos_snippet__{}", name.replace('/', "__")), text);
    }
}
