//! The verdict on one known fault for one machine: affected, not affected,
//! mitigated, fixed or cannot tell, with why and the next command. Pure:
//! reads nothing but the [`Fault`] and the [`Machine`] it is given.

use std::ops::ControlFlow;

use serde::Serialize;

use super::expert_sched::{self, Settled};
use super::machine::Machine;
use super::module::{ModuleFile, TrapHandler};
use super::steps::{self, NextStep, LIBRARY_PATH};
use crate::input::kernel::KernelVersion;
use crate::input::knowledge::{Fault, Library, Severity, Version, VersionRange};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Status {
    Affected,
    NotAffected,
    Mitigated,
    Fixed,
    CannotTell,
}

impl Status {
    /// The text report's label; an affected `info` finding reads `info`.
    pub(crate) fn label(self, severity: Severity) -> &'static str {
        if self == Status::Affected && severity == Severity::Info {
            return "info";
        }
        match self {
            Status::Affected => "AFFECTED",
            Status::NotAffected => "not affected",
            Status::Mitigated => "mitigated",
            Status::Fixed => "fixed",
            Status::CannotTell => "cannot tell",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Verdict {
    pub(crate) status: Status,
    pub(crate) why: String,
    /// What to run or do next, one step a line; empty when nothing is needed.
    /// In JSON each is its line of the report, rendered by
    /// [`super::Report::to_json`] with the program the user ran.
    #[serde(skip)]
    pub(crate) next: Vec<NextStep>,
}

fn verdict(status: Status, why: impl Into<String>, next: Vec<NextStep>) -> Verdict {
    Verdict {
        status,
        why: why.into(),
        next,
    }
}

/// Judges `fault` on `m`.
pub(crate) fn assess(fault: &Fault, m: &Machine) -> Verdict {
    let hit = match gpus_hit(fault, m) {
        ControlFlow::Continue(hit) => hit,
        ControlFlow::Break(verdict) => return verdict,
    };
    let mut why = vec![hit.join(", ")];
    if fault.needs == Some(Library::Miopen) && m.miopen.is_none() {
        return verdict(
            Status::CannotTell,
            format!(
                "{}, but no MIOpen under /opt/rocm/lib; a PyTorch wheel brings its own MIOpen, and then the fault applies",
                why[0]
            ),
            vec![NextStep::Workaround {
                text: fault.workaround.clone(),
            }],
        );
    }
    if let Some(early) = libraries(fault, m, &mut why) {
        return early;
    }
    if let Some(early) = kernel(fault, m, &mut why) {
        return with_gated_note(fault, m, early);
    }
    if let Some(early) = kernel_libraries(fault, m, &mut why) {
        return early;
    }
    let mut lead = Vec::new();
    if let Some(early) = ours_or_variables(fault, m, &mut why, &mut lead) {
        return early;
    }
    if let (Some(trigger), Some(rocm)) = (&fault.trigger_rocm, &m.rocm_version) {
        match Version::parse_prefix(rocm) {
            Some(v) if trigger.matches(&v) => {
                why.push(format!("ROCm {rocm} triggers it ({trigger})"))
            }
            _ => why.push(format!(
                "ROCm {rocm} in /opt/rocm does not trigger it, but a program bringing its own ROCm {trigger} (a PyTorch wheel) does"
            )),
        }
    }
    let rewrites = match fault.trigger_expert_sched {
        true => expert_sched::rewrite_steps(m),
        false => Vec::new(),
    };
    let next = steps::affected(fault, m, lead, rewrites);
    with_gated_note(fault, m, verdict(Status::Affected, why.join("; "), next))
}

/// A fault judged by the KFD ABI says what the hipBLASLt that gate expert
/// scheduling on it do here.
fn with_gated_note(fault: &Fault, m: &Machine, mut v: Verdict) -> Verdict {
    if fault.kfd_fixed.is_some() {
        if let Some(note) = expert_sched::gated_note(m) {
            v.why = format!("{}; {note}", v.why);
        }
    }
    v
}

/// The GPUs of `m` that `fault` is on; a verdict when there are none (or
/// none could be read).
fn gpus_hit<'m>(fault: &Fault, m: &'m Machine) -> ControlFlow<Verdict, Vec<&'m str>> {
    let gpus = match &m.gpus {
        None => {
            return ControlFlow::Break(verdict(
                Status::CannotTell,
                "no AMD GPU found: could not read the KFD topology (see \"could not read\")",
                Vec::new(),
            ))
        }
        Some(gpus) if gpus.is_empty() => {
            return ControlFlow::Break(verdict(
                Status::NotAffected,
                "no AMD GPU in the KFD topology",
                Vec::new(),
            ))
        }
        Some(gpus) => gpus,
    };
    let hit: Vec<&str> = gpus
        .iter()
        .filter(|g| fault.affects_gfx(&g.gfx))
        .map(|g| g.gfx.as_str())
        .collect();
    if hit.is_empty() {
        let have: Vec<&str> = gpus.iter().map(|g| g.gfx.as_str()).collect();
        return ControlFlow::Break(verdict(
            Status::NotAffected,
            format!(
                "{} is not affected: the fault is on {}",
                have.join(", "),
                fault.gfx.join(", ")
            ),
            Vec::new(),
        ));
    }
    ControlFlow::Continue(hit)
}

