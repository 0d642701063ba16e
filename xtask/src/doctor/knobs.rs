//! The knobs set on the machine (environment variables, amdgpu options in
//! /etc/modprobe.d and on the kernel command line, amdgpu's parameters in
//! sysfs), read below the root; `knob_verdicts.rs` judges them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::knowledge::{KnobKind, Knobs};

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
    let mut module = modprobe_options(root);
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

/// The amdgpu options of `/etc/modprobe.d/*.conf`, file by file in name
/// order.
fn modprobe_options(root: &Path) -> Vec<Setting> {
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
    module
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
