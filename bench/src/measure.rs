//! What the benchmarks share: child processes timed and measured as a user
//! sees them, medians, tool lookup.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// Wall time and peak memory of one child process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    pub(crate) secs: f64,
    /// The child's peak resident set (`ru_maxrss` from `wait4`), KiB.
    pub(crate) peak_kib: u64,
}

/// Runs `cmd` to its end, capturing its output, and measures its wall time
/// and its own peak RSS. On Linux a child's `ru_maxrss` starts from its
/// parent's peak (the spawning process's memory is the child's until exec),
/// so `cmd` runs below a fresh copy of this program (`patchkit-bench exec-measured`),
/// which takes the child's peak with `wait4` and passes it back: the figure
/// is then exact to within the few MiB that copy takes at its start.
/// For a pipeline run through a shell the peak is its largest process's.
pub(crate) fn measure(cmd: &mut Command) -> Result<(Output, Measured)> {
    let exe = std::env::current_exe().context("finding this program to measure a child")?;
    let file = tempfile::NamedTempFile::new().context("creating a file for a child's peak")?;
    let mut wrapper = Command::new(exe);
    wrapper
        .args(["exec-measured", "--rusage-out"])
        .arg(file.path())
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapper.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => wrapper.env(key, value),
            None => wrapper.env_remove(key),
        };
    }
    let (out, mut m) = measure_direct(&mut wrapper)?;
    let text = std::fs::read_to_string(file.path()).unwrap_or_default();
    if let Ok(kib) = text.trim().parse() {
        m.peak_kib = kib;
    }
    Ok((out, m))
}

/// `patchkit-bench exec-measured`: runs `program` with this process's stdio, waits
/// for it with `wait4` and writes its peak RSS in KiB to `out`; fails when
/// it fails.
pub(crate) fn exec_measured(out: &Path, program: &OsStr, args: &[OsString]) -> Result<()> {
    let child = Command::new(program)
        .args(args)
        .spawn()
        .with_context(|| format!("running {}", program.to_string_lossy()))?;
    let (status, usage) = wait4(child.id())?;
    std::fs::write(out, format!("{}\n", usage.ru_maxrss))
        .with_context(|| format!("writing {}", out.display()))?;
    if !status.success() {
        bail!("{} exited with {status}", program.to_string_lossy());
    }
    Ok(())
}

/// Waits for the child `pid` (never waited for before): its status and rusage.
fn wait4(pid: u32) -> Result<(std::process::ExitStatus, libc::rusage)> {
    use std::os::unix::process::ExitStatusExt;

    let pid = pid as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 fills the status and the rusage it is given; the child
    // is ours and has not been waited for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if got != pid {
        bail!(
            "waiting for process {pid}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok((std::process::ExitStatus::from_raw(status), usage))
}

/// [`measure`] without the fresh copy in between: the child's peak is at
/// least this process's.
fn measure_direct(cmd: &mut Command) -> Result<(Output, Measured)> {
    use std::io::Read;

    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("running {cmd:?}"))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    // stderr on a thread of its own, so that neither pipe fills and stalls the child.
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let mut out = Vec::new();
    let _ = stdout.read_to_end(&mut out);
    let err = err_reader.join().unwrap_or_default();
    let (status, usage) = wait4(child.id()).with_context(|| format!("waiting for {cmd:?}"))?;
    let secs = started.elapsed().as_secs_f64();
    let output = Output {
        status,
        stdout: out,
        stderr: err,
    };
    let peak_kib = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    Ok((output, Measured { secs, peak_kib }))
}

/// [`measure`], failing with the child's stderr when it fails.
pub(crate) fn measure_ok(cmd: &mut Command, what: &str) -> Result<(Output, Measured)> {
    let (out, m) = measure(cmd)?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((out, m))
}

/// The median; with an even count, the mean of the middle two.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.is_empty() {
        0.0
    } else if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

/// Runs `cmd` quietly; its stderr goes into the error when it fails.
pub(crate) fn run_ok(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `debug` or `release`: the build this program is.
pub(crate) fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Removes `dir` if it is there and creates it empty.
pub(crate) fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

/// `cp -al` (hard links: cheap, same content), or `cp -a` across file systems.
pub(crate) fn link_copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if run_ok(Command::new("cp").arg("-al").arg(from).arg(to)).is_ok() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(to);
    run_ok(Command::new("cp").arg("-a").arg(from).arg(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
    }

    #[test]
    fn a_child_is_measured_by_its_own_peak() {
        // The shell holds 32 MiB in a variable: its peak says so.
        let script = "x=$(head -c 33554432 /dev/zero | tr '\\0' a); echo ${#x}";
        let (out, m) = measure_direct(Command::new("sh").args(["-c", script])).unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "33554432");
        assert!(m.secs > 0.0);
        assert!(m.peak_kib >= 32 * 1024, "{m:?}");
    }
}
