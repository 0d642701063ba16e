//! Where the logs come from. `--log FILE`: the files the user saved (a
//! `dmesg`, `journalctl -k`, a job's stderr, a HIP log), regular files only,
//! their last [`WINDOW`] bytes. Without `--log`, the kernel log of this
//! boot: `journalctl -k -b` run as a process (bounded output and time),
//! else `/dev/kmsg` read non-blocking to its end; with `--root` other than
//! `/`, the machine's `/var/log/kern.log` below it (never this host's log).

use std::ffi::OsStr;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::source_journal::{self as journal, Journal};

use super::lines::{each_line, Outcome, WINDOW};
use super::parse::Parser;
use super::{LogRead, Scan};
use crate::doctor::fsread::{Root, Unread};
use crate::input::knowledge::Glob;

/// All logs of one run are read within this.
pub(crate) const TIME: Duration = Duration::from_secs(6);
/// The kernel log below `--root`.
const KERN_LOG: &str = "var/log/kern.log";

/// What to read, passed by the command.
pub(crate) struct Settings<'a> {
    /// The machine (`/`, or a copy below which its own log is read).
    pub(crate) root: &'a Path,
    /// `--log` files, as given.
    pub(crate) files: &'a [PathBuf],
    /// Kernel-name patterns of the known faults.
    pub(crate) patterns: Vec<Glob>,
    /// The program run for this boot's kernel log when the root is `/`.
    pub(crate) journalctl: &'a OsStr,
}

/// Reads the logs `settings` name; what cannot be read is an [`Unread`].
pub(crate) fn read(settings: &Settings) -> (Scan, Vec<Unread>) {
    let deadline = Instant::now() + TIME;
    let mut scan = Scan::default();
    let mut unread = Vec::new();
    if !settings.files.is_empty() {
        for file in settings.files {
            let shown = file.display().to_string();
            let host = std::path::absolute(file).unwrap_or_else(|_| file.clone());
            match open_tail(&Root::new(Path::new("/")), &host, &shown) {
                Ok(opened) => read_file(opened, &shown, settings, &mut scan, deadline),
                Err(u) => unread.push(u),
            }
        }
    } else if settings.root == Path::new("/") {
        this_boot(settings, &mut scan, &mut unread, deadline);
    } else {
        let root = Root::new(settings.root);
        let shown = format!("/{KERN_LOG} (below --root)");
        match open_tail(&root, Path::new(KERN_LOG), &format!("/{KERN_LOG}")) {
            Ok(opened) => read_file(opened, &shown, settings, &mut scan, deadline),
            Err(u) if u.why == "does not exist" => {
                scan.note = Some(format!(
                    "no /{KERN_LOG} below --root, and this host's own log is not that machine's: give a saved kernel log with --log"
                ))
            }
            Err(u) => unread.push(u),
        }
    }
    (scan, unread)
}

/// A regular file opened at its last [`WINDOW`] bytes: the file, whether
/// it was cut, and its size.
struct Tail {
    file: std::fs::File,
    skipped: u64,
    len: u64,
}

fn open_tail(root: &Root, path: &Path, shown: &str) -> Result<Tail, Unread> {
    let (mut file, len) = root.open(path, u64::MAX).map_err(|mut u| {
        u.path = shown.to_owned();
        if u.why.contains("FIFO") {
            u.why += " (save the log to a file first: journalctl -k > kernel.log)";
        }
        u
    })?;
    let skipped = len.saturating_sub(WINDOW);
    if skipped > 0 {
        file.seek(SeekFrom::Start(skipped)).map_err(|e| Unread {
            path: shown.to_owned(),
            why: format!("cannot read: {e}"),
        })?;
    }
    Ok(Tail { file, skipped, len })
}

