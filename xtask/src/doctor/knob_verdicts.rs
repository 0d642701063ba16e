//! The judgement of each knob set on the machine from
//! `knowledge/knobs.toml`: fixes, mitigates, unconfirmed, diagnosis only, no
//! effect here, harmful here, or no known effect. Pure: a knob is judged only
//! from the knowledge file, never guessed.

use serde::Serialize;

use super::knobs::Setting;
use super::machine::Machine;
use super::verdict::Status;
use super::FaultReport;
use crate::input::knowledge::{Effect, Knob, Knobs};

/// What a set knob does on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Judgement {
    Fixes,
    Mitigates,
    Unconfirmed,
    Diagnosis,
    NoEffect,
    Harmful,
    NoKnownEffect,
}

impl Judgement {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Judgement::Fixes => "fixes",
            Judgement::Mitigates => "mitigates",
            Judgement::Unconfirmed => "unconfirmed",
            Judgement::Diagnosis => "diagnosis only",
            Judgement::NoEffect => "no effect on any known fault here",
            Judgement::Harmful => "HARMFUL here",
            Judgement::NoKnownEffect => "no known effect",
        }
    }
}

/// A set knob and its judgement, with the sources it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct KnobReport {
    #[serde(flatten)]
    pub(crate) setting: Setting,
    pub(crate) judgement: Judgement,
    pub(crate) fault: Option<String>,
    pub(crate) why: String,
    pub(crate) cost: Option<String>,
    pub(crate) links: Vec<String>,
}

/// Judges every setting of `m` against the knobs file, using the verdicts
/// on the faults a knob acts on.
pub(crate) fn judge(knobs: &Knobs, m: &Machine, faults: &[FaultReport]) -> Vec<KnobReport> {
    m.knob_settings
        .iter()
        .map(|s| judge_one(knobs, m, faults, s))
        .collect()
}

fn judge_one(knobs: &Knobs, m: &Machine, faults: &[FaultReport], s: &Setting) -> KnobReport {
    let report = |judgement, fault: Option<String>, why: String, k: Option<&Knob>| KnobReport {
        setting: s.clone(),
        judgement,
        fault,
        why,
        cost: k.and_then(|k| k.cost.clone()),
        links: k.map(|k| k.links.clone()).unwrap_or_default(),
    };
    let Some(k) = knobs
        .knobs
        .iter()
        .find(|k| k.matches(s.kind, &s.name, &s.value))
    else {
        let why = match knobs.knobs.iter().find(|k| k.names(s.kind, &s.name)) {
            Some(k) => format!(
                "the knowledge file judges {}={} only",
                s.name,
                k.value.as_deref().unwrap_or("")
            ),
            None => "no fact about it in knowledge/knobs.toml".to_owned(),
        };
        return report(Judgement::NoKnownEffect, None, why, None);
    };
    if k.gfx_override {
        let (judgement, why) = gfx_override(k, m, &s.value);
        return report(judgement, None, why, Some(k));
    }
    let judgement = match k.effect {
        Effect::Fixes => Judgement::Fixes,
        Effect::Mitigates => Judgement::Mitigates,
        Effect::Unconfirmed => Judgement::Unconfirmed,
        Effect::Diagnosis => Judgement::Diagnosis,
        Effect::None => Judgement::NoEffect,
        Effect::Harmful => Judgement::Harmful,
    };
    if let Some(id) = &k.fault {
        if let Some(f) = faults.iter().find(|f| &f.id == id) {
            if matches!(f.verdict.status, Status::NotAffected | Status::Fixed) {
                return report(
                    Judgement::NoEffect,
                    Some(id.clone()),
                    format!(
                        "{id} does not affect this machine ({}); elsewhere: {}",
                        f.verdict.status.label(f.severity),
                        k.why
                    ),
                    Some(k),
                );
            }
        }
    }
    report(judgement, k.fault.clone(), k.why.clone(), Some(k))
}

/// HSA_OVERRIDE_GFX_VERSION set to `value` on this machine's GPUs: harmful
/// where it makes ROCm load kernels built for another GPU.
fn gfx_override(k: &Knob, m: &Machine, value: &str) -> (Judgement, String) {
    let gpus: Vec<&str> = m.gpus.iter().flatten().map(|g| g.gfx.as_str()).collect();
    let Some(target) = override_gfx(value) else {
        return (
            Judgement::Harmful,
            format!("`{value}` is not a version such as 12.0.1; {}", k.why),
        );
    };
    if !gpus.is_empty() && gpus.iter().all(|g| *g == target) {
        return (
            Judgement::NoEffect,
            format!("{target} is this machine's own GPU: the override changes nothing"),
        );
    }
    let native: Vec<&str> = gpus
        .iter()
        .copied()
        .filter(|g| k.gfx_native.iter().any(|n| n == g))
        .collect();
    if !gpus.is_empty() && native.is_empty() {
        return (
            Judgement::NoKnownEffect,
            format!(
                "remaps {} to {target}, the usual way to run ROCm on a GPU it has no kernels for; no known fault depends on it",
                gpus.join(", ")
            ),
        );
    }
    let on = if native.is_empty() {
        "a GPU ROCm supports as it is".to_owned()
    } else {
        native.join(", ")
    };
    (
        Judgement::Harmful,
        format!(
            "makes ROCm load kernels built for {target} on {on}: {}",
            k.why
        ),
    )
}

/// `gfx1030` from HSA_OVERRIDE_GFX_VERSION's `10.3.0`.
fn override_gfx(value: &str) -> Option<String> {
    let parts: Vec<u32> = value
        .trim()
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match parts[..] {
        [major, minor, stepping] if minor < 16 && stepping < 16 => {
            Some(format!("gfx{major}{minor:x}{stepping:x}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_versions_name_their_gpu() {
        assert_eq!(override_gfx("10.3.0").as_deref(), Some("gfx1030"));
        assert_eq!(override_gfx("12.0.1").as_deref(), Some("gfx1201"));
        assert_eq!(override_gfx("9.0.10").as_deref(), Some("gfx90a"));
        assert_eq!(override_gfx("gfx1030"), None);
    }
}
