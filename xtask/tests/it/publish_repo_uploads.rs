//! The signed uploads of `publish-repo`: each `.changes` is what
//! `dpkg-genchanges -S` writes for the signed source package, `dput
//! --simulate` accepts it (signatures of the `.changes` and `.dsc`, every
//! checksum) with the key in the keyring, and refuses a changed file or an
//! unknown key.

use std::path::Path;
use std::process::Command;

use crate::support::have_tools;
use crate::support::repos::{built, publish, TestKey};
use crate::support::tools::{run, sh, stdout};

const URL: &str = "https://packages.example.invalid/rocm-patchkit";

#[test]
fn each_changes_is_dpkg_genchanges_and_dput_accepts_it() {
    if !have_tools(&[
        "gpg",
        "gpgv",
        "rpmsign",
        "createrepo_c",
        "dpkg-source",
        "dpkg-genchanges",
        "dput",
    ]) {
        return;
    }
    let (p, dists) = built();
    let key = TestKey::new("upload");
    let repo = p.root().join("repo");
    publish(&p, &dists, &repo, URL, &key).success();
    let upload = repo.join("upload/debian");
    for (source, version) in [("patchkit-hello", "0.1.0-1"), ("amdgpu-cwsr-off", "1.0-1")] {
        let changes = upload.join(format!("{source}_{version}_source.changes"));
        let ours = signed_text(&repo.join("rocm-patchkit-archive-keyring.gpg"), &changes);
        assert_eq!(
            ours,
            genchanges(&p.root().join(source), &upload, source, version),
            "{source}"
        );
        dput(&key, &changes, &p.root().join("dput.cf"))
            .success()
            .stdout_has("Simulated upload");
    }
    // A changed file of the upload is refused by its checksum.
    let changed = p.root().join("changed");
    sh(
        p.root(),
        &format!("cp -r {} {}", upload.display(), changed.display()),
    );
    sh(&changed, "printf x >> amdgpu-cwsr-off_1.0.orig.tar.gz");
    let refused = dput(
        &key,
        &changed.join("amdgpu-cwsr-off_1.0-1_source.changes"),
        &p.root().join("dput.cf"),
    );
    assert_ne!(
        refused.code, 0,
        "dput took a changed file:\n{}{}",
        refused.stdout, refused.stderr
    );
    // A keyring without the key: dput refuses the signature.
    let stranger = TestKey::new("stranger");
    let unknown = run(&mut dput_command(
        stranger.home(),
        &upload.join("patchkit-hello_0.1.0-1_source.changes"),
        &p.root().join("dput.cf"),
    ));
    assert_ne!(
        unknown.code, 0,
        "dput took an unknown signature:\n{}{}",
        unknown.stdout, unknown.stderr
    );
}

/// The text `changes` signs, checked by gpgv against the published key.
fn signed_text(keyring: &Path, changes: &Path) -> String {
    stdout(
        Command::new("gpgv")
            .arg("--keyring")
            .arg(keyring)
            .arg("--output")
            .arg("-")
            .arg(changes),
    )
}

/// `dpkg-genchanges -S` in the source package the signed `.dsc` of
/// `upload` unpacks to (its files read from `upload`, the signed `.dsc` too).
fn genchanges(work: &Path, upload: &Path, source: &str, version: &str) -> String {
    std::fs::create_dir_all(work).unwrap();
    sh(work, &format!("cp {}/{source}_* .", upload.display()));
    let dsc = format!("{source}_{version}.dsc");
    run(Command::new("dpkg-source")
        .args(["-x", &dsc, "tree"])
        .current_dir(work))
    .success();
    stdout(
        Command::new("dpkg-genchanges")
            .arg("-S")
            .current_dir(work.join("tree"))
            .env("LC_ALL", "C.UTF-8"),
    )
}

fn dput_command(gnupghome: &Path, changes: &Path, config: &Path) -> Command {
    let incoming = config.with_file_name("incoming");
    std::fs::create_dir_all(&incoming).unwrap();
    std::fs::write(
        config,
        format!(
            "[local]\nmethod = local\nincoming = {}\nallow_unsigned_uploads = 0\n",
            incoming.display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new("dput");
    cmd.args(["--simulate", "-c"])
        .arg(config)
        .arg("local")
        .arg(changes)
        .env("GNUPGHOME", gnupghome)
        .env("USER", "root")
        .env("LC_ALL", "C.UTF-8");
    cmd
}

fn dput(key: &TestKey, changes: &Path, config: &Path) -> crate::support::Run {
    run(&mut dput_command(key.home(), changes, config))
}