/// The expert-scheduling side in the kernel libraries: rocBLAS or
/// hipSPARSELt switching it on keeps the fault affected whatever the
/// hipBLASLt found say; else the hipBLASLt found may settle it.
fn kernel_libraries(fault: &Fault, m: &Machine, why: &mut Vec<String>) -> Option<Verdict> {
    if !fault.trigger_expert_sched {
        return None;
    }
    let other_on = m
        .tensile_libraries
        .iter()
        .find(|l| matches!(l.judgement, crate::gpu::codeobj::Judgement::On { .. }));
    if let Some(l) = other_on {
        why.push(format!(
            "{} ({}) switches expert scheduling on: {}",
            l.path,
            l.kind,
            l.judgement.describe()
        ));
        return None;
    }
    match expert_sched::judge(m, why)? {
        Settled::NotAffected => Some(verdict(Status::NotAffected, why.join("; "), Vec::new())),
        Settled::Mitigated => {
            let next = [expert_sched::mitigated_next(m)]
                .into_iter()
                .chain(steps::fixes(fault, m))
                .collect();
            Some(verdict(Status::Mitigated, why.join("; "), next))
        }
    }
}

/// Our patched hipBLASLt in use, or the workaround variables set: either
/// settles the fault. Our hipBLASLt installed but unused leads the steps.
fn ours_or_variables(
    fault: &Fault,
    m: &Machine,
    why: &mut Vec<String>,
    lead: &mut Vec<NextStep>,
) -> Option<Verdict> {
    if let Some((prefix, in_use)) = patched_hipblaslt(fault, m) {
        if in_use {
            why.push(format!(
                "this environment uses our patched hipBLASLt at {prefix} (LD_LIBRARY_PATH)"
            ));
            let status = if fault.kernel.is_some() {
                Status::Mitigated
            } else {
                Status::Fixed
            };
            let next = vec![NextStep::KeepLibraryPath {
                prefix: prefix.to_owned(),
            }];
            return Some(verdict(status, why.join("; "), next));
        }
        why.push(format!(
            "our patched hipBLASLt is installed at {prefix} but not on LD_LIBRARY_PATH"
        ));
        lead.push(NextStep::ExportLibraryPath {
            prefix: prefix.to_owned(),
        });
    }
    let env = &fault.mitigation.env;
    if env.is_empty() || !env.iter().all(|(k, v)| m.env.get(k) == Some(v)) {
        return None;
    }
    let names: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    why.push(format!("{} set in this environment", names.join(" ")));
    Some(verdict(
        Status::Mitigated,
        why.join("; "),
        vec![NextStep::KeepVariables],
    ))
}

/// Our patched hipBLASLt that fixes `fault` for this ROCm, if installed,
/// and whether this environment's LD_LIBRARY_PATH uses it.
fn patched_hipblaslt<'m>(fault: &Fault, m: &'m Machine) -> Option<(&'m str, bool)> {
    let prefix = m.patched_hipblaslt.iter().find(|prefix| {
        let version = prefix
            .rsplit_once("hipblaslt-")
            .and_then(|(_, v)| Version::parse_prefix(v));
        fault.fixes.iter().any(|fix| {
            fix.build.is_library()
                && match (&fix.rocm, &version) {
                    (Some(range), Some(v)) => range.matches(v),
                    _ => false,
                }
        })
    })?;
    let lib = format!("{prefix}/lib");
    let in_use = m
        .env
        .get(LIBRARY_PATH)
        .is_some_and(|p| p.split(':').any(|d| d.trim_end_matches('/') == lib));
    Some((prefix, in_use))
}

