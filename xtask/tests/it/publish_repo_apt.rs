//! The apt repository of `publish-repo` as a user meets it: served on
//! 127.0.0.1, in a clean Debian chroot with no other source, the keyring
//! package makes `apt-get update` verify the repository, `apt-get install`
//! installs the stop-gap, a rebuilt and re-published recipe comes with
//! `apt-get upgrade`, and a changed `Packages` file or a repository signed
//! with another key makes `apt-get update` refuse.

use crate::support::chroot::{tarball, Chroot};
use crate::support::repos::{built, one_file, publish, Served, TestKey};
use crate::support::{cwsr_off, demo, have_tools};

#[test]
fn apt_in_a_clean_chroot_verifies_installs_upgrades_and_refuses_tampering() {
    if !have_tools(&["gpg", "rpmsign", "createrepo_c", "python3", "unshare"]) {
        return;
    }
    let Some(tarball) = tarball() else { return };
    let (p, dists) = built();
    let key = TestKey::new("apt");
    let served = p.root().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let repo = served.join("repo");
    let port = Served::pick_port();
    let url = format!("http://127.0.0.1:{port}/repo");
    publish(&p, &dists, &repo, &url, &key).success();
    let _server = Served::start(&served, port);

    let chroot = Chroot::unpack(&tarball);
    chroot.offline();
    let keyring = one_file(
        &repo.join("apt/pool/main/r/rocm-patchkit-archive-keyring"),
        "rocm-patchkit-archive-keyring_",
        ".deb",
    );
    std::fs::copy(&keyring, chroot.path("tmp/keyring.deb")).unwrap();
    chroot.ok("dpkg -i /tmp/keyring.deb");
    let update = chroot.ok("apt-get update");
    assert!(
        update.contains(&format!("{url}/apt stable InRelease")),
        "{update}"
    );
    for bad in ["NO_PUBKEY", "not signed", "insecure", "W:", "E:"] {
        assert!(!update.contains(bad), "`{bad}` in:\n{update}");
    }
    chroot.ok("apt-get install -y amdgpu-cwsr-off");
    assert!(chroot.path("etc/modprobe.d/amdgpu-cwsr-off.conf").is_file());
    assert_eq!(installed(&chroot, "amdgpu-cwsr-off"), "1.0-1");

    // The recipe changed (release 2), rebuilt later and published again.
    let recipe = p.root().join("recipes/amdgpu-cwsr-off.toml");
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(&recipe, text.replace("release = \"1\"", "release = \"2\"")).unwrap();
    let later = (demo::EPOCH.parse::<i64>().unwrap() + 86400).to_string();
    p.xtask_with(
        &["build-config", "amdgpu-cwsr-off"],
        &[("SOURCE_DATE_EPOCH", &later)],
    )
    .success();
    publish(&p, &[demo::dist(&p), cwsr_off::dist(&p)], &repo, &url, &key).success();
    chroot.ok("apt-get update && apt-get upgrade -y");
    assert_eq!(installed(&chroot, "amdgpu-cwsr-off"), "1.0-2");

    // A changed Packages file (both forms), as a client without lists gets
    // it: refused by its hash in the signed Release.
    let packages = repo.join("apt/dists/stable/main/binary-amd64");
    let original = std::fs::read_to_string(packages.join("Packages")).unwrap();
    let changed = original.replace("Version: 1.0-2", "Version: 1.0-3");
    std::fs::write(packages.join("Packages"), &changed).unwrap();
    let mut xz = xz2::write::XzEncoder::new(Vec::new(), 6);
    std::io::Write::write_all(&mut xz, changed.as_bytes()).unwrap();
    std::fs::write(packages.join("Packages.xz"), xz.finish().unwrap()).unwrap();
    let refused = chroot.sh("rm -rf /var/lib/apt/lists/* && apt-get update");
    assert_ne!(
        refused.code, 0,
        "apt-get update took a changed Packages:\n{}{}",
        refused.stdout, refused.stderr
    );
    let said = refused.stdout.clone() + &refused.stderr;
    assert!(
        said.contains("Hash Sum mismatch") || said.contains("unexpected size"),
        "{said}"
    );

    // Published again with another key: apt refuses the signature.
    let other = TestKey::new("other");
    publish(
        &p,
        &[demo::dist(&p), cwsr_off::dist(&p)],
        &repo,
        &url,
        &other,
    )
    .success();
    let refused = chroot.sh("apt-get update");
    let said = refused.stdout.clone() + &refused.stderr;
    assert_ne!(
        refused.code, 0,
        "apt-get update took another key's signature:\n{said}"
    );
    assert!(
        said.contains("NO_PUBKEY") || said.contains("not signed"),
        "{said}"
    );
    // Nothing changed on the machine: still the version of the trusted repository.
    assert_eq!(installed(&chroot, "amdgpu-cwsr-off"), "1.0-2");
}

fn installed(chroot: &Chroot, package: &str) -> String {
    chroot
        .ok(&format!("dpkg-query -W -f='${{Version}}' {package}"))
        .trim()
        .to_owned()
}
