//! `doctor`: reads the machine ([`probe`]), judges every known fault of the
//! knowledge file on it ([`verdict`]) and says, for each, affected or not,
//! why, and the next command. Reads only; changes nothing on the system.

pub mod comgr;
mod dkms;
mod expert_sched;
pub mod fsread;
pub mod hipblaslt;
pub mod knob_verdicts;
pub mod knobs;
pub mod machine;
pub mod module;
pub mod pid;
pub mod probe;
pub mod secure_boot;
pub mod steps;
pub mod tensile;
pub mod verdict;

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::knowledge::{Knowledge, Severity};
pub use machine::Machine;
pub use probe::Probe;
pub use steps::Step;
pub use verdict::{assess, Status, Verdict};

/// The machine and a verdict per known fault.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub faults: Vec<FaultReport>,
    /// Every knob set on the machine, judged.
    pub knobs: Vec<knob_verdicts::KnobReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FaultReport {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    pub summary: String,
    pub links: Vec<String>,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// Reads the machine below `root`. `ours` are the DKMS package names of
/// rocm-patchkit (recipes and the knowledge file).
pub fn probe(root: &Path, knowledge: &Knowledge, ours: &BTreeSet<String>) -> Machine {
    let env_names = env_names(knowledge);
    let mut ours = ours.clone();
    for fault in &knowledge.faults {
        ours.extend(fault.fixed_by_packages.iter().cloned());
    }
    Probe {
        root,
        ours: &ours,
        env_names: &env_names,
    }
    .read()
}

/// The environment variables whose values the fault verdicts read: every
/// fault's workaround variables and LD_LIBRARY_PATH.
pub fn env_names(knowledge: &Knowledge) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = knowledge
        .faults
        .iter()
        .flat_map(|f| f.mitigation.env.keys().cloned())
        .collect();
    names.insert(steps::LIBRARY_PATH.to_owned());
    names
}

/// Judges every fault on `machine`. `recipes` are the recipes of this
/// checkout: a next step naming one that is missing says so.
pub fn diagnose(knowledge: &Knowledge, machine: Machine, recipes: &BTreeSet<String>) -> Report {
    let faults = knowledge
        .faults
        .iter()
        .map(|fault| {
            let mut verdict = assess(fault, &machine);
            let named: BTreeSet<&str> = verdict.next.iter().filter_map(Step::recipe).collect();
            let missing: Vec<String> = fault
                .fixes
                .iter()
                .map(|f| &f.recipe)
                .chain(fault.stopgap.iter())
                .filter(|r| !recipes.contains(*r) && named.contains(r.as_str()))
                .cloned()
                .collect();
            if !missing.is_empty() {
                verdict.next.push(Step::NotInCheckout(missing));
            }
            FaultReport {
                id: fault.id.clone(),
                title: fault.title.clone(),
                severity: fault.severity,
                summary: fault.summary.clone(),
                links: fault.links.clone(),
                verdict,
            }
        })
        .collect::<Vec<_>>();
    let knobs = knob_verdicts::judge(&knowledge.knobs, &machine, &faults);
    Report {
        machine,
        faults,
        knobs,
    }
}

impl Report {
    /// Faults of severity `fault` that are affected and unmitigated.
    pub fn affected(&self) -> Vec<&FaultReport> {
        self.faults
            .iter()
            .filter(|f| f.severity == Severity::Fault && f.verdict.status == Status::Affected)
            .collect()
    }

    /// Stable JSON: keys sorted, lists in probe and file order.
    pub fn to_json(&self) -> Result<String> {
        let value = serde_json::to_value(self)?;
        Ok(serde_json::to_string_pretty(&sorted(value))?)
    }