/// The ROCm / hipBLASLt gate of library faults; `Some` ends the judgement.
fn libraries(fault: &Fault, m: &Machine, why: &mut Vec<String>) -> Option<Verdict> {
    if let Some(range) = &fault.comgr {
        return comgr(range, m, why);
    }
    if fault.rocm.is_none() && fault.hipblaslt.is_none() {
        return None;
    }
    if let Some(settled) = super::per_library::judge(fault, m, why) {
        return by_library(settled, fault, m, why);
    }
    let hipblaslt = m.hipblaslt_version.as_deref();
    let hb = hipblaslt.and_then(Version::parse_prefix);
    if let (Some(fixed), Some(v)) = (&fault.hipblaslt_fixed, &hb) {
        if fixed.matches(v) {
            why.push(format!("hipBLASLt {v} carries the fix ({fixed})"));
            return Some(verdict(Status::Fixed, why.join("; "), Vec::new()));
        }
    }
    if let Some(range) = &fault.rocm {
        let Some(rocm) = m.rocm_version.as_deref() else {
            why.push("could not read the ROCm version of /opt/rocm; a program bringing its own ROCm (a PyTorch wheel) is affected when that ROCm is ".to_owned() + range.as_str());
            return Some(verdict(
                Status::CannotTell,
                why.join("; "),
                steps::fixes_then_workaround(fault, m),
            ));
        };
        match Version::parse_prefix(rocm) {
            Some(v) if range.matches(&v) => why.push(format!("ROCm {rocm} ({range})")),
            Some(_) => {
                why.push(format!("ROCm {rocm} is outside the affected range {range}"));
                return Some(verdict(Status::NotAffected, why.join("; "), Vec::new()));
            }
            None => {
                why.push(format!("the ROCm version `{rocm}` is not a version"));
                return Some(verdict(Status::CannotTell, why.join("; "), Vec::new()));
            }
        }
    }
    if let Some(range) = &fault.hipblaslt {
        match &hb {
            Some(v) if range.matches(v) => why.push(format!("hipBLASLt {v} ({range})")),
            Some(v) => {
                why.push(format!(
                    "hipBLASLt {v} is outside the affected range {range}"
                ));
                return Some(verdict(Status::NotAffected, why.join("; "), Vec::new()));
            }
            None if fault.rocm.is_none() => {
                why.push("could not read the hipBLASLt version".to_owned());
                return Some(verdict(Status::CannotTell, why.join("; "), Vec::new()));
            }
            None if fault.needs == Some(Library::Hipblaslt) => why.push(
                "could not read the hipBLASLt version: judged by the ROCm version".to_owned(),
            ),
            None => {}
        }
    }
    None
}

/// What the hipBLASLt found, each judged by its own version, make of a
/// library-side fault; `None` (affected so far) lets the mitigations and
/// next steps follow.
fn by_library(
    settled: super::per_library::Settled,
    fault: &Fault,
    m: &Machine,
    why: &mut [String],
) -> Option<Verdict> {
    use super::per_library::Settled;
    match settled {
        Settled::Affected => None,
        Settled::Fixed => Some(verdict(Status::Fixed, why.join("; "), Vec::new())),
        Settled::NotAffected => Some(verdict(Status::NotAffected, why.join("; "), Vec::new())),
        Settled::CannotTell => Some(verdict(
            Status::CannotTell,
            why.join("; "),
            steps::fixes_then_workaround(fault, m),
        )),
    }
}

/// The comgr gate: only a distribution's build in `range` is affected.
fn comgr(range: &VersionRange, m: &Machine, why: &mut Vec<String>) -> Option<Verdict> {
    let Some(c) = &m.comgr else {
        why.push("no comgr found (dpkg status, rpm, /opt/rocm/lib)".to_owned());
        return Some(verdict(Status::NotAffected, why.join("; "), Vec::new()));
    };
    if !c.debian {
        why.push(format!(
            "comgr {} {} ({}) is not a Debian/Ubuntu build: the broken cache key is in Debian's patch",
            c.package, c.version, c.from
        ));
        return Some(verdict(Status::NotAffected, why.join("; "), Vec::new()));
    }
    match Version::parse_prefix(&c.version) {
        Some(v) if range.matches(&v) => {
            why.push(format!(
                "{} {} ({range}, from {})",
                c.package, c.version, c.from
            ));
            None
        }
        Some(_) => {
            why.push(format!(
                "{} {} is outside the affected range {range}",
                c.package, c.version
            ));
            Some(verdict(Status::NotAffected, why.join("; "), Vec::new()))
        }
        None => {
            why.push(format!(
                "the comgr version `{}` is not a version",
                c.version
            ));
            Some(verdict(Status::CannotTell, why.join("; "), Vec::new()))
        }
    }
}

