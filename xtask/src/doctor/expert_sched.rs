//! The hipBLASLt side of the expert-scheduling fault: what the kernels of
//! every hipBLASLt found on the machine say, folded into the fault's verdict
//! once the kernel side is known to lack the fix. Pure, like [`super::verdict`].

use super::hipblaslt::HipblasltLibrary;
use super::probe::Machine;
use super::verdict::Status;
use crate::codeobj::Judgement;

/// `Some(status)` when the libraries settle the fault: every hipBLASLt found
/// keeps expert scheduling off on gfx12 (not affected, or mitigated when one
/// of them is ours). `None` keeps the fault affected; `why` says what the
/// kernels showed either way.
pub fn judge(m: &Machine, why: &mut Vec<String>) -> Option<Status> {
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
        .filter(|l| l.kind == "pytorch" && l.ours.is_some())
        .collect();
    let listed: Vec<String> = libs
        .iter()
        .map(|l| {
            let verdict = match l.judgement {
                Judgement::NoGfx12 { .. } => "no gfx12 kernels",
                _ => "off",
            };
            match &l.ours {
                Some(prefix) => format!("{} ({verdict}, patched: ours from {prefix})", l.path),
                None => format!("{} ({verdict})", l.path),
            }
        })
        .collect();
    why.push(format!(
        "every hipBLASLt found keeps expert scheduling off on gfx12: {}; a program bringing another hipBLASLt is not covered (doctor --python DIR reads other environments)",
        listed.join(", ")
    ));
    Some(if ours.is_empty() {
        Status::NotAffected
    } else {
        Status::Mitigated
    })
}
