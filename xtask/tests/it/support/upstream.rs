//! Real upstream git repositories made by a test, served by path, by
//! `file://` URL and by a real `git daemon` on 127.0.0.1.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A git repository built commit by commit through the `git` CLI, with a
/// fixed identity and dates, so commit ids are the same on every run. Its
/// folder is a temp dir of its own ([`Upstream::new`]) or one a test names
/// ([`Upstream::init`]).
pub(crate) struct Upstream {
    /// The temp dir that holds the repository, when it owns one.
    _home: Option<tempfile::TempDir>,
    path: PathBuf,
    commits: std::cell::Cell<u32>,
}

impl Upstream {
    /// An empty repository with branch `main` (its folder is named `up`).
    pub(crate) fn new() -> Upstream {
        let home = tempfile::Builder::new()
            .prefix("patchkit-upstream-")
            .tempdir()
            .expect("temp dir");
        let path = home.path().join("up");
        Upstream::make(Some(home), path)
    }

    /// An empty repository with branch `main` in `dir` (created).
    pub(crate) fn init(dir: &Path) -> Upstream {
        Upstream::make(None, dir.to_path_buf())
    }

    fn make(home: Option<tempfile::TempDir>, path: PathBuf) -> Upstream {
        std::fs::create_dir_all(&path).unwrap();
        let up = Upstream {
            _home: home,
            path,
            commits: std::cell::Cell::new(0),
        };
        up.git(&["init", "-q", "-b", "main"]);
        up.git(&["config", "user.name", "Upstream Dev"]);
        up.git(&["config", "user.email", "dev@upstream.invalid"]);
        up.git(&["config", "commit.gpgsign", "false"]);
        up.git(&["config", "core.autocrlf", "false"]);
        up
    }

    /// The working tree (and the path URL of the repository).
    pub(crate) fn path(&self) -> PathBuf {
        self.path.clone()
    }

    pub(crate) fn url(&self) -> String {
        self.path().display().to_string()
    }

    pub(crate) fn file_url(&self) -> String {
        format!("file://{}", self.path().display())
    }

    /// Runs `git <args>` in the repository and returns its trimmed stdout.
    pub(crate) fn git(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.git_bytes(args))
            .trim()
            .to_owned()
    }

    /// Runs `git <args>` in the repository and returns its stdout as is.
    pub(crate) fn git_bytes(&self, args: &[&str]) -> Vec<u8> {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.path)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env(
                "GIT_AUTHOR_DATE",
                format!("2025-11-14T20:{:02}:00Z", self.commits.get() % 60),
            )
            .env(
                "GIT_COMMITTER_DATE",
                format!("2025-11-14T20:{:02}:00Z", self.commits.get() % 60),
            )
            .output()
            .expect("running git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// Writes a file of the working tree.
    pub(crate) fn file(&self, rel: &str, text: &str) -> &Upstream {
        let path = self.path.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    /// Commits everything and returns the new commit id.
    pub(crate) fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.commits.set(self.commits.get() + 1);
        self.head()
    }

    pub(crate) fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// The tree of `commit` written into `dir`, without moving HEAD.
    pub(crate) fn checkout(&self, commit: &str, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        self.git(&[
            "--work-tree",
            dir.to_str().unwrap(),
            "checkout",
            "-q",
            commit,
            "--",
            ".",
        ]);
    }

    /// `git archive --format=tar [--prefix=<prefix>] <commit>` into `path`.
    pub(crate) fn archive(&self, commit: &str, prefix: Option<&str>, path: &Path) {
        let prefix = prefix.map(|p| format!("--prefix={p}"));
        let mut args = vec!["archive", "--format=tar", "-o", path.to_str().unwrap()];
        args.extend(prefix.as_deref());
        args.push(commit);
        self.git(&args);
    }

    /// `git format-patch -1 <commit>` as bytes.
    pub(crate) fn format_patch(&self, commit: &str) -> Vec<u8> {
        self.git_bytes(&["format-patch", "-1", "--stdout", "-M", commit])
    }

    /// An annotated tag at HEAD.
    pub(crate) fn tag(&self, name: &str) -> &Upstream {
        self.git(&["tag", "-a", "-m", name, name]);
        self
    }

    /// A branch at HEAD (HEAD stays where it is).
    pub(crate) fn branch(&self, name: &str) -> &Upstream {
        self.git(&["branch", "-f", name]);
        self
    }

    /// Lets clients fetch any reachable commit by id (shallow fetches of a
    /// pinned commit need it).
    pub(crate) fn allow_sha1_in_want(&self, allow: bool) -> &Upstream {
        self.git(&[
            "config",
            "uploadpack.allowReachableSHA1InWant",
            if allow { "true" } else { "false" },
        ]);
        self
    }

    /// Serves the repository with `git daemon` on 127.0.0.1.
    pub(crate) fn daemon(&self) -> Daemon {
        let base = self
            .path
            .parent()
            .expect("a repository folder has a parent");
        let name = self
            .path
            .file_name()
            .expect("a repository folder has a name");
        Daemon::serve(base, &name.to_string_lossy())
    }
}

/// A running `git daemon` on 127.0.0.1; killed when dropped.
pub(crate) struct Daemon {
    child: Child,
    port: u16,
    name: String,
}

impl Daemon {
    fn serve(base: &Path, name: &str) -> Daemon {
        let port = super::free_port();
        let child = Command::new(git_daemon())
            .arg("--reuseaddr")
            .arg(format!("--base-path={}", base.display()))
            .args(["--export-all", "--enable=upload-pack", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning git daemon");
        let daemon = Daemon {
            child,
            port,
            name: name.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "git daemon did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }

    pub(crate) fn url(&self) -> String {
        format!("git://127.0.0.1:{}/{}", self.port, self.name)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `git-daemon`: Debian's `git` package puts it in /usr/lib/git-core, off PATH.
fn git_daemon() -> PathBuf {
    let exec_path = Command::new("git")
        .arg("--exec-path")
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    [exec_path, Some(PathBuf::from("/usr/lib/git-core"))]
        .into_iter()
        .flatten()
        .map(|dir| dir.join("git-daemon"))
        .find(|p| p.is_file())
        .expect("git-daemon not found (Debian: apt-get install git)")
}
