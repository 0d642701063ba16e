//! What the repository tests share: a throwaway GnuPG key made in the test
//! (no passphrase, never committed), the demo and `amdgpu-cwsr-off` builds
//! in one project, `publish-repo` of them, and a folder served over HTTP on
//! 127.0.0.1 (python3's `http.server`, stopped when dropped).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::tools::{run, stdout};
use crate::support::{cwsr_off, demo, free_port, Project, Run};

/// A GnuPG home holding one ed25519 signing key without a passphrase; its
/// agent is stopped when dropped.
pub(crate) struct TestKey {
    pub(crate) home: tempfile::TempDir,
    pub(crate) fingerprint: String,
}

impl TestKey {
    /// A new key whose user id is `<name> <name@test.invalid>`.
    pub(crate) fn new(name: &str) -> TestKey {
        let home = tempfile::Builder::new()
            .prefix("pk-gpg-")
            .tempdir()
            .unwrap();
        let gpg = |args: &[&str]| {
            let mut cmd = Command::new("gpg");
            cmd.arg("--homedir")
                .arg(home.path())
                .arg("--batch")
                .args(args);
            cmd
        };
        run(gpg(&[
            "--passphrase",
            "",
            "--quick-gen-key",
            &format!("{name} <{name}@test.invalid>"),
            "ed25519",
            "sign",
            "never",
        ])
        .env("LC_ALL", "C.UTF-8"))
        .success();
        let listing = stdout(&mut gpg(&["--with-colons", "--list-secret-keys"]));
        let fingerprint = listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:::::::::"))
            .and_then(|rest| rest.split(':').next())
            .expect("a fingerprint")
            .to_owned();
        TestKey { home, fingerprint }
    }

    pub(crate) fn home(&self) -> &Path {
        self.home.path()
    }

    /// `gpg --homedir <home> <args>`, in the C locale.
    pub(crate) fn gpg(&self, args: &[&str]) -> Run {
        run(Command::new("gpg")
            .arg("--homedir")
            .arg(self.home())
            .arg("--batch")
            .args(args)
            .env("LC_ALL", "C.UTF-8"))
    }
}

impl Drop for TestKey {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(self.home())
            .args(["--kill", "all"])
            .status();
    }
}

/// A project holding the demo and `amdgpu-cwsr-off` recipes, both built
/// (at the demo's epoch): the two dist folders a repository is made from.
pub(crate) fn built() -> (Project, Vec<PathBuf>) {
    let p = demo::demo_project();
    p.copy_from_repo(&["recipes/amdgpu-cwsr-off.toml", "examples/amdgpu-cwsr-off"]);
    demo::build(&p, &[]).success();
    cwsr_off::build(&p, &[]).success();
    let dists = vec![demo::dist(&p), cwsr_off::dist(&p)];
    (p, dists)
}

/// `publish-repo <dists> --to <to> --url <url>` signed with `key`.
pub(crate) fn publish(p: &Project, dists: &[PathBuf], to: &Path, url: &str, key: &TestKey) -> Run {
    let mut args: Vec<String> = vec!["publish-repo".into()];
    args.extend(dists.iter().map(|d| d.display().to_string()));
    args.extend([
        "--to".into(),
        to.display().to_string(),
        "--url".into(),
        url.into(),
    ]);
    args.extend(["--gnupghome".into(), key.home().display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    p.xtask(&args)
}

/// The one file below `dir` whose name starts with `prefix` and ends with `suffix`.
#[track_caller]
pub(crate) fn one_file(dir: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{prefix}*{suffix} in {}: {found:?}",
        dir.display()
    );
    found[0].clone()
}

/// A folder served over HTTP on 127.0.0.1 until dropped.
pub(crate) struct Served {
    child: Child,
    pub(crate) port: u16,
}

impl Served {
    /// Serves `dir` on `port` (the folder may be replaced while served: each
    /// request looks the path up again).
    pub(crate) fn start(dir: &Path, port: u16) -> Served {
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1"])
            .arg(port.to_string())
            .arg("--directory")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting python3 -m http.server");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "http.server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Served { child, port }
    }

    /// A port for a server started later (the URL is written into the repository first).
    pub(crate) fn pick_port() -> u16 {
        free_port()
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
