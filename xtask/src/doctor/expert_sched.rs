//! The hipBLASLt side of the expert-scheduling fault: what the kernels of
//! every hipBLASLt found on the machine say, folded into the fault's verdict
//! once the kernel side is known to lack the fix. A library whose switch is
//! gated on the kernel argument the host sets from the KFD's support
//! (rocm-libraries PR #6261) is no trigger: it switches expert scheduling
//! on only with KFD ABI 1.20, which carries the trap-handler fix. Pure,
//! like the verdicts it feeds (it lies below them).

use super::hipblaslt::{HipblasltLibrary, LibraryKind};
use super::machine::Machine;
use super::steps::NextStep;
use crate::gpu::codeobj::Judgement;

/// How the hipBLASLt found settle the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    NotAffected,
    /// One of them is ours (or rewritten).
    Mitigated,
}

/// `Some(settled)` when the libraries settle the fault: every hipBLASLt found
/// keeps expert scheduling off on gfx12 (not affected, or mitigated when one
/// of them is ours). `None` keeps the fault affected; `why` says what the
/// kernels showed either way.
pub(crate) fn judge(m: &Machine, why: &mut Vec<String>) -> Option<Settled> {
    let libs = &m.hipblaslt_libraries;
    if libs.is_empty() {
        why.push(
            "no hipBLASLt found in /opt/rocm*, /usr/lib or a PyTorch wheel of the Python environments doctor sees (name others with --python DIR); a program that brings one with expert scheduling on triggers it"
                .to_owned(),
        );
        return None;
    }
    let on: Vec<&HipblasltLibrary> = libs
        .iter()
        .filter(|l| matches!(l.judgement, Judgement::On { .. }))
        .collect();
    if let Some(first) = on.first() {
        let others = match on.len() {
            1 => String::new(),
            n => format!(" (and {} more hipBLASLt: see the machine section)", n - 1),
        };
        why.push(format!(
            "{} switches expert scheduling on: {}{others}",
            first.path,
            first.judgement.describe()
        ));
        return None;
    }
    let unknown: Vec<&HipblasltLibrary> = libs
        .iter()
        .filter(|l| matches!(l.judgement, Judgement::CannotTell { .. }))
        .collect();
    if let Some(first) = unknown.first() {
        why.push(format!(
            "no hipBLASLt found switches expert scheduling on, but {} cannot be judged ({}): judged as if it did",
            first.path,
            first.judgement.describe()
        ));
        return None;
    }
    let ours: Vec<&HipblasltLibrary> = libs
        .iter()
        .filter(|l| (l.kind == LibraryKind::Pytorch && l.ours.is_some()) || l.rewritten.is_some())
        .collect();
    let gated = libs
        .iter()
        .any(|l| matches!(l.judgement, Judgement::Gated { .. }));
    let listed = listed(m, libs);
    let keeps = if gated {
        "switches expert scheduling on only where the trap handler saves it (gated on KFD ABI 1.20) or keeps it off on gfx12"
    } else {
        "keeps expert scheduling off on gfx12"
    };
    why.push(format!(
        "every hipBLASLt found {keeps}: {}; a program bringing another hipBLASLt is not covered (doctor --python DIR reads other environments)",
        listed.join(", ")
    ));
    Some(if ours.is_empty() {
        Settled::NotAffected
    } else {
        Settled::Mitigated
    })
}

/// Each library found with what its kernels do (off, no gfx12 kernels,
/// gated) and whether it is patched.
fn listed(m: &Machine, libs: &[HipblasltLibrary]) -> Vec<String> {
    libs.iter()
        .map(|l| {
            let gated_here;
            let verdict = match l.judgement {
                Judgement::NoGfx12 { .. } => "no gfx12 kernels",
                Judgement::Gated { .. } => {
                    gated_here = format!("gated on KFD ABI 1.20: {}", fast_path(m));
                    gated_here.as_str()
                }
                _ => "off",
            };
            match (&l.ours, &l.rewritten) {
                (Some(prefix), _) => format!("{} ({verdict}, patched: ours from {prefix})", l.path),
                (None, Some(_)) => format!(
                    "{} ({verdict}, patched: expert scheduling rewritten off)",
                    l.path
                ),
                (None, None) => format!("{} ({verdict})", l.path),
            }
        })
        .collect()
}

/// What a gated library does on this machine: the fast path on with KFD
/// ABI 1.20 (read from /dev/kfd, else judged from the kernel version:
/// Linux 7.0 brought it), off below it.
pub(crate) fn fast_path(m: &Machine) -> String {
    match (m.kfd_abi, kernel_major_minor(m)) {
        (Some((major, minor)), _) if (major, minor) >= (1, 20) => {
            format!("expert scheduling on here (KFD ABI {major}.{minor} read from /dev/kfd): the fast path")
        }
        (Some((major, minor)), _) => format!(
            "off here (KFD ABI {major}.{minor} read from /dev/kfd is below 1.20)"
        ),
        (None, Some(v)) if v >= (7, 0) => {
            "expert scheduling on here (Linux 7.0 or later reports KFD ABI 1.20; run doctor as root on / to read it): the fast path".to_owned()
        }
        (None, Some(_)) => {
            "off on this kernel (KFD ABI 1.20 comes with Linux 7.0)".to_owned()
        }
        (None, None) => "on only with KFD ABI 1.20 (Linux 7.0 or later)".to_owned(),
    }
}

fn kernel_major_minor(m: &Machine) -> Option<(u32, u32)> {
    let v = crate::input::kernel::KernelVersion::from_release(m.kernel_release.as_deref()?)?;
    Some((v.0, v.1))
}

/// The hipBLASLt found that gate expert scheduling on KFD ABI 1.20, said
/// for the faults judged by the KFD ABI (`kfd-abi-expert-sched`): whether
/// their fast path is on here.
pub(crate) fn gated_note(m: &Machine) -> Option<String> {
    let gated: Vec<&str> = m
        .hipblaslt_libraries
        .iter()
        .filter(|l| matches!(l.judgement, Judgement::Gated { .. }))
        .map(|l| l.path.as_str())
        .collect();
    let first = gated.first()?;
    let more = match gated.len() {
        1 => " gates".to_owned(),
        n => format!(" and {} more gate", n - 1),
    };
    Some(format!(
        "{first}{more} expert scheduling on KFD ABI 1.20: {}",
        fast_path(m)
    ))
}

/// What keeps a mitigation by our hipBLASLt in place.
pub(crate) fn mitigated_next(m: &Machine) -> NextStep {
    NextStep::KeepHipblaslt {
        rewritten: m.hipblaslt_libraries.iter().any(|l| l.rewritten.is_some()),
    }
}

/// The rewrite of every hipBLASLt found that switches expert scheduling on,
/// as commands: the hipBLASLt side fixed now, without a reboot.
pub(crate) fn rewrite_steps(m: &Machine) -> Vec<NextStep> {
    let mut dirs: Vec<(String, bool)> = Vec::new();
    for lib in &m.hipblaslt_libraries {
        if !matches!(lib.judgement, Judgement::On { .. }) {
            continue;
        }
        let dir = std::path::Path::new(&lib.path)
            .parent()
            .map_or(lib.path.clone(), |d| d.display().to_string());
        let system = lib.kind.is_system();
        if !dirs.iter().any(|(d, _)| *d == dir) {
            dirs.push((dir, system));
        }
    }
    dirs.into_iter()
        .enumerate()
        .map(|(i, (dir, system))| NextStep::Rewrite {
            dir,
            first: i == 0,
            system,
        })
        .collect()
}
