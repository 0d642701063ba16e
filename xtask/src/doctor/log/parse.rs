//! The lines of a log that tell a GPU fault, read into [`Event`]s: the
//! amdgpu page-fault block of the kernel log (`[gfxhub] page fault
//! (src_id:.. pasid:..)`, the process line, `in page starting at address`,
//! `Faulty UTCL2 client ID: TCP (0x8)`, as `gmc_v*`/`gfxhub_v*` print
//! them), ROCr's `Memory access fault by GPU node-N (Agent handle: ..) on
//! address 0x... Reason: ...` of the job's output, and the GPU kernel names
//! of a HIP log (`AMD_LOG_LEVEL=3`) that match a known fault's patterns.
//! Pure: text in, values out; every field cut to a bounded length.

use std::collections::{BTreeMap, VecDeque};

use super::{Event, EventKind};
use crate::input::knowledge::Glob;

/// Events kept per scan (the last ones); older ones are counted.
pub(crate) const MAX_EVENTS: usize = 64;
/// Kernels of known faults remembered per log.
const MAX_KERNELS: usize = 32;
/// Lines after a page-fault header that may still belong to it.
const BLOCK_LINES: u64 = 32;

/// Events of every log read, the last [`MAX_EVENTS`] kept, a run of the
/// same fault counted on the first.
#[derive(Debug, Default)]
pub(crate) struct Events {
    pub(crate) kept: VecDeque<Event>,
    pub(crate) dropped: u64,
    /// Per log, the kernels of known faults it launched, with counts.
    pub(crate) kernels: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Events {
    fn push(&mut self, event: Event) {
        if let Some(last) = self.kept.back_mut() {
            if last.same_fault(&event) {
                last.repeats += 1;
                return;
            }
        }
        if self.kept.len() == MAX_EVENTS {
            self.kept.pop_front();
            self.dropped += 1;
        }
        self.kept.push_back(event);
    }
}

/// Reads one log's lines, in order.
pub(crate) struct Parser<'a> {
    source: String,
    patterns: &'a [Glob],
    events: &'a mut Events,
    open: Option<Event>,
    /// Known-fault kernels launched most recently, newest last.
    recent: VecDeque<String>,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(source: &str, patterns: &'a [Glob], events: &'a mut Events) -> Parser<'a> {
        Parser {
            source: source.to_owned(),
            patterns,
            events,
            open: None,
            recent: VecDeque::new(),
        }
    }

    pub(crate) fn line(&mut self, number: u64, line: &str) {
        if let Some(at) = line.find("page fault (src_id:") {
            self.close();
            self.open = Some(self.page_fault(number, line, at));
            return;
        }
        if let Some(at) = line.find("Memory access fault by GPU node-") {
            self.close();
            let event = self.access_fault(number, line, at);
            self.events.push(event);
            return;
        }
        self.kernels(line);
        self.block_line(number, line);
    }

    /// Ends the log: a page fault still being read is kept as it is.
    pub(crate) fn finish(mut self) {
        self.close();
    }

    fn close(&mut self) {
        if let Some(event) = self.open.take() {
            self.events.push(event);
        }
    }

    fn event(&self, number: u64, kind: EventKind, line: &str) -> Event {
        Event {
            source: self.source.clone(),
            line: number,
            kind,
            time: time_of(line),
            hub: None,
            process: None,
            pid: None,
            pasid: None,
            address: None,
            client: None,
            node: None,
            reason: None,
            kernels: self.recent.iter().cloned().collect(),
            repeats: 0,
        }
    }

    fn page_fault(&self, number: u64, line: &str, at: usize) -> Event {
        let mut e = self.event(number, EventKind::PageFault, line);
        e.kernels.clear();
        e.hub = line[..at]
            .rfind('[')
            .and_then(|open| line[open + 1..at].split_once(']'))
            .map(|(hub, _)| cut(hub, 16));
        e.pasid = number_after(&line[at..], "pasid:");
        process(&line[at..], &mut e);
        e
    }

    fn access_fault(&self, number: u64, line: &str, at: usize) -> Event {
        let mut e = self.event(number, EventKind::MemoryAccessFault, line);
        let rest = &line[at + "Memory access fault by GPU node-".len()..];
        e.node = leading_number(rest);
        e.address = rest.split_once("on address ").map(|(_, a)| {
            let end = a
                .find(|c: char| c.is_whitespace() || c == '(' && !a.starts_with("(nil)"))
                .unwrap_or(a.len());
            cut(a[..end].trim_end_matches('.'), 32)
        });
        e.reason = rest
            .split_once("Reason: ")
            .map(|(_, r)| cut(r.trim().trim_end_matches('.'), 128));
        e
    }

    /// A line of the page-fault block being read: its process, address and
    /// client (the last line that matters, which ends the block).
    fn block_line(&mut self, number: u64, line: &str) {
        let Some(e) = self.open.as_mut() else {
            return;
        };
        if number > e.line + BLOCK_LINES {
            self.close();
            return;
        }
        if e.process.is_none() && e.pid.is_none() && line.contains(" pid ") {
            process(line, e);
        }
        if let Some((_, addr)) = line.split_once("in page starting at address ") {
            let end = addr.find(char::is_whitespace).unwrap_or(addr.len());
            e.address = Some(cut(&addr[..end], 32));
        }
        if let Some((_, client)) = line.split_once("Faulty UTCL2 client ID:") {
            let client = client.trim();
            let name = match client.rsplit_once(" (0x") {
                Some((name, _)) => name,
                None => client,
            };
            e.client = Some(cut(name.trim(), 32));
            self.close();
        }
    }

    /// Remembers the kernels of known faults this line names.
    fn kernels(&mut self, line: &str) {
        for glob in self.patterns {
            let anchor = glob.anchor();
            let mut from = 0;
            while let Some(at) = line[from..].find(anchor).map(|i| i + from) {
                let start = line[..at]
                    .rfind(|c: char| !is_name_char(c))
                    .map_or(0, |i| i + 1);
                let end = line[at..]
                    .find(|c: char| !is_name_char(c))
                    .map_or(line.len(), |i| at + i);
                from = end.max(at + anchor.len().max(1));
                let name = &line[start..end];
                if name.len() <= 512 && glob.matches(name) {
                    self.saw_kernel(name);
                }
                if from >= line.len() {
                    break;
                }
            }
        }
    }

    fn saw_kernel(&mut self, name: &str) {
        let counts = self.events.kernels.entry(self.source.clone()).or_default();
        if let Some(n) = counts.get_mut(name) {
            *n += 1;
        } else if counts.len() < MAX_KERNELS {
            counts.insert(name.to_owned(), 1);
        }
        if self.recent.back().map(String::as_str) != Some(name) {
            self.recent.retain(|k| k != name);
            self.recent.push_back(name.to_owned());
            if self.recent.len() > 4 {
                self.recent.pop_front();
            }
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.$-".contains(c)
}

/// `process NAME pid N` (or `Process ...`) in `text`; an empty name or pid
/// 0 (a kernel thread, or no process known) is left unknown.
fn process(text: &str, e: &mut Event) {
    let Some(at) = text.find("process ").or_else(|| text.find("Process ")) else {
        return;
    };
    let rest = &text[at + "process ".len()..];
    let Some((name, after)) = rest.split_once("pid ") else {
        return;
    };
    let name = name.trim();
    if !name.is_empty() {
        e.process = Some(cut(name, 64));
    }
    e.pid = leading_number(after).filter(|p| *p != 0);
}

/// The number right after `key` in `text`.
fn number_after(text: &str, key: &str) -> Option<u32> {
    text.split_once(key)
        .and_then(|(_, rest)| leading_number(rest))
}

fn leading_number(text: &str) -> Option<u32> {
    let digits: String = text
        .chars()
        .take_while(char::is_ascii_digit)
        .take(10)
        .collect();
    digits.parse().ok()
}

/// The time a kernel-log line was written, as the log shows it: dmesg's
/// `[  169.822093]` or `[Tue Jul 23 13:49:25 2024]`, the journal's `Jan 09
/// 18:55:45 host kernel:` (without the host).
fn time_of(line: &str) -> Option<String> {
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix('[') {
        let (time, _) = rest.split_once(']')?;
        let time = time.trim();
        return (!time.is_empty()).then(|| cut(time, 64));
    }
    let (prefix, _) = line.split_once(" kernel: ")?;
    let time = match prefix.trim_end().rsplit_once(' ') {
        Some((time, _host)) => time,
        None => prefix,
    };
    Some(cut(time.trim(), 64))
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
