//! The one reporting interface: library code says what it is doing through
//! a [`Reporter`]; the binary decides between progress bars on a terminal,
//! plain lines (CI, pipes) and silence (`--quiet`). It is also the one
//! place text from outside is made safe to print ([`safe`]): every sink
//! here, `main`'s error printing and the reports printed on stdout ([`out`])
//! go through it.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long work is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Progress bars and spinners on stderr.
    Terminal,
    /// One plain line per step and at most one progress line every few seconds.
    Plain,
    /// Warnings only.
    Quiet,
}

impl Mode {
    /// Terminal when stderr is a terminal and not in CI (`CI` unset),
    /// plain otherwise.
    pub(crate) fn detect(quiet: bool, ci: bool) -> Mode {
        if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() && !ci {
            Mode::Terminal
        } else {
            Mode::Plain
        }
    }
}

/// Where library code reports steps, warnings and progress. Cheap to clone.
#[derive(Clone)]
pub struct Reporter {
    mode: Mode,
    multi: Arc<indicatif::MultiProgress>,
}

impl Reporter {
    pub(crate) fn new(mode: Mode) -> Reporter {
        Reporter {
            mode,
            multi: Arc::new(indicatif::MultiProgress::new()),
        }
    }

    /// A reporter that prints nothing but warnings (tests, library use).
    pub fn quiet() -> Reporter {
        Reporter::new(Mode::Quiet)
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// A step of the work: `fetch: linux-6.14.11.tar.xz`.
    pub(crate) fn step(&self, message: impl AsRef<str>) {
        // indicatif drops `println` when stderr is not a terminal.
        match self.mode {
            Mode::Terminal => {
                let _ = self.multi.println(safe(message.as_ref()));
            }
            Mode::Plain => eprintln!("{}", safe(message.as_ref())),
            Mode::Quiet => {}
        }
    }

    /// Something the user should know even with `--quiet`.
    pub(crate) fn warn(&self, message: impl AsRef<str>) {
        let line = format!("warning: {}", safe(message.as_ref()));
        if self.mode == Mode::Terminal {
            let _ = self.multi.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    /// Progress of one piece of work of `total` units (bytes when `bytes`),
    /// or of unknown length when `total` is `None`.
    pub(crate) fn progress(
        &self,
        label: impl Into<String>,
        total: Option<u64>,
        bytes: bool,
    ) -> Progress {
        let label = safe(&label.into()).into_owned();
        let bar = (self.mode == Mode::Terminal).then(|| {
            let bar = match total {
                Some(n) => indicatif::ProgressBar::new(n),
                None => indicatif::ProgressBar::new_spinner(),
            };
            let template = match (total.is_some(), bytes) {
                (true, true) => "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                (true, false) => "{msg} [{bar:30}] {pos}/{len} ({elapsed})",
                (false, true) => "{spinner} {msg} {bytes} {bytes_per_sec} ({elapsed})",
                (false, false) => "{spinner} {msg} ({elapsed})",
            };
            let style = indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> ");
            let bar = self
                .multi
                .add(bar.with_style(style).with_message(label.clone()));
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress {
            label,
            total,
            bytes,
            bar,
            plain: self.mode == Mode::Plain,
            started: Instant::now(),
            last_line: Instant::now(),
            done: 0,
        }
    }
}

/// A long step of unknown length (`writing the deb package`, `cmake
/// --build`): a spinner with elapsed time on a terminal; in plain mode a line
/// when it starts, one every 15 s while it runs, and one with its duration
/// when it ends. Dropping it ends it.
pub(crate) struct Task {
    label: String,
    started: Instant,
    bar: Option<indicatif::ProgressBar>,
    ticker: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
    plain: bool,
}

impl Reporter {
    pub(crate) fn task(&self, label: impl Into<String>) -> Task {
        let label = safe(&label.into()).into_owned();
        let started = Instant::now();
        let mut task = Task {
            label: label.clone(),
            started,
            bar: None,
            ticker: None,
            plain: false,
        };
        match self.mode {
            Mode::Terminal => {
                let style = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
                let bar = self.multi.add(
                    indicatif::ProgressBar::new_spinner()
                        .with_style(style)
                        .with_message(label),
                );
                bar.enable_steady_tick(Duration::from_millis(120));
                task.bar = Some(bar);
            }
            Mode::Plain => {
                eprintln!("{label} ...");
                let (stop, wait) = std::sync::mpsc::channel::<()>();
                let handle = std::thread::spawn(move || {
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                        wait.recv_timeout(Duration::from_secs(15))
                    {
                        eprintln!("{label} ... ({}s)", started.elapsed().as_secs());
                    }
                });
                task.ticker = Some((stop, handle));
                task.plain = true;
            }
            Mode::Quiet => {}
        }
        task
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if let Some((stop, handle)) = self.ticker.take() {
            let _ = stop.send(());
            let _ = handle.join();
        }
        if self.plain {
            eprintln!(
                "{}: done in {:.1}s",
                self.label,
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

/// A running piece of work; finishes (clears its bar, prints its summary)
/// when dropped or by [`Progress::finish`].
pub(crate) struct Progress {
    label: String,
    total: Option<u64>,
    bytes: bool,
    bar: Option<indicatif::ProgressBar>,
    plain: bool,
    started: Instant,
    last_line: Instant,
    done: u64,
}

impl Progress {
    pub(crate) fn inc(&mut self, n: u64) {
        self.done += n;
        if let Some(bar) = &self.bar {
            bar.inc(n);
        } else if self.plain && self.last_line.elapsed() >= Duration::from_secs(5) {
            self.last_line = Instant::now();
            eprintln!(
                "{}: {} ({}s)",
                self.label,
                self.amount(),
                self.started.elapsed().as_secs()
            );
        }
    }

    pub(crate) fn set_total(&mut self, total: u64) {
        self.total = Some(total);
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        }
    }

    fn amount(&self) -> String {
        let unit = |n: u64| {
            if self.bytes {
                human_size(n)
            } else {
                n.to_string()
            }
        };
        match self.total {
            Some(t) => format!("{} of {}", unit(self.done), unit(t)),
            None => unit(self.done),
        }
    }

    pub(crate) fn finish(self) {}
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// Text from outside (file names, patch paths, archive entry names, recipe
/// values, machine files) made safe to print on a terminal, as git and
/// cargo quote paths: every control character (C0, DEL, C1, so ESC and the
/// CSI that start terminal sequences, and CR) and every bidirectional
/// override is shown escaped, `\x1b`, `\u{9b}`, `\u{202e}`. The newline
/// and the tab are kept: they are the lines and columns of our own
/// multi-line messages (a name that holds one shows as more lines, never as
/// a terminal command).
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// [`safe`] for JSON text: the characters JSON itself does not escape
/// (DEL, C1, bidirectional overrides) as `\u00XX` escapes, which read back
/// as the same string.
pub(crate) fn safe_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(unsafe_char) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            c if unsafe_char(c) && c != '\r' && (c as u32) >= 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn unsafe_char(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// Prints a report (a command's result) on stdout through [`safe`].
pub(crate) fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(safe(text).as_bytes());
}

/// Prints one line of a report on stdout through [`safe`].
pub(crate) fn out_line(text: &str) {
    out(&format!("{text}\n"));
}

/// Prints a JSON report on stdout, a newline after it, through [`safe_json`].
pub(crate) fn out_json(json: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(safe_json(json).as_bytes());
    let _ = stdout.write_all(b"\n");
}

/// `println!` for a command's report: the line goes through [`safe`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::shared::report::out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Text for the terminal built piece by piece: every piece goes through
/// [`safe`], and only then gets its colour (an SGR code of ours), so text
/// from outside never carries an escape of its own.
#[derive(Debug, Default)]
pub(crate) struct Styled(String);

impl Styled {
    /// Appends `text`, escaped, coloured with `sgr` (`"1;31"`) when given.
    pub(crate) fn push(&mut self, text: &str, sgr: Option<&str>) {
        match sgr {
            Some(code) if !text.is_empty() => self
                .0
                .push_str(&format!("\x1b[{code}m{}\x1b[0m", safe(text))),
            _ => self.0.push_str(&safe(text)),
        }
    }

    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Prints [`Styled`] text on stdout as it is (it was escaped piece by piece).
pub(crate) fn out_styled(text: &Styled) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.0.as_bytes());
}

/// A size as people read it, the one spelling every message uses: `512 B`,
/// `12.3 KiB`, `4.0 MiB`, `1.2 GiB`.
pub(crate) fn human_size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1048576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        1048576..1073741824 => format!("{:.1} MiB", bytes as f64 / 1048576.0),
        _ => format!("{:.1} GiB", bytes as f64 / 1073741824.0),
    }
}

#[cfg(test)]
mod tests {
    use super::{human_size, safe, safe_json};

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(safe("plain/path.c\n\tnext"), "plain/path.c\n\tnext");
        assert_eq!(
            safe("a\x1b]0;title\x07b\x1b[2J\rc\u{9b}d\u{202e}e\x7f"),
            "a\\x1b]0;title\\x07b\\x1b[2J\\x0dc\\u{9b}d\\u{202e}e\\x7f"
        );
        let json = serde_json::to_string(&"x\x1b[2J\u{9b}1m\u{202e}").unwrap();
        let shown = safe_json(&json);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        let back: String = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, "x\x1b[2J\u{9b}1m\u{202e}");
    }

    #[test]
    fn sizes_are_spelled_in_binary_units_with_one_decimal() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1.0 KiB");
        assert_eq!(human_size(3 * 1024 + 512), "3.5 KiB");
        assert_eq!(human_size((1 << 20) - 1), "1024.0 KiB");
        assert_eq!(human_size(12 << 20), "12.0 MiB");
        assert_eq!(human_size(3 << 30), "3.0 GiB");
    }
}
