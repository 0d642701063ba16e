//! A log read as untrusted text, line by line and bounded: at most a window
//! of bytes, lines cut at a length, bytes that are not UTF-8 replaced, and
//! a deadline; what was cut is said, never silently dropped.

use std::io::{BufRead, BufReader, Read};
use std::time::Instant;

/// Bytes of one log read at most (its last ones, for a file).
pub(crate) const WINDOW: u64 = 64 << 20;
/// A longer line is cut there (kernel log records are at most 8 KiB).
pub(crate) const LINE_MAX: usize = 16 << 10;

/// What reading a log took, and why it stopped early if it did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) bytes: u64,
    pub(crate) lines: u64,
    /// Why the rest was not read (the window, the deadline).
    pub(crate) cut: Option<String>,
    /// A read error that ended it.
    pub(crate) error: Option<String>,
}

/// Calls `each(line number, line)` for every line of `reader`, up to
/// `window` bytes and until `deadline`. A line longer than [`LINE_MAX`] is
/// cut, its rest skipped; `\r` at a line's end is dropped.
pub(crate) fn each_line(
    reader: impl Read,
    window: u64,
    deadline: Instant,
    each: &mut dyn FnMut(u64, &str),
) -> Outcome {
    let mut reader = BufReader::with_capacity(1 << 16, reader.take(window.saturating_add(1)));
    let mut line: Vec<u8> = Vec::with_capacity(512);
    let mut out = Outcome::default();
    let mut pending = false;
    loop {
        if Instant::now() > deadline {
            out.cut = Some("stopped at doctor's time limit for reading logs".to_owned());
            break;
        }
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.error = Some(e.to_string());
                break;
            }
        };
        if buf.is_empty() {
            break;
        }
        let end = memchr::memchr(b'\n', buf);
        let chunk = &buf[..end.unwrap_or(buf.len())];
        let room = LINE_MAX.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = end.map_or(buf.len(), |i| i + 1);
        reader.consume(used);
        out.bytes += used as u64;
        pending = end.is_none();
        if end.is_some() {
            out.lines += 1;
            emit(&line, out.lines, each);
            line.clear();
        }
        if out.bytes > window {
            out.cut = Some(format!(
                "read its first {} only",
                crate::shared::report::human_size(window)
            ));
            break;
        }
    }
    if pending && !line.is_empty() {
        out.lines += 1;
        emit(&line, out.lines, each);
    }
    out
}

fn emit(line: &[u8], number: u64, each: &mut dyn FnMut(u64, &str)) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    each(number, &String::from_utf8_lossy(line));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lines(input: &[u8], window: u64) -> (Vec<(u64, String)>, Outcome) {
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let out = each_line(input, window, deadline, &mut |n, l| {
            seen.push((n, l.to_owned()))
        });
        (seen, out)
    }

    #[test]
    fn lines_are_cut_decoded_lossily_and_the_window_holds() {
        let (seen, out) = lines(b"one\r\ntw\xffo\nlast", 1 << 20);
        assert_eq!(
            seen,
            [
                (1, "one".to_owned()),
                (2, "tw\u{fffd}o".to_owned()),
                (3, "last".to_owned())
            ]
        );
        assert_eq!(out.cut, None);
        let long = vec![b'x'; LINE_MAX * 3];
        let (seen, _) = lines(&[&long[..], b"\nnext\n"].concat(), 1 << 20);
        assert_eq!(seen[0].1.len(), LINE_MAX);
        assert_eq!(seen[1], (2, "next".to_owned()));
        let (seen, out) = lines(&b"a\n".repeat(1000), 100);
        assert!(seen.len() <= 51, "{}", seen.len());
        assert!(out.cut.unwrap().contains("first 100 B"));
    }

    #[test]
    fn a_past_deadline_reads_nothing() {
        let mut n = 0;
        let out = each_line(&b"a\nb\n"[..], 1 << 20, Instant::now(), &mut |_, _| n += 1);
        assert_eq!(n, 0);
        assert!(out.cut.unwrap().contains("time limit"));
    }
}