/// The kernel gate of kernel faults; `Some` ends the judgement.
fn kernel(fault: &Fault, m: &Machine, why: &mut Vec<String>) -> Option<Verdict> {
    // only kernel faults have a kernel gate
    fault.kernel.as_ref()?;
    if let (Some(fixed), Some((major, minor))) = (&fault.kfd_fixed, m.kfd_abi) {
        let abi = Version(vec![major, minor]);
        if fixed.matches(&abi) {
            why.push(format!(
                "KFD ABI {major}.{minor} read from /dev/kfd ({fixed})"
            ));
            return Some(verdict(Status::Fixed, why.join("; "), Vec::new()));
        }
        why.push(format!(
            "KFD ABI {major}.{minor} read from /dev/kfd is below {fixed}"
        ));
        return None;
    }
    let Some(release) = m.kernel_release.as_deref() else {
        why.push("could not read the kernel release".to_owned());
        return Some(verdict(Status::CannotTell, why.join("; "), Vec::new()));
    };
    let Some(kv) = KernelVersion::from_release(release) else {
        why.push(format!("the kernel release `{release}` has no version"));
        return Some(verdict(Status::CannotTell, why.join("; "), Vec::new()));
    };
    let cwsr_off = cwsr_off(m);
    let content = match by_module(fault, m, cwsr_off, why) {
        ControlFlow::Continue(content) => content,
        ControlFlow::Break(verdict) => return Some(verdict),
    };
    if let ControlFlow::Break(verdict) = by_range(fault, m, release, kv, &content, why) {
        return Some(verdict);
    }
    if let Some(verdict) = by_loaded_module(fault, m, release, &content, why) {
        return Some(verdict);
    }
    if fault.mitigation.cwsr_off {
        if let Some(how) = cwsr_off {
            why.push(format!("compute wave save/restore is off ({how})"));
            let mut next = vec![NextStep::ForTheFixItself];
            next.extend(steps::fixes(fault, m));
            return Some(verdict(Status::Mitigated, why.join("; "), next));
        }
    }
    None
}

/// The module's own trap handler, when the fault is judged by it: what it
/// carries wins over what the version range says. A verdict, or what the
/// module shows unfixed.
fn by_module(
    fault: &Fault,
    m: &Machine,
    cwsr_off: Option<&str>,
    why: &mut Vec<String>,
) -> ControlFlow<Verdict, Option<String>> {
    let judged_by_module = fault.kernel.as_ref().is_some_and(|f| f.trap_handler);
    let Some(file) = m.amdgpu_file.as_ref().filter(|_| judged_by_module) else {
        return ControlFlow::Continue(None);
    };
    let mut content = None;
    match module_content(file, m) {
        Ok(TrapHandler::Fixed) => {
            why.push(file.why.clone());
            return ControlFlow::Break(verdict(
                Status::Fixed,
                why.join("; "),
                fixed_next(fault, cwsr_off),
            ));
        }
        Ok(TrapHandler::NoGfx12) => {
            why.push(format!("{}; use a kernel 6.12.64 or later", file.why));
            return ControlFlow::Break(verdict(Status::NotAffected, why.join("; "), Vec::new()));
        }
        Ok(TrapHandler::Unfixed) => content = Some(file.why.clone()),
        Ok(TrapHandler::CannotTell) => {}
        Err(reason) => why.push(format!(
            "cannot tell from the module ({reason}): judged by the kernel version"
        )),
    }
    ControlFlow::Continue(content)
}