fn read_file(tail: Tail, shown: &str, s: &Settings, scan: &mut Scan, deadline: Instant) {
    let mut parser = Parser::new(shown, &s.patterns, &mut scan.events);
    let cut_start = tail.skipped > 0;
    let mut out = each_line(tail.file, WINDOW, deadline, &mut |n, line| {
        // the first line of a window that starts mid-file is a part of one
        if !(cut_start && n == 1) {
            parser.line(n, line);
        }
    });
    parser.finish();
    if cut_start {
        out.cut = Some(format!(
            "read its last {} of {}",
            crate::shared::report::human_size(WINDOW),
            crate::shared::report::human_size(tail.len)
        ));
    }
    scan.read.push(log_read(shown, out));
}

fn log_read(shown: &str, out: Outcome) -> LogRead {
    let cut = match (out.cut, out.error) {
        (cut, None) => cut,
        (Some(cut), Some(err)) => Some(format!("{cut}; then {err}")),
        (None, Some(err)) => Some(format!("stopped by a read error: {err}")),
    };
    LogRead {
        source: shown.to_owned(),
        bytes: out.bytes,
        lines: out.lines,
        cut,
    }
}

/// This boot's kernel log: journalctl, else /dev/kmsg; both refused is
/// said with what to do.
fn this_boot(s: &Settings, scan: &mut Scan, unread: &mut Vec<Unread>, deadline: Instant) {
    let denied_journal = match journal::run(s.journalctl, &s.patterns, scan, deadline) {
        Journal::Read => return,
        Journal::Denied => true,
        Journal::Missing | Journal::Empty => false,
    };
    match kmsg(&s.patterns, scan, deadline) {
        Ok(()) => {}
        Err(why) => {
            let journal = if denied_journal {
                "journalctl shows the kernel log only to the adm and systemd-journal groups, and "
            } else {
                ""
            };
            unread.push(Unread {
                path: "/dev/kmsg".to_owned(),
                why: format!(
                    "{why}: {journal}the kernel restricts it to root (kernel.dmesg_restrict); save it with `sudo dmesg > kernel.log` and run doctor --log kernel.log"
                ),
            });
        }
    }
}

/// `/dev/kmsg` read without blocking until it has no more records; each
/// record becomes a `[seconds.micro] message` line.
fn kmsg(patterns: &[Glob], scan: &mut Scan, deadline: Instant) -> Result<(), String> {
    let path = Path::new("/dev/kmsg");
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    // the kernel's log device is char 1:11; anything else is not read
    if !meta.file_type().is_char_device()
        || libc::major(meta.rdev()) != 1
        || libc::minor(meta.rdev()) != 11
    {
        return Err("is not the kernel's log device (char 1:11)".to_owned());
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
            _ => e.to_string(),
        })?;
    let shown = "/dev/kmsg";
    let mut parser = Parser::new(shown, patterns, &mut scan.events);
    let mut out = Outcome::default();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        if Instant::now() > deadline {
            out.cut = Some("stopped at doctor's time limit for reading logs".to_owned());
            break;
        }
        if out.bytes > WINDOW {
            out.cut = Some(format!(
                "read its first {} only",
                crate::shared::report::human_size(WINDOW)
            ));
            break;
        }
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            // a record overwritten while read, or a signal: go on
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.error = Some(e.to_string());
                break;
            }
        };
        out.bytes += n as u64;
        out.lines += 1;
        if let Some(line) = kmsg_line(&buf[..n]) {
            parser.line(out.lines, &line);
        }
    }
    parser.finish();
    scan.read.push(log_read(shown, out));
    Ok(())
}

/// `PRI,SEQ,USEC,FLAGS;MESSAGE\n KEY=value...` as dmesg prints it.
fn kmsg_line(record: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(record);
    let (head, message) = text.split_once(';')?;
    let usec: u64 = head.split(',').nth(2)?.parse().ok()?;
    let message = message.split('\n').next().unwrap_or("");
    Some(format!(
        "[{:5}.{:06}] {message}",
        usec / 1_000_000,
        usec % 1_000_000
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmsg_records_read_like_dmesg() {
        let line = kmsg_line(b"3,1234,812004411,-;amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:9 pasid:32771)\n SUBSYSTEM=pci\n").unwrap();
        assert_eq!(
            line,
            "[  812.004411] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:9 pasid:32771)"
        );
        assert_eq!(kmsg_line(b"no header"), None);
    }
}
