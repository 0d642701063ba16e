//! `journalctl -k -b` run as a process for this boot's kernel log: its
//! output read as a log (bounded like any), killed at the time limit or
//! when the window is full; its refusal to show the kernel log to this
//! user (the hint it prints) told apart from a journal with no kernel log.

use std::ffi::OsStr;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use super::lines::{each_line, WINDOW};
use super::parse::Parser;
use super::{LogRead, Scan};
use crate::input::knowledge::Glob;

/// The kernel-log lines asked of journalctl (its last ones).
const LINES: &str = "200000";
/// What journalctl prints when the user may not see the system's journal.
const DENIED_HINT: &str = "not seeing messages from other users and the system";

/// What running journalctl gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Journal {
    /// Kernel-log lines were read (into the scan).
    Read,
    /// It ran, but shows this user no kernel log.
    Denied,
    /// It ran and gave no kernel log (no journal, or a failure).
    Empty,
    /// It could not be run.
    Missing,
}

/// Runs `program -k -b` and reads what it prints into `scan`.
pub(crate) fn run(
    program: &OsStr,
    patterns: &[Glob],
    scan: &mut Scan,
    deadline: Instant,
) -> Journal {
    let spawned = Command::new(program)
        .args(["-k", "-b", "--no-pager", "-o", "short", "-n", LINES])
        .env("SYSTEMD_COLORS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = spawned else {
        return Journal::Missing;
    };
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errors = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = (&mut stderr).take(16 << 10).read_to_end(&mut text);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&text).into_owned()
    });
    let (done, watch) = mpsc::channel::<()>();
    let pid = child.id() as libc::pid_t;
    let timeout = deadline.saturating_duration_since(Instant::now());
    let watchdog = std::thread::spawn(move || {
        if watch.recv_timeout(timeout) == Err(mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: kill(2) on our own child, not yet waited for (so the
            // pid is still ours even if it has exited).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let shown = "journalctl -k -b";
    let mut kernel_lines = 0u64;
    let mut parser = Parser::new(shown, patterns, &mut scan.events);
    let mut out = each_line(stdout, WINDOW, deadline, &mut |n, line| {
        if !line.starts_with("-- ") {
            kernel_lines += 1;
            parser.line(n, line);
        }
    });
    parser.finish();
    // stop it if it is still writing (the window is full, or the time is up)
    if !matches!(child.try_wait(), Ok(Some(_))) {
        let _ = child.kill();
        out.cut.get_or_insert_with(|| "stopped it early".to_owned());
    }
    drop(done);
    let _ = watchdog.join();
    let status = child.wait();
    let errors = errors.join().unwrap_or_default();
    if kernel_lines == 0 {
        return if errors.contains(DENIED_HINT) {
            Journal::Denied
        } else {
            Journal::Empty
        };
    }
    if !status.is_ok_and(|s| s.success()) && out.cut.is_none() {
        out.error = Some(format!(
            "journalctl failed: {}",
            crate::shared::report::safe(errors.lines().next().unwrap_or("no message"))
        ));
    }
    scan.read.push(LogRead {
        source: shown.to_owned(),
        bytes: out.bytes,
        lines: kernel_lines,
        cut: match (out.cut, out.error) {
            (Some(cut), _) => Some(cut),
            (None, error) => error,
        },
    });
    Journal::Read
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A script standing in for journalctl, run as it would be.
    fn fake(script: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journalctl");
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        (dir, path)
    }

    #[test]
    fn its_output_is_read_and_its_refusal_told() {
        let (_d, ok) = fake(
            "echo 'Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:169 vmid:8 pasid:32770)'\necho 'Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu: \t Faulty UTCL2 client ID: SDMA0 (0xd)'",
        );
        let mut scan = Scan::default();
        let deadline = Instant::now() + Duration::from_secs(10);
        assert_eq!(run(ok.as_os_str(), &[], &mut scan, deadline), Journal::Read);
        assert_eq!(scan.read[0].lines, 2);
        assert_eq!(scan.events.kept[0].client.as_deref(), Some("SDMA0"));
        let (_d, denied) = fake(&format!(
            "echo '-- No entries --'\necho 'Hint: You are currently {DENIED_HINT}.' >&2"
        ));
        let mut scan = Scan::default();
        assert_eq!(
            run(denied.as_os_str(), &[], &mut scan, deadline),
            Journal::Denied
        );
        let mut scan = Scan::default();
        let missing = OsStr::new("/nonexistent/journalctl");
        assert_eq!(run(missing, &[], &mut scan, deadline), Journal::Missing);
    }

    #[test]
    fn an_endless_or_silent_journalctl_is_stopped() {
        let (_d, endless) =
            fake("while :; do echo 'Mar 02 21:14:07 box kernel: usb 1-1: new device'; done");
        let mut scan = Scan::default();
        let start = Instant::now();
        let deadline = start + Duration::from_secs(2);
        assert_eq!(
            run(endless.as_os_str(), &[], &mut scan, deadline),
            Journal::Read
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert!(scan.read[0].cut.is_some(), "{:?}", scan.read);
        let (_d, silent) = fake("exec sleep 100");
        let mut scan = Scan::default();
        let start = Instant::now();
        let deadline = start + Duration::from_secs(1);
        assert_eq!(
            run(silent.as_os_str(), &[], &mut scan, deadline),
            Journal::Empty
        );
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{:?}",
            start.elapsed()
        );
    }
}
