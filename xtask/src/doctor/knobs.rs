//! The knobs set on the machine (environment variables, amdgpu options in
//! /etc/modprobe.d and on the kernel command line, amdgpu's parameters in
//! sysfs) and the judgement of each from `knowledge/knobs.toml`: fixes,
//! mitigates, unconfirmed, diagnosis only, no effect here, harmful here, or
//! no known effect. Reading is below the root; judging is pure.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::verdict::Status;
use super::{FaultReport, Machine};
use crate::knowledge::{Effect, Knob, KnobKind, Knobs};

/// One knob set on the machine, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    pub kind: KnobKind,
    pub name: String,
    pub value: String,
    /// `environment`, `/etc/modprobe.d/<file>`, `kernel command line` or
    /// `/sys/module/amdgpu/parameters`.
    pub from: String,
    /// The module's value now (sysfs), for an amdgpu option.
    pub in_effect: Option<String>,
}

/// What a set knob does on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Judgement {
    Fixes,
    Mitigates,
    Unconfirmed,
    Diagnosis,
    NoEffect,
    Harmful,
    NoKnownEffect,
}

impl Judgement {
    pub fn label(self) -> &'static str {
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
pub struct KnobReport {
    #[serde(flatten)]
    pub setting: Setting,
    pub judgement: Judgement,
    pub fault: Option<String>,
    pub why: String,
    pub cost: Option<String>,
    pub links: Vec<String>,
}

/// The text of a file below the root, read through doctor's one bounded
/// reader (inside the root, a regular file, at most [`fsread::LIST`]).
fn read_text(root: &Path, rel: &str) -> Option<String> {
    super::fsread::Root::new(root)
        .read_text(Path::new(rel), super::fsread::LIST)
        .ok()
}

/// The knobs set below `root`, with `env` the environment judged (doctor's
/// own, or a process's).
pub fn read(root: &Path, env: &BTreeMap<String, String>, knobs: &Knobs) -> Vec<Setting> {
    let mut out = Vec::new();
    for (name, value) in env {
        let known = knobs.knobs.iter().any(|k| k.names(KnobKind::Env, name));
        if known
            || knobs
                .env_prefixes
                .iter()
                .any(|p| name.starts_with(p.as_str()))
        {
            out.push(setting(KnobKind::Env, name, value, "environment"));
        }
    }
    let mut module = Vec::new();
    let mut files: Vec<String> = super::fsread::Root::new(root)
        .list(Path::new("etc/modprobe.d"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| n.ends_with(".conf"))
        .collect();
    files.sort();
    for file in files {
        let Some(text) = read_text(root, &format!("etc/modprobe.d/{file}")) else {
            continue;
        };
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            if words.next() == Some("options") && words.next() == Some("amdgpu") {
                for word in words {
                    if let Some((k, v)) = word.split_once('=') {
                        module.push(setting(
                            KnobKind::Amdgpu,
                            k,
                            v,
                            &format!("/etc/modprobe.d/{file}"),
                        ));
                    }
                }
            }
        }
    }
    if let Some(cmdline) = read_text(root, "proc/cmdline") {
        for word in cmdline.split_whitespace() {
            if let Some((k, v)) = word.strip_prefix("amdgpu.").and_then(|w| w.split_once('=')) {
                module.push(setting(KnobKind::Amdgpu, k, v, "kernel command line"));
            }
        }
    }
    let param = |name: &str| {
        read_text(root, &format!("sys/module/amdgpu/parameters/{name}"))
            .map(|v| v.trim().to_owned())
    };
    for s in &mut module {
        if !s.name.contains('/') {
            s.in_effect = param(&s.name);
        }
    }
    // A value in sysfs that the knowledge file judges (cwsr_enable 0) counts
    // even when set nowhere doctor can see.
    for k in knobs.knobs.iter().filter(|k| k.kind == KnobKind::Amdgpu) {
        let (Some(want), false) = (&k.value, k.name.ends_with('*')) else {
            continue;
        };
        if module.iter().any(|s| s.name == k.name) {
            continue;
        }
        if let Some(v) = param(&k.name).filter(|v| v == want) {
            let mut s = setting(
                KnobKind::Amdgpu,
                &k.name,
                &v,
                "/sys/module/amdgpu/parameters",
            );
            s.in_effect = Some(v);
            module.push(s);
        }
    }
    out.extend(module);
    out
}

fn setting(kind: KnobKind, name: &str, value: &str, from: &str) -> Setting {
    Setting {
        kind,
        name: name.to_owned(),
        value: value.to_owned(),
        from: from.to_owned(),
        in_effect: None,
    }
}

/// Judges every setting of `m` against the knobs file, using the verdicts
/// on the faults a knob acts on.
pub fn judge(knobs: &Knobs, m: &Machine, faults: &[FaultReport]) -> Vec<KnobReport> {
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
        let gpus: Vec<&str> = m.gpus.iter().flatten().map(|g| g.gfx.as_str()).collect();
        let Some(target) = override_gfx(&s.value) else {
            return report(
                Judgement::Harmful,
                None,
                format!("`{}` is not a version such as 12.0.1; {}", s.value, k.why),
                Some(k),
            );
        };
        if !gpus.is_empty() && gpus.iter().all(|g| *g == target) {
            return report(
                Judgement::NoEffect,
                None,
                format!("{target} is this machine's own GPU: the override changes nothing"),
                Some(k),
            );
        }
        let native: Vec<&str> = gpus
            .iter()
            .copied()
            .filter(|g| k.gfx_native.iter().any(|n| n == g))
            .collect();
        if !gpus.is_empty() && native.is_empty() {
            return report(
                Judgement::NoKnownEffect,
                None,
                format!(
                    "remaps {} to {target}, the usual way to run ROCm on a GPU it has no kernels for; no known fault depends on it",
                    gpus.join(", ")
                ),
                Some(k),
            );
        }
        let on = if native.is_empty() {
            "a GPU ROCm supports as it is".to_owned()
        } else {
            native.join(", ")
        };
        return report(
            Judgement::Harmful,
            None,
            format!(
                "makes ROCm load kernels built for {target} on {on}: {}",
                k.why
            ),
            Some(k),
        );
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
