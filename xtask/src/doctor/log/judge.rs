//! Each GPU fault seen in a log pointed to the known faults whose
//! signature it shows (`[fault.log]`: the kernels a HIP log launched before
//! it, the UTCL2 client of the kernel log), most likely on this machine
//! first (by the fault's verdict here), or said unknown with what to attach
//! to a report. Pure: reads nothing.

use serde::Serialize;

use super::{client, Event, EventKind, LogRead, Scan};
use crate::doctor::machine::Machine;
use crate::doctor::verdict::{Status, Verdict};
use crate::doctor::FaultReport;
use crate::input::knowledge::{Fault, Knowledge};

/// The logs read and the GPU faults in them, judged.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct LogReport {
    pub(crate) read: Vec<LogRead>,
    /// Why no log was read, when that is no error.
    pub(crate) note: Option<String>,
    /// The faults seen, oldest first (the last ones when there were many).
    pub(crate) faults: Vec<Seen>,
    /// Faults seen before those listed.
    pub(crate) dropped: u64,
    /// Kernels of known faults the logs launched (HIP logs).
    pub(crate) kernels: Vec<KernelSeen>,
}

/// One fault seen, and what it points to.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Seen {
    #[serde(flatten)]
    pub(crate) event: Event,
    /// What the part named by the UTCL2 client is.
    pub(crate) client_is: Option<String>,
    /// The known faults whose signature it shows, most likely here first.
    pub(crate) points_to: Vec<Pointer>,
    /// When it points to none: what it is and what to do.
    pub(crate) unknown: Option<String>,
}

/// A known fault a log points to.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Pointer {
    pub(crate) id: String,
    /// What matched: `client TCP`, `kernel Cijk_...`.
    pub(crate) by: String,
    /// The fault's verdict on this machine.
    pub(crate) here: Status,
    /// That verdict as the text report labels it.
    #[serde(skip)]
    pub(crate) label: &'static str,
}

/// A kernel of a known fault launched in a log.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KernelSeen {
    pub(crate) source: String,
    pub(crate) kernel: String,
    pub(crate) launches: u64,
    pub(crate) faults: Vec<String>,
}

/// What to attach when a fault is unknown (AMD's triage asks for these).
pub(crate) const REPORT_IT: &str = "unknown: no known fault has this signature; report it (https://github.com/ROCm/TheRock/issues) with the job's output run with AMD_LOG_LEVEL=4, the full kernel log (sudo dmesg) of a boot with amdgpu.dyndbg=+flmpt, and the firmware versions doctor lists";

/// The job's line alone does not say which part of the GPU faulted.
const WHICH_PART: &str = "the job's side of a GPU page fault: the kernel log of the same moment names the part that faulted (its UTCL2 client); doctor reads this boot's kernel log when run without --log, or give a saved one (sudo dmesg > kernel.log, then --log kernel.log); AMD_LOG_LEVEL=3 makes the job log the kernels it launches";

/// Judges what `scan` found against the known faults and their verdicts.
pub(crate) fn judge(scan: Scan, knowledge: &Knowledge, verdicts: &[FaultReport]) -> LogReport {
    let faults = scan
        .events
        .kept
        .into_iter()
        .map(|event| seen(event, knowledge, verdicts))
        .collect();
    let mut kernels = Vec::new();
    for (source, counts) in scan.events.kernels {
        for (kernel, launches) in counts {
            let faults = knowledge
                .faults
                .iter()
                .filter(|f| f.log.kernel_match(&kernel).is_some())
                .map(|f| f.id.clone())
                .collect();
            kernels.push(KernelSeen {
                source: source.clone(),
                kernel,
                launches,
                faults,
            });
        }
    }
    LogReport {
        read: scan.read,
        note: scan.note,
        faults,
        dropped: scan.events.dropped,
        kernels,
    }
}

