//! A command run under a memory limit (`prlimit --as`), a time limit
//! (`timeout -s KILL`) and `/usr/bin/time -v`, for the tests of hostile
//! inputs: a crash, a hang and the peak memory are each seen and named.

use std::path::Path;
use std::process::Command;

use super::{ci, Run};

/// How a bounded run ended and what it cost.
pub(crate) struct Bounded {
    pub(crate) run: Run,
    /// Peak resident memory of the command, KiB (`Maximum resident set size`).
    pub(crate) peak_kib: u64,
    /// Wall-clock seconds.
    pub(crate) seconds: f64,
}

/// The tools a bounded run needs; with `CI=true` their absence fails.
pub(crate) fn available() -> bool {
    let have = ["/usr/bin/time", "/usr/bin/prlimit", "/usr/bin/timeout"]
        .iter()
        .all(|t| Path::new(t).exists());
    assert!(
        have || !ci(),
        "CI needs /usr/bin/time (package time), prlimit and timeout"
    );
    have
}

/// Runs `cmd` with at most `address_space` bytes of virtual memory, killed
/// after `seconds`, measured by `/usr/bin/time -v`.
pub(crate) fn run(cmd: &Command, address_space: u64, seconds: u64) -> Bounded {
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut outer = Command::new("/usr/bin/time");
    outer
        .arg("-v")
        .arg("-o")
        .arg(report.path())
        .args(["/usr/bin/timeout", "-s", "KILL"])
        .arg(seconds.to_string())
        .arg("/usr/bin/prlimit")
        .arg(format!("--as={address_space}"))
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        outer.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => outer.env(key, v),
            None => outer.env_remove(key),
        };
    }
    let run = Run::of(outer.output().expect("running /usr/bin/time"));
    let text = std::fs::read_to_string(report.path()).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name:?} in /usr/bin/time's report:\n{text}"))
            .trim()
            .to_owned()
    };
    let peak_kib = field("Maximum resident set size (kbytes):")
        .parse()
        .unwrap();
    // `Elapsed (wall clock) time (h:mm:ss or m:ss): 0:01.23`
    let elapsed = field("Elapsed (wall clock) time (h:mm:ss or m:ss):");
    let seconds = elapsed
        .split(':')
        .fold(0.0, |acc, part| acc * 60.0 + part.parse::<f64>().unwrap());
    Bounded {
        run,
        peak_kib,
        seconds,
    }
}

impl Bounded {
    /// Asserts the command ended by itself with one of `codes`: not killed
    /// by the time limit (137), not aborted by the memory limit (134), no
    /// panic (101).
    #[track_caller]
    pub(crate) fn ended_with(&self, codes: &[i32]) -> &Bounded {
        let what = match self.run.code {
            137 | -1 => "killed: it hung past its time limit",
            134 => "aborted: it ran out of its memory limit",
            101 => "panicked",
            _ => "an unexpected exit status",
        };
        assert!(
            codes.contains(&self.run.code),
            "exit {} ({what}) after {:.1}s, peak {} KiB\nstdout:\n{}\nstderr:\n{}",
            self.run.code,
            self.seconds,
            self.peak_kib,
            self.run.stdout,
            self.run.stderr
        );
        self
    }
}
