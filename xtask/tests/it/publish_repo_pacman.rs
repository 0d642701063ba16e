//! The pacman repository of `publish-repo`: its database entries are
//! repo-add's for the same signed packages, every `.sig` verifies with
//! `pacman-key --verify`, and pacman syncs and installs the stop-gap from
//! it in a scratch root over HTTP on 127.0.0.1 with the key the keyring
//! package carries, refusing a changed database and a repository signed
//! with another key.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::repos::{built, one_file, publish, Served, TestKey};
use crate::support::tools::{bsdtar_unpack, run, sh, stdout};
use crate::support::{have_tools, is_root, Run};

#[test]
fn the_database_is_repo_adds_and_every_signature_verifies() {
    if !is_root()
        || !have_tools(&[
            "gpg",
            "rpmsign",
            "createrepo_c",
            "repo-add",
            "pacman-key",
            "bsdtar",
        ])
    {
        return;
    }
    let (p, dists) = built();
    let key = TestKey::new("pacman");
    let repo = p.root().join("repo");
    publish(
        &p,
        &dists,
        &repo,
        "https://packages.example.invalid/r",
        &key,
    )
    .success();
    let ours = repo.join("pacman");
    let reference = p.root().join("repo-add");
    std::fs::create_dir_all(&reference).unwrap();
    sh(
        &ours,
        &format!("cp *.pkg.tar.zst *.pkg.tar.zst.sig {}", reference.display()),
    );
    run(Command::new("repo-add")
        .args(["-q", "ref.db.tar.gz"])
        .args(packages(&reference))
        .current_dir(&reference))
    .success();
    for (db, member) in [("db", "desc"), ("files", "desc"), ("files", "files")] {
        let (a, b) = (
            p.root().join(format!("ours-{db}")),
            p.root().join(format!("ref-{db}")),
        );
        bsdtar_unpack(&ours.join(format!("rocm-patchkit.{db}.tar.gz")), &a);
        bsdtar_unpack(&reference.join(format!("ref.{db}.tar.gz")), &b);
        for entry in std::fs::read_dir(&b).unwrap().flatten() {
            let name = entry.file_name();
            let theirs = std::fs::read_to_string(entry.path().join(member)).unwrap();
            let mine = std::fs::read_to_string(a.join(&name).join(member)).unwrap();
            assert_eq!(mine, theirs, "{db}: {}/{member}", name.to_string_lossy());
        }
        assert_eq!(
            std::fs::read_dir(&a).unwrap().count(),
            3,
            "cwsr-off, demo and the keyring"
        );
    }
    let keys = Keys::new(
        p.root(),
        &repo.join("rocm-patchkit-archive-keyring.gpg"),
        &key.fingerprint,
    );
    for sig in std::fs::read_dir(&ours)
        .unwrap()
        .flatten()
        .map(|e| e.path())
    {
        if sig.extension().is_some_and(|e| e == "sig") {
            keys.pacman_key(&["--verify"], &sig).success();
        }
    }
}

#[test]
fn pacman_installs_the_stop_gap_from_the_signed_database_and_refuses_a_changed_one() {
    if !is_root()
        || !have_tools(&[
            "gpg",
            "rpmsign",
            "createrepo_c",
            "pacman",
            "pacman-key",
            "bsdtar",
            "python3",
        ])
    {
        return;
    }
    let (p, dists) = built();
    let key = TestKey::new("pacman");
    let served = p.root().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let repo = served.join("repo");
    let port = Served::pick_port();
    let url = format!("http://127.0.0.1:{port}/repo");
    publish(&p, &dists, &repo, &url, &key).success();
    let _server = Served::start(&served, port);
    // What the keyring package installs (its script runs pacman-key --populate).
    let keyring = one_file(
        &repo.join("pacman"),
        "rocm-patchkit-archive-keyring-",
        ".pkg.tar.zst",
    );
    let unpacked = p.root().join("keyring-package");
    bsdtar_unpack(&keyring, &unpacked);
    let keyrings = unpacked.join("usr/share/pacman/keyrings");
    let trusted = std::fs::read_to_string(keyrings.join("rocm-patchkit-trusted")).unwrap();
    assert_eq!(trusted, format!("{}:4:\n", key.fingerprint));
    let root = Root::new(
        p.root(),
        &std::fs::read_to_string(repo.join("pacman/rocm-patchkit.conf")).unwrap(),
    );
    let keys = Keys::at(&root.gpgdir, &root.conf);
    keys.init(&keyrings.join("rocm-patchkit.gpg"), &key.fingerprint);
    root.pacman(&["-Sy", "--noconfirm", "amdgpu-cwsr-off"])
        .success();
    assert!(root
        .dir
        .join("etc/modprobe.d/amdgpu-cwsr-off.conf")
        .is_file());
    // A changed database: its signature no longer verifies.
    let db = repo.join("pacman/rocm-patchkit.db");
    let mut bytes = std::fs::read(&db).unwrap();
    bytes.extend_from_slice(b"\0");
    std::fs::write(&db, bytes).unwrap();
    let refused = root.pacman(&["-Syy"]);
    assert_ne!(
        refused.code, 0,
        "pacman took a changed database:\n{}{}",
        refused.stdout, refused.stderr
    );
    // Published again with another key: refused too.
    let other = TestKey::new("other");
    publish(&p, &dists, &repo, &url, &other).success();
    let refused = root.pacman(&["-Syy"]);
    assert_ne!(
        refused.code, 0,
        "pacman took a database signed by an unknown key"
    );
    assert!(refused.stderr.contains("signature"), "{}", refused.stderr);
}