fn seen(event: Event, knowledge: &Knowledge, verdicts: &[FaultReport]) -> Seen {
    let mut points_to: Vec<Pointer> = Vec::new();
    let point = |points_to: &mut Vec<Pointer>, fault: &Fault, by: String| {
        if points_to.iter().any(|p| p.id == fault.id) {
            return;
        }
        let (here, label) = verdicts
            .iter()
            .find(|v| v.id == fault.id)
            .map_or((Status::CannotTell, "cannot tell here"), |v| {
                (v.verdict.status, here_label(v))
            });
        points_to.push(Pointer {
            id: fault.id.clone(),
            by,
            here,
            label,
        });
    };
    for kernel in event.kernels.iter().rev() {
        for fault in knowledge.faults.iter() {
            if fault.log.kernel_match(kernel).is_some() {
                point(&mut points_to, fault, format!("kernel {kernel}"));
            }
        }
    }
    let by_kernel = points_to.len();
    if let Some(client) = &event.client {
        for fault in knowledge.faults.iter().filter(|f| f.log.has_client(client)) {
            point(&mut points_to, fault, format!("client {client}"));
        }
    }
    points_to[by_kernel..].sort_by_key(|p| rank(p.here));
    let unknown = match (points_to.is_empty(), event.kind) {
        (false, _) => None,
        (true, EventKind::PageFault) => Some(REPORT_IT.to_owned()),
        (true, EventKind::MemoryAccessFault) => Some(WHICH_PART.to_owned()),
    };
    Seen {
        client_is: event
            .client
            .as_deref()
            .and_then(client::meaning)
            .map(str::to_owned),
        event,
        points_to,
        unknown,
    }
}

/// The verdict here, for a pointer: `AFFECTED here`, `affected here
/// (info)`, `not affected here`.
fn here_label(v: &FaultReport) -> &'static str {
    match (v.verdict.status, v.severity) {
        (Status::Affected, crate::input::knowledge::Severity::Info) => "affected here (info)",
        (Status::Affected, _) => "AFFECTED here",
        (Status::NotAffected, _) => "not affected here",
        (Status::Mitigated, _) => "mitigated here",
        (Status::Fixed, _) => "fixed here",
        (Status::CannotTell, _) => "cannot tell here",
    }
}

/// Most likely here first: affected, cannot tell, mitigated, then the
/// faults this machine does not have.
fn rank(status: Status) -> u8 {
    match status {
        Status::Affected => 0,
        Status::CannotTell => 1,
        Status::Mitigated => 2,
        Status::NotAffected => 3,
        Status::Fixed => 4,
    }
}

/// The verdict on a fault known only by its signature in logs: the GPUs
/// it is on, and that a log names it (`log_read`: whether doctor read one,
/// so the verdict asks for `--log` only when it read none).
pub(crate) fn verdict_without_log(fault: &Fault, m: &Machine, log_read: bool) -> Verdict {
    let verdict = |status, why: String| Verdict {
        status,
        why,
        next: Vec::new(),
    };
    let Some(gpus) = &m.gpus else {
        return verdict(
            Status::CannotTell,
            "no AMD GPU found: could not read the KFD topology (see \"could not read\")".to_owned(),
        );
    };
    let hit: Vec<&str> = gpus
        .iter()
        .filter(|g| fault.affects_gfx(&g.gfx))
        .map(|g| g.gfx.as_str())
        .collect();
    if hit.is_empty() {
        return verdict(
            Status::NotAffected,
            format!("no GPU here is one it is on ({})", fault.gfx.join(", ")),
        );
    }
    let mut signature: Vec<String> = fault
        .log
        .clients
        .iter()
        .map(|c| format!("client {c}"))
        .collect();
    signature.extend(
        fault
            .log
            .kernels
            .iter()
            .map(|k| format!("kernel {}", k.as_str())),
    );
    let (hit, signature) = (hit.join(", "), signature.join(", "));
    let why = match log_read {
        true => format!(
            "{hit}: nothing on the machine tells whether it has it, and no fault in the logs read is its alone (its signature: {signature}; see the GPU faults in logs)"
        ),
        false => format!(
            "{hit}: nothing on the machine tells whether it has it; doctor names it when a log shows its signature ({signature}): run doctor with --log"
        ),
    };
    verdict(Status::CannotTell, why)
}