    pub fn to_text(&self) -> String {
        let m = &self.machine;
        let mut out = format!("machine (read below {})\n", m.root.display());
        let line = |out: &mut String, key: &str, value: String| {
            out.push_str(&format!("  {key:<11}{value}\n"));
        };
        let gpus = match &m.gpus {
            None => "could not read (no AMD GPU found)".to_owned(),
            Some(g) if g.is_empty() => "none (no AMD GPU in the KFD topology)".to_owned(),
            Some(g) => g
                .iter()
                .map(|g| match g.device_id {
                    Some(id) => format!("{} (KFD node {}, device 0x{id:04x})", g.gfx, g.node),
                    None => format!("{} (KFD node {})", g.gfx, g.node),
                })
                .collect::<Vec<_>>()
                .join(", "),
        };
        line(&mut out, "GPU", gpus);
        line(&mut out, "kernel", or_unread(&m.kernel_release));
        let cmdline = m.cmdline.as_deref().map(|c| {
            match c
                .split_whitespace()
                .find(|w| w.starts_with("amdgpu.cwsr_enable="))
            {
                Some(w) => w.to_owned(),
                None => "no amdgpu.cwsr_enable".to_owned(),
            }
        });
        line(&mut out, "cmdline", or_unread(&cmdline));
        let amdgpu = match &m.amdgpu {
            None => "not loaded".to_owned(),
            Some(a) => {
                let cwsr = m.cwsr_enable.map_or("cwsr_enable unread".to_owned(), |c| {
                    format!("cwsr_enable={c}")
                });
                let version = match &a.version {
                    Some(v) => format!("module version {v}"),
                    None => "no module version (the kernel's own module)".to_owned(),
                };
                format!("loaded, {cwsr}, {version}")
            }
        };
        line(&mut out, "amdgpu", amdgpu);
        if let Some(file) = &m.amdgpu_file {
            let label = match file.trap_handler {
                module::TrapHandler::Fixed => "fixed",
                module::TrapHandler::Unfixed => "unfixed",
                module::TrapHandler::NoGfx12 => "no gfx12 trap handler",
                module::TrapHandler::CannotTell => "cannot tell",
            };
            line(&mut out, "module", format!("{} ({label})", file.path));
        }
        line(&mut out, "SecureBoot", m.secure_boot.describe());
        let kfd = m.kfd_abi.map_or(
            "not read: judged from the kernel version".to_owned(),
            |(a, b)| format!("{a}.{b} (from /dev/kfd)"),
        );
        line(&mut out, "KFD ABI", kfd);
        line(&mut out, "ROCm", or_unread(&m.rocm_version));
        let hipblaslt = match (&m.hipblaslt_version, &m.hipblaslt_from) {
            (Some(v), Some(from)) => format!("{v} ({from})"),
            _ => "could not read".to_owned(),
        };
        line(&mut out, "hipBLASLt", hipblaslt);
        for lib in &m.hipblaslt_libraries {
            let mut notes = vec![lib.kind.to_string()];
            notes.extend(lib.version.clone());
            if let Some(prefix) = &lib.ours {
                notes.push(format!("patched: loads ours from {prefix}"));
            }
            if let Some(rewritten) = &lib.rewritten {
                notes.push(format!("patched: {rewritten}"));
            }
            line(
                &mut out,
                "library",
                format!("{} ({})", lib.path, notes.join(", ")),
            );
            line(&mut out, "", format!("  kernels {}", lib.kernels));
            line(&mut out, "", format!("  {}", lib.judgement.describe()));
        }
        for lib in &m.tensile_libraries {
            let version = lib.version.as_deref().unwrap_or("no version");
            line(
                &mut out,
                "tensile",
                format!("{} ({}, {version})", lib.path, lib.kind),
            );
            line(&mut out, "", format!("  kernels {}", lib.kernels));
            line(&mut out, "", format!("  {}", lib.judgement.describe()));
        }
        for prefix in &m.patched_hipblaslt {
            line(
                &mut out,
                "patched",
                format!("{prefix} (ours, used with LD_LIBRARY_PATH={prefix}/lib)"),
            );
        }
        line(
            &mut out,
            "MIOpen",
            m.miopen.clone().unwrap_or("not found".to_owned()),
        );
        let comgr = match &m.comgr {
            Some(c) => format!("{} {} ({})", c.package, c.version, c.from),
            None => "not found".to_owned(),
        };
        line(&mut out, "comgr", comgr);
        if let Some(p) = &m.process {
            let exe = p.exe.as_deref().unwrap_or("program not readable");
            line(&mut out, "process", format!("{} ({exe})", p.pid));
            for (family, files) in &p.libraries {
                for file in files {
                    line(&mut out, "", format!("  maps {family}: {file}"));
                }
            }
            if p.libraries.is_empty() && !p.unread.iter().any(|u| u.contains("/maps:")) {
                line(
                    &mut out,
                    "",
                    "  maps no ROCm library (hipBLASLt, HIP, comgr, rocBLAS)".to_owned(),
                );
            }
            let nodes = if p.gpu_nodes.is_empty() {
                "none open".to_owned()
            } else {
                p.gpu_nodes.join(", ")
            };
            line(&mut out, "", format!("  GPU nodes {nodes}"));
            for u in &p.unread {
                line(&mut out, "", format!("  could not read {u}"));
            }
        }
        if m.dkms.is_empty() {
            line(&mut out, "DKMS", "none registered".to_owned());
        }
        for (i, p) in m.dkms.iter().enumerate() {
            let mut notes = vec![if p.ours { "ours" } else { "not ours" }.to_owned()];
            if !p.built_for.is_empty() {
                notes.push(format!("built for {}", p.built_for.join(", ")));
            }
            if let Some(by) = &p.loaded_by {
                notes.push(format!("loaded, told by {by}"));
            }
            let key = if i == 0 { "DKMS" } else { "" };
            line(
                &mut out,
                key,
                format!("{} {} ({})", p.name, p.version, notes.join(", ")),
            );
        }
        for (k, v) in &m.env {
            line(&mut out, "env", format!("{k}={v}"));
        }
        out.push_str("\nknown faults\n");
        for f in &self.faults {
            out.push_str(&format!(
                "\n{:<13} {}: {}\n",
                f.verdict.status.label(f.severity),
                f.id,
                f.title
            ));
            out.push_str(&wrapped("why", &f.verdict.why));
            for (i, step) in f.verdict.next.iter().enumerate() {
                let key = if i == 0 { "next" } else { "" };
                out.push_str(&format!("  {key:<6}{step}\n"));
            }
            if matches!(f.verdict.status, Status::Affected | Status::Mitigated) {
                out.push_str(&wrapped("what", &f.summary));
            }
            let worth_links = match f.verdict.status {
                Status::Affected | Status::Mitigated => true,
                Status::CannotTell => m.gpus.is_some(),
                Status::NotAffected | Status::Fixed => false,
            };
            if worth_links {
                for (i, link) in f.links.iter().enumerate() {
                    let key = if i == 0 { "see" } else { "" };
                    out.push_str(&format!("  {key:<6}{link}\n"));
                }
            }
        }
        if !self.knobs.is_empty() {
            out.push_str("\nknobs set (environment, /etc/modprobe.d, kernel command line, amdgpu parameters)\n");
        }
        for k in &self.knobs {
            let s = &k.setting;
            let effect = s
                .in_effect
                .as_ref()
                .filter(|v| **v != s.value)
                .map_or(String::new(), |v| format!(", {v} in effect"));
            let head = format!("{}={} ({}{effect})", s.name, s.value, s.from);
            match k.judgement {
                knob_verdicts::Judgement::NoEffect | knob_verdicts::Judgement::NoKnownEffect => {
                    out.push_str(&format!("  {head}: {}\n", k.judgement.label()));
                }
                _ => {
                    let on = k.fault.as_ref().map_or(String::new(), |f| format!(" {f}"));
                    out.push_str(&format!("  {head}: {}{on}\n", k.judgement.label()));
                    out.push_str(&wrapped("why", &k.why));
                    if let Some(cost) = &k.cost {
                        out.push_str(&wrapped("cost", cost));
                    }
                    if let Some(link) = k.links.first() {
                        out.push_str(&format!("  {:<6}{link}\n", "see"));
                    }
                }
            }
        }
        if let Some(advice) = m.secure_boot.advice() {
            out.push('\n');
            out.push_str(&wrapped("note", &advice));
        }
        if !m.unread.is_empty() {
            out.push_str("\ncould not read\n");
            for u in &m.unread {
                out.push_str(&format!("  {}: {}\n", u.path, u.why));
            }
        }
        let affected = self.affected();
        out.push('\n');
        out.push_str(&match affected.len() {
            0 => "no known fault affects this machine unmitigated\n".to_owned(),
            n => format!(
                "{n} known fault{} affect{} this machine: {} (exit status 3)\n",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" },
                affected
                    .iter()
                    .map(|f| f.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
        out
    }
}

/// `  key   text`, the text wrapped at 100 columns under itself.
fn wrapped(key: &str, text: &str) -> String {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line");
        if !line.is_empty() && line.len() + 1 + word.len() > 92 {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let key = if i == 0 { key } else { "" };
        out.push_str(&format!("  {key:<6}{line}\n"));
    }
    out
}

fn or_unread(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "could not read".to_owned())
}

/// `value` with every object's keys in sorted order.
fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}