/// The kernel version against the fault's ranges, unless the module showed
/// it unfixed (`content`).
fn by_range(
    fault: &Fault,
    m: &Machine,
    release: &str,
    kv: KernelVersion,
    content: &Option<String>,
    why: &mut Vec<String>,
) -> ControlFlow<Verdict> {
    let Some(facts) = fault.kernel.as_ref() else {
        return ControlFlow::Continue(());
    };
    if let Some(unfixed) = content {
        why.push(format!("kernel {release}: {unfixed}"));
    } else if facts.unsupported.as_ref().is_some_and(|r| r.matches(kv)) {
        why.push(format!(
            "kernel {release}: {}",
            facts.unsupported_why.as_deref().unwrap_or("not supported")
        ));
        return ControlFlow::Break(verdict(Status::NotAffected, why.join("; "), Vec::new()));
    } else if facts.fixed.as_ref().is_some_and(|r| r.matches(kv)) {
        let range = facts.fixed.as_ref().map_or("", |r| r.as_str());
        why.push(format!("kernel {release} carries the fix ({range})"));
        let next = fixed_next(fault, cwsr_off(m));
        return ControlFlow::Break(verdict(Status::Fixed, why.join("; "), next));
    } else if !facts.affected.matches(kv) {
        why.push(format!(
            "kernel {release} is outside the affected range {}",
            facts.affected.as_str()
        ));
        return ControlFlow::Break(verdict(Status::NotAffected, why.join("; "), Vec::new()));
    } else {
        let judged = if m.kfd_abi.is_none() && fault.kfd_fixed.is_some() {
            " (KFD ABI judged from the kernel version)"
        } else {
            ""
        };
        why.push(format!(
            "kernel {release} is in the affected range {}{judged}",
            facts.affected.as_str()
        ));
    }
    ControlFlow::Continue(())
}

/// The loaded amdgpu: our DKMS package with the fix, ours without it, or an
/// out-of-tree driver doctor cannot judge; then our packages built but not
/// loaded.
fn by_loaded_module(
    fault: &Fault,
    m: &Machine,
    release: &str,
    content: &Option<String>,
    why: &mut Vec<String>,
) -> Option<Verdict> {
    if let Some(p) = m.dkms.iter().find(|p| p.loaded) {
        if fault.fixed_by_packages.contains(&p.name) && content.is_none() {
            why.push(format!(
                "but the loaded amdgpu is our DKMS package {} {}, which carries the fix",
                p.name, p.version
            ));
            return Some(verdict(Status::Fixed, why.join("; "), Vec::new()));
        }
        why.push(format!(
            "the loaded amdgpu is our DKMS package {} {}, built from the same source as the kernel",
            p.name, p.version
        ));
    } else if let Some(version) = m.amdgpu.as_ref().and_then(|a| a.version.as_deref()) {
        why.push(format!(
            "but the loaded amdgpu reports version {version}, which is none of our DKMS packages: an out-of-tree driver (AMD's amdgpu-dkms?) that doctor cannot judge"
        ));
        return Some(verdict(
            Status::CannotTell,
            why.join("; "),
            steps::fixes_then_workaround(fault, m),
        ));
    }
    for p in m
        .dkms
        .iter()
        .filter(|p| !p.loaded && p.ours && fault.fixed_by_packages.contains(&p.name))
    {
        let built = if p.built_for.iter().any(|k| k == release) {
            "is built for this kernel"
        } else {
            "is not built for this kernel"
        };
        why.push(format!(
            "our DKMS package {} {} {built} but not loaded: reboot, or see `dkms status`",
            p.name, p.version
        ));
    }
    None
}

/// Next steps once fixed: drop the stop-gap when it is still set.
fn fixed_next(fault: &Fault, cwsr_off: Option<&str>) -> Vec<NextStep> {
    match cwsr_off {
        Some(_) if fault.mitigation.cwsr_off => vec![NextStep::DropCwsrOff],
        _ => Vec::new(),
    }
}

/// What the module file says, when it tells and it is the module that is
/// loaded (or none is): `Err` is why it cannot be used.
fn module_content(file: &ModuleFile, m: &Machine) -> Result<TrapHandler, String> {
    if file.trap_handler == TrapHandler::CannotTell {
        return Err(file.why.clone());
    }
    let loaded = m.amdgpu.as_ref().and_then(|a| a.srcversion.as_deref());
    match (loaded, file.srcversion.as_deref()) {
        (Some(loaded), Some(on_disk)) if loaded != on_disk => Err(format!(
            "the loaded amdgpu (srcversion {loaded}) is not {} (srcversion {on_disk}): reboot to load it",
            file.path
        )),
        _ => Ok(file.trap_handler),
    }
}

/// How CWSR is known to be off, if it is.
fn cwsr_off(m: &Machine) -> Option<&'static str> {
    match m.cwsr_enable {
        Some(0) => Some("amdgpu cwsr_enable is 0"),
        Some(_) => None,
        None => m
            .cmdline
            .as_deref()
            .is_some_and(|c| c.split_whitespace().any(|w| w == "amdgpu.cwsr_enable=0"))
            .then_some("amdgpu.cwsr_enable=0 on the kernel command line"),
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
