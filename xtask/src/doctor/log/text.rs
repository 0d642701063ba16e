//! The "GPU faults in logs" section of the text report: the logs read,
//! each fault seen with its time, process, address and UTCL2 client, what
//! it points to, and the kernels of known faults launched. Renders only.

use super::judge::{LogReport, Seen};
use super::EventKind;

/// Faults the text lists at most (the last ones); `--json` has them all.
const SHOWN: usize = 20;

impl LogReport {
    /// The section, or nothing when no log was read or asked for.
    pub(crate) fn to_text(&self) -> String {
        if self.read.is_empty() && self.note.is_none() {
            return String::new();
        }
        let mut out = "\nGPU faults in logs\n".to_owned();
        if let Some(note) = &self.note {
            out.push_str(&format!("  {note}\n"));
        }
        for r in &self.read {
            let cut = r.cut.as_ref().map_or(String::new(), |c| format!("; {c}"));
            out.push_str(&format!("  read   {} ({} lines{cut})\n", r.source, r.lines));
        }
        if !self.read.is_empty() && self.faults.is_empty() {
            out.push_str("  no GPU fault in them\n");
        }
        let hidden = self.faults.len().saturating_sub(SHOWN) as u64 + self.dropped;
        if hidden > 0 {
            out.push_str(&format!(
                "  ({hidden} earlier fault{} not listed)\n",
                if hidden == 1 { "" } else { "s" }
            ));
        }
        for s in self
            .faults
            .iter()
            .skip(self.faults.len().saturating_sub(SHOWN))
        {
            seen(&mut out, s);
        }
        for k in &self.kernels {
            out.push_str(&format!(
                "  kernel {} launched {} ({} time{}): a kernel of {}\n",
                k.source,
                k.kernel,
                k.launches,
                if k.launches == 1 { "" } else { "s" },
                k.faults.join(", ")
            ));
        }
        out
    }
}

/// One fault: where and when, what faulted, and what it points to.
fn seen(out: &mut String, s: &Seen) {
    let e = &s.event;
    let time = e
        .time
        .as_ref()
        .map_or(String::new(), |t| format!(" at {t}"));
    let what = match e.kind {
        EventKind::PageFault => format!("{} page fault", e.hub.as_deref().unwrap_or("GPU")),
        EventKind::MemoryAccessFault => format!(
            "memory access fault by GPU node-{}",
            e.node.map_or("?".to_owned(), |n| n.to_string())
        ),
    };
    let mut who = Vec::new();
    if let Some(p) = &e.process {
        who.push(p.clone());
    }
    if let Some(pid) = e.pid {
        who.push(format!("pid {pid}"));
    }
    if let Some(pasid) = e.pasid {
        who.push(format!("pasid {pasid}"));
    }
    let who = if who.is_empty() {
        String::new()
    } else {
        format!(" of {}", who.join(" "))
    };
    let address = e
        .address
        .as_ref()
        .map_or(String::new(), |a| format!(" at {a}"));
    let reason = e
        .reason
        .as_ref()
        .map_or(String::new(), |r| format!(": {r}"));
    let repeats = match e.repeats {
        0 => String::new(),
        n => format!(", {n} more like it"),
    };
    out.push_str(&format!(
        "  fault  {}:{}{time}: {what}{who}{address}{reason}{repeats}\n",
        e.source, e.line
    ));
    if let Some(client) = &e.client {
        let is = s
            .client_is
            .as_ref()
            .map_or(String::new(), |m| format!(": {m}"));
        out.push_str(&format!("         client {client}{is}\n"));
    }
    for kernel in &e.kernels {
        out.push_str(&format!("         after kernel {kernel}\n"));
    }
    if !s.points_to.is_empty() {
        let to: Vec<String> = s
            .points_to
            .iter()
            .map(|p| format!("{} ({}, by {})", p.id, p.label, p.by))
            .collect();
        out.push_str(&format!("         points to {}\n", to.join("; ")));
    }
    if let Some(unknown) = &s.unknown {
        out.push_str(&format!("         {unknown}\n"));
    }
}