fn packages(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pkg.tar.zst"))
        .collect();
    out.sort();
    out
}

/// A scratch root pacman installs into, with its configuration.
struct Root {
    dir: PathBuf,
    gpgdir: PathBuf,
    conf: PathBuf,
}

impl Root {
    /// `snippet` is what the setup appends to pacman.conf.
    fn new(parent: &Path, snippet: &str) -> Root {
        let dir = parent.join("root");
        for sub in [
            "var/lib/pacman",
            "var/cache/pacman/pkg",
            "etc/pacman.d/gnupg",
            "var/log",
        ] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let gpgdir = dir.join("etc/pacman.d/gnupg");
        let conf = parent.join("pacman.conf");
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                "[options]\nRootDir = {d}\nDBPath = {d}/var/lib/pacman/\nCacheDir = {d}/var/cache/pacman/pkg/\n\
                 GPGDir = {d}/etc/pacman.d/gnupg/\nLogFile = {d}/var/log/pacman.log\nHookDir = {d}/etc/pacman.d/hooks/\n\
                 Architecture = auto\nSigLevel = Required DatabaseOptional\n{snippet}"
            ),
        )
        .unwrap();
        Root { dir, gpgdir, conf }
    }

    fn pacman(&self, args: &[&str]) -> Run {
        run(Command::new("pacman")
            .arg("--config")
            .arg(&self.conf)
            .args(args)
            .env("LC_ALL", "C.UTF-8"))
    }
}

/// A pacman keyring (`pacman-key --gpgdir`).
struct Keys {
    gpgdir: PathBuf,
    conf: PathBuf,
}

impl Keys {
    /// A keyring of its own below `parent` holding `key` (binary), locally signed.
    fn new(parent: &Path, key: &Path, fingerprint: &str) -> Keys {
        let gpgdir = parent.join("pacman-gnupg");
        std::fs::create_dir_all(&gpgdir).unwrap();
        let conf = parent.join("pacman-key.conf");
        std::fs::write(
            &conf,
            format!("[options]\nGPGDir = {}/\n", gpgdir.display()),
        )
        .unwrap();
        let keys = Keys { gpgdir, conf };
        keys.init(key, fingerprint);
        keys
    }

    fn at(gpgdir: &Path, conf: &Path) -> Keys {
        Keys {
            gpgdir: gpgdir.to_path_buf(),
            conf: conf.to_path_buf(),
        }
    }

    /// What `pacman-key --populate` does with a keyring: the keys added,
    /// the trusted ones locally signed.
    fn init(&self, key: &Path, fingerprint: &str) {
        stdout(&mut self.command(&["--init"]));
        self.pacman_key(&["--add"], key).success();
        stdout(&mut self.command(&["--lsign-key", fingerprint]));
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("pacman-key");
        cmd.arg("--config")
            .arg(&self.conf)
            .arg("--gpgdir")
            .arg(&self.gpgdir)
            .args(args)
            .env("LC_ALL", "C.UTF-8");
        cmd
    }

    fn pacman_key(&self, args: &[&str], file: &Path) -> Run {
        run(self.command(args).arg(file))
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(&self.gpgdir)
            .args(["--kill", "all"])
            .status();
    }
}
