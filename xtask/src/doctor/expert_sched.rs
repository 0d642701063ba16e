//! The hipBLASLt side of the expert-scheduling fault: what the kernels of
//! every hipBLASLt found on the machine say, folded into the fault's verdict
//! once the kernel side is known to lack the fix. Pure, like the verdicts it feeds (it lies below them).

use super::hipblaslt::{HipblasltLibrary, LibraryKind};
use super::machine::Machine;
use super::steps::Step;
use crate::codeobj::Judgement;

/// How the hipBLASLt found settle the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    NotAffected,
    /// One of them is ours (or rewritten).
    Mitigated,
}

/// `Some(settled)` when the libraries settle the fault: every hipBLASLt found
/// keeps expert scheduling off on gfx12 (not affected, or mitigated when one
/// of them is ours). `None` keeps the fault affected; `why` says what the
/// kernels showed either way.
pub fn judge(m: &Machine, why: &mut Vec<String>) -> Option<Settled> {
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
    let listed: Vec<String> = libs
        .iter()
        .map(|l| {
            let verdict = match l.judgement {
                Judgement::NoGfx12 { .. } => "no gfx12 kernels",
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
        .collect();
    why.push(format!(
        "every hipBLASLt found keeps expert scheduling off on gfx12: {}; a program bringing another hipBLASLt is not covered (doctor --python DIR reads other environments)",
        listed.join(", ")
    ));
    Some(if ours.is_empty() {
        Settled::NotAffected
    } else {
        Settled::Mitigated
    })
}

/// What keeps a mitigation by our hipBLASLt in place.
pub fn mitigated_next(m: &Machine) -> Step {
    Step::KeepHipblaslt {
        rewritten: m.hipblaslt_libraries.iter().any(|l| l.rewritten.is_some()),
    }
}

/// The rewrite of every hipBLASLt found that switches expert scheduling on,
/// as commands: the hipBLASLt side fixed now, without a reboot.
pub fn rewrite_steps(m: &Machine) -> Vec<Step> {
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
        .map(|(i, (dir, system))| Step::Rewrite {
            dir,
            first: i == 0,
            system,
        })
        .collect()
}
