//! Real upstream git repositories made by a test, served by path, by
//! `file://` URL and by a real `git daemon` on 127.0.0.1.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A git repository in a temp dir, built commit by commit.
pub struct Upstream {
    dir: tempfile::TempDir,
    commits: std::cell::Cell<u32>,
}

impl Upstream {
    /// An empty repository with branch `main` (its folder is named `up`).
    pub fn new() -> Upstream {
        let dir = tempfile::Builder::new()
            .prefix("patchkit-upstream-")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir(dir.path().join("up")).unwrap();
        let up = Upstream {
            dir,
            commits: std::cell::Cell::new(0),
        };
        up.git(&["init", "-q", "-b", "main"]);
        up.git(&["config", "user.name", "Upstream Dev"]);
        up.git(&["config", "user.email", "dev@upstream.invalid"]);
        up.git(&["config", "commit.gpgsign", "false"]);
        up
    }

    /// The working tree (and the path URL of the repository).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("up")
    }

    pub fn url(&self) -> String {
        self.path().display().to_string()
    }

    pub fn file_url(&self) -> String {
        format!("file://{}", self.path().display())
    }

    /// Runs `git <args>` in the repository and returns its trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.dir.path())
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
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Writes a file of the working tree.
    pub fn file(&self, rel: &str, text: &str) -> &Upstream {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    /// Commits everything and returns the new commit id.
    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.commits.set(self.commits.get() + 1);
        self.head()
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// An annotated tag at HEAD.
    pub fn tag(&self, name: &str) -> &Upstream {
        self.git(&["tag", "-a", "-m", name, name]);
        self
    }

    /// A branch at HEAD (HEAD stays where it is).
    pub fn branch(&self, name: &str) -> &Upstream {
        self.git(&["branch", "-f", name]);
        self
    }

    /// Lets clients fetch any reachable commit by id (shallow fetches of a
    /// pinned commit need it).
    pub fn allow_sha1_in_want(&self, allow: bool) -> &Upstream {
        self.git(&[
            "config",
            "uploadpack.allowReachableSHA1InWant",
            if allow { "true" } else { "false" },
        ]);
        self
    }

    /// Serves the repository with `git daemon` on 127.0.0.1.
    pub fn daemon(&self) -> Daemon {
        Daemon::serve(self.dir.path(), "up")
    }
}

/// A running `git daemon` on 127.0.0.1; killed when dropped.
pub struct Daemon {
    child: Child,
    port: u16,
    name: String,
}

impl Daemon {
    fn serve(base: &Path, name: &str) -> Daemon {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
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

    pub fn url(&self) -> String {
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
