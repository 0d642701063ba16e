//! The rpm repository of `publish-repo` as a dnf user meets it (Debian's
//! `dnf`, `--installroot`): the keyring rpm brings the key and a `.repo`
//! file with `gpgcheck=1` and `repo_gpgcheck=1`; dnf then installs the
//! stop-gap from the repository served on 127.0.0.1, and refuses the
//! repository once its metadata is signed by another key.

use std::path::Path;
use std::process::Command;

use crate::support::repos::{built, one_file, publish, Served, TestKey};
use crate::support::tools::run;
use crate::support::{have_tools, is_root, Run};

#[test]
fn dnf_installs_the_stop_gap_with_signatures_checked() {
    if !is_root() || !have_tools(&["gpg", "rpm", "rpmsign", "createrepo_c", "dnf", "python3"]) {
        return;
    }
    let (p, dists) = built();
    let key = TestKey::new("dnf");
    let served = p.root().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let repo = served.join("repo");
    let port = Served::pick_port();
    let url = format!("http://127.0.0.1:{port}/repo");
    publish(&p, &dists, &repo, &url, &key).success();
    let _server = Served::start(&served, port);

    let root = p.root().join("installroot");
    std::fs::create_dir_all(&root).unwrap();
    let keyring = one_file(
        &repo.join("rpm"),
        "rocm-patchkit-archive-keyring-",
        ".noarch.rpm",
    );
    run(Command::new("rpm").arg("--root").arg(&root).arg("--initdb")).success();
    run(Command::new("rpm")
        .arg("--root")
        .arg(&root)
        .args(["-i", "--nodeps"])
        .arg(&keyring))
    .success();
    let repo_file =
        std::fs::read_to_string(root.join("etc/yum.repos.d/rocm-patchkit.repo")).unwrap();
    assert!(
        repo_file.contains(&format!("baseurl={url}/rpm\n"))
            && repo_file.contains("gpgcheck=1\nrepo_gpgcheck=1\n"),
        "{repo_file}"
    );
    assert!(root
        .join("etc/pki/rpm-gpg/RPM-GPG-KEY-rocm-patchkit")
        .is_file());

    let install = dnf(&root, &["install", "amdgpu-cwsr-off"]);
    install.success().stdout_has("Installed:");
    assert!(root.join("etc/modprobe.d/amdgpu-cwsr-off.conf").is_file());
    let checked = run(Command::new("rpm").arg("--root").arg(&root).args([
        "-q",
        "--qf",
        "%{RSAHEADER:pgpsig} %{DSAHEADER:pgpsig}\\n",
        "amdgpu-cwsr-off",
    ]));
    assert!(
        checked
            .stdout
            .to_lowercase()
            .contains(&key.fingerprint[24..].to_lowercase()),
        "{}",
        checked.stdout
    );

    // The same repository signed by another key: dnf refuses its metadata.
    let other = TestKey::new("other");
    publish(&p, &dists, &repo, &url, &other).success();
    let refused = dnf(&root, &["--refresh", "reinstall", "amdgpu-cwsr-off"]);
    assert_ne!(
        refused.code, 0,
        "dnf took metadata signed by an unknown key:\n{}{}",
        refused.stdout, refused.stderr
    );
    let said = refused.stdout + &refused.stderr;
    assert!(
        said.contains("repomd.xml GPG signature verification error"),
        "{said}"
    );
}

/// `dnf -y --installroot <root> <args>` with the root's own repository
/// files and caches. dnf reads a `file://` key on the machine, not in the
/// install root: the key the keyring package installed is named there.
fn dnf(root: &Path, args: &[&str]) -> Run {
    let key = root.join("etc/pki/rpm-gpg/RPM-GPG-KEY-rocm-patchkit");
    run(Command::new("dnf")
        .args(["-y", "--releasever=12", "--setopt=install_weak_deps=False"])
        .arg(format!("--installroot={}", root.display()))
        .arg(format!(
            "--setopt=reposdir={}",
            root.join("etc/yum.repos.d").display()
        ))
        .arg(format!(
            "--setopt=cachedir={}",
            root.join("var/cache/dnf").display()
        ))
        .arg(format!(
            "--setopt=rocm-patchkit.gpgkey=file://{}",
            key.display()
        ))
        .args(args)
        .env("LC_ALL", "C.UTF-8"))
}
