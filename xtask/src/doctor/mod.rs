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
mod library_version;
pub mod machine;
pub mod module;
mod per_library;
pub mod pid;
pub mod probe;
pub mod secure_boot;
pub mod steps;
pub mod tensile;
mod text;
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
