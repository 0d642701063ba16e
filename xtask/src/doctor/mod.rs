//! `doctor`: reads the machine ([`probe`]), judges every known fault of the
//! knowledge file on it ([`verdict`]) and says, for each, affected or not,
//! why, and the next command. Reads only; changes nothing on the system.

pub(crate) mod access;
mod advice;
pub(crate) mod bug_report;
pub(crate) mod comgr;
mod dkms;
mod expert_sched;
pub(crate) mod firmware;
pub(crate) mod fsread;
pub(crate) mod hipblaslt;
pub(crate) mod knob_verdicts;
pub(crate) mod knobs;
pub(crate) mod layouts;
mod library_version;
pub(crate) mod log;
pub(crate) mod machine;
pub(crate) mod maps;
pub mod module;
mod module_scan;
pub(crate) mod os_release;
pub(crate) mod page;
mod per_library;
pub(crate) mod pid;
pub(crate) mod probe;
pub(crate) mod secure_boot;
pub(crate) mod steps;
pub(crate) mod tensile;
mod text;
mod text_machine;
pub(crate) mod verdict;

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::input::invocation::Invocation;
use crate::input::knowledge::{Knowledge, Severity};
use crate::shared::settings::Environment;
pub(crate) use machine::Machine;
pub(crate) use page::Layout;
pub(crate) use probe::Probe;
pub(crate) use steps::NextStep;
pub(crate) use verdict::{assess, Status, Verdict};

/// The machine and a verdict per known fault.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub(crate) machine: Machine,
    pub(crate) faults: Vec<FaultReport>,
    /// Every knob set on the machine, judged.
    pub(crate) knobs: Vec<knob_verdicts::KnobReport>,
    /// The logs read and the GPU faults in them, judged ([`log::judge`]).
    pub(crate) logs: log::LogReport,
    /// The knowledge files the verdicts come from.
    pub(crate) knowledge: crate::input::knowledge::Revision,
}

/// The version of the `--json` layout (docs/doctor-json.md): a change
/// that removes or renames a key, or changes a value's meaning, raises it.
pub(crate) const JSON_SCHEMA: u32 = 1;

/// This binary: its version and the commit it was built from (`build.rs`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Tool {
    pub(crate) name: &'static str,
    pub(crate) version: &'static str,
    pub(crate) commit: &'static str,
    /// What the user ran: `rocm-patchkit`, `cargo xtask` or a path.
    pub(crate) command: String,
}

impl Tool {
    pub(crate) fn of(inv: &Invocation) -> Tool {
        Tool {
            name: crate::input::invocation::INSTALLED,
            version: env!("CARGO_PKG_VERSION"),
            commit: option_env!("PATCHKIT_COMMIT").unwrap_or("unknown"),
            command: inv.program.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct FaultReport {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) severity: Severity,
    pub(crate) summary: String,
    pub(crate) links: Vec<String>,
    #[serde(flatten)]
    pub(crate) verdict: Verdict,
}

/// Reads the machine below `root` (and doctor's own environment `env`).
/// `ours` are the DKMS package names of rocm-patchkit (recipes and the
/// knowledge file).
pub(crate) fn probe(
    root: &Path,
    knowledge: &Knowledge,
    ours: &BTreeSet<String>,
    env: &Environment,
) -> Machine {
    let env_names = env_names(knowledge);
    let mut ours = ours.clone();
    for fault in &knowledge.faults {
        ours.extend(fault.fixed_by_packages.iter().cloned());
    }
    Probe {
        root,
        ours: &ours,
        env_names: &env_names,
        env,
    }
    .read()
}

/// The environment variables whose values the fault verdicts read: every
/// fault's workaround variables and LD_LIBRARY_PATH.
pub(crate) fn env_names(knowledge: &Knowledge) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = knowledge
        .faults
        .iter()
        .flat_map(|f| f.mitigation.env.keys().cloned())
        .collect();
    names.insert(steps::LIBRARY_PATH.to_owned());
    names
}

/// doctor's own environment, every name and value read as bytes and shown
/// as text (a byte that is not UTF-8 replaced): a variable that is not
/// UTF-8 (an `OLDPWD` naming a Latin-1 folder) is kept, never a panic.
pub(crate) fn environment(env: &Environment) -> std::collections::BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// Judges every fault on `machine` and the faults in the logs of `scan`.
/// `recipes` are the recipes of this checkout: a next step naming one that
/// is missing says so.
pub(crate) fn diagnose(
    knowledge: &Knowledge,
    machine: Machine,
    recipes: &BTreeSet<String>,
    scan: log::Scan,
) -> Report {
    let log_read = !scan.read.is_empty();
    let faults = knowledge
        .faults
        .iter()
        .map(|fault| {
            let mut verdict = match fault.judged_only_by_log() {
                true => log::verdict_without_log(fault, &machine, log_read),
                false => assess(fault, &machine),
            };
            let named: BTreeSet<&str> = verdict.next.iter().filter_map(NextStep::recipe).collect();
            let missing: Vec<String> = fault
                .fixes
                .iter()
                .map(|f| &f.recipe)
                .chain(fault.stopgap.iter())
                .filter(|r| !recipes.contains(*r) && named.contains(r.as_str()))
                .cloned()
                .collect();
            if !missing.is_empty() {
                verdict.next.push(NextStep::NotInCheckout(missing));
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
    let logs = log::judge(scan, knowledge, &faults);
    Report {
        machine,
        faults,
        knobs,
        logs,
        knowledge: knowledge.revision.clone(),
    }
}

impl Report {
    /// Faults of severity `fault` that are affected and unmitigated.
    pub(crate) fn affected(&self) -> Vec<&FaultReport> {
        self.faults
            .iter()
            .filter(|f| f.severity == Severity::Fault && f.verdict.status == Status::Affected)
            .collect()
    }

    /// Stable JSON (docs/doctor-json.md): keys sorted, lists in probe and
    /// file order; `schema`, the `tool`; each fault's `status` (`info` for
    /// an informational finding that applies) and its `next` steps as data,
    /// rendered for `inv` and the machine's distribution.
    pub(crate) fn to_json(&self, inv: &Invocation) -> Result<String> {
        let mut value = serde_json::to_value(self)?;
        value["schema"] = JSON_SCHEMA.into();
        value["tool"] = serde_json::to_value(Tool::of(inv))?;
        if let Some(faults) = value.get_mut("faults").and_then(|f| f.as_array_mut()) {
            for (json, fault) in faults.iter_mut().zip(&self.faults) {
                let cx = advice::Context {
                    inv,
                    os: self.machine.os.as_ref(),
                };
                json["next"] = serde_json::to_value(advice::advise(&fault.verdict.next, cx))?;
                if fault.severity == Severity::Info && fault.verdict.status == Status::Affected {
                    json["status"] = "info".into();
                }
            }
        }
        Ok(serde_json::to_string_pretty(&sorted(value))?)
    }
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
