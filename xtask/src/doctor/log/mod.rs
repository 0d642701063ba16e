//! The crash the user had: GPU faults read from logs (`doctor --log FILE`,
//! else this boot's kernel log), each with its time, process, address and
//! UTCL2 client, and the known fault it points to ([`judge`]), or "unknown:
//! report it" with what to attach. Logs are untrusted text, read bounded
//! ([`lines`]); where they come from is [`source`].

mod client;
mod judge;
mod lines;
mod parse;
mod source;
mod source_journal;
mod text;

use serde::Serialize;

pub(crate) use judge::{judge, verdict_without_log, LogReport};
pub(crate) use source::{read, Settings};

/// What kind of line told the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum EventKind {
    /// amdgpu's `[gfxhub] page fault` block in the kernel log.
    PageFault,
    /// ROCr's `Memory access fault by GPU node-N` in the job's output.
    MemoryAccessFault,
}

/// One GPU fault seen in a log; fields the log did not give are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Event {
    /// The log it is in: a file, `journalctl -k -b`, `/dev/kmsg`.
    pub(crate) source: String,
    /// Its line in what was read of that log (1-based).
    pub(crate) line: u64,
    pub(crate) kind: EventKind,
    /// As the log writes it (`169.822093`, `Jan 09 18:55:45`).
    pub(crate) time: Option<String>,
    /// `gfxhub` or `mmhub`.
    pub(crate) hub: Option<String>,
    pub(crate) process: Option<String>,
    pub(crate) pid: Option<u32>,
    pub(crate) pasid: Option<u32>,
    pub(crate) address: Option<String>,
    /// The UTCL2 client that faulted (`TCP`, `SDMA0`, `CPF`).
    pub(crate) client: Option<String>,
    /// The KFD node of `Memory access fault by GPU node-N`.
    pub(crate) node: Option<u32>,
    /// ROCr's reason (`Page not present or supervisor privilege`).
    pub(crate) reason: Option<String>,
    /// Kernels of known faults the same log launched just before it
    /// (a HIP log), newest last.
    pub(crate) kernels: Vec<String>,
    /// How many more times it came right after (same process and client).
    pub(crate) repeats: u64,
}

impl Event {
    /// One more report of the same fault: a crash prints a block per
    /// faulting page.
    fn same_fault(&self, other: &Event) -> bool {
        self.source == other.source
            && self.kind == other.kind
            && self.hub == other.hub
            && self.process == other.process
            && self.pid == other.pid
            && self.pasid == other.pasid
            && self.client == other.client
            && self.node == other.node
            && self.reason == other.reason
            && self.kernels == other.kernels
    }
}

/// One log read: what, how much, and what was cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LogRead {
    pub(crate) source: String,
    pub(crate) bytes: u64,
    pub(crate) lines: u64,
    /// What of it was not read, and why (a window, a time limit).
    pub(crate) cut: Option<String>,
}

/// Every log read and the faults in them, for [`judge`].
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) read: Vec<LogRead>,
    /// Why no log was read, when none was and that is no error (no kernel
    /// log below `--root`).
    pub(crate) note: Option<String>,
    events: parse::Events,
}
