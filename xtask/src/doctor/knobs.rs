//! The knobs set on the machine (environment variables, amdgpu options in
//! /etc/modprobe.d and on the kernel command line, amdgpu's parameters in
//! sysfs), read below the root; `knob_verdicts.rs` judges them. The work
//! is bounded whatever the files hold: each file within its size bound,
//! the settings kept (and so the sysfs reads and the output) bounded, the
//! rest counted and said; a file that is not UTF-8 is read and named.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::fsread::Unread;
use crate::input::knowledge::{KnobKind, Knobs};

/// One knob set on the machine, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Setting {
    pub(crate) kind: KnobKind,
    pub(crate) name: String,
    pub(crate) value: String,
    /// `environment`, `/etc/modprobe.d/<file>`, `kernel command line` or
    /// `/sys/module/amdgpu/parameters`.
    pub(crate) from: String,
    /// The module's value now (sysfs), for an amdgpu option.
    pub(crate) in_effect: Option<String>,
}

/// Settings kept from one source (a file, the environment, the command
/// line) besides those the knowledge file names exactly.
pub(crate) const KEPT_PER_SOURCE: usize = 64;
/// Such settings kept from all sources together.
pub(crate) const KEPT: usize = 256;
/// `/etc/modprobe.d` files read at most.
pub(crate) const FILES: usize = 256;
/// A `name=value` longer than this is no parameter: counted, not kept.
pub(crate) const WORD: usize = 1024;

/// The knobs set on a machine, and what keeping them bounded cost.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub(crate) settings: Vec<Setting>,
    /// What doctor says about how it read them: a file read lossily (not
    /// UTF-8), settings not kept past the bounds.
    pub(crate) notes: Vec<String>,
    /// Files it could not read, and why.
    pub(crate) unread: Vec<Unread>,
}

/// The settings of one source as they are read: the last value of a name
/// wins (as it does for modprobe and the kernel), those the knowledge file
/// names exactly are always kept, at most [`KEPT_PER_SOURCE`] others (and
/// [`KEPT`] in all); the rest are counted.
struct Source<'a> {
    knobs: &'a Knobs,
    kind: KnobKind,
    from: String,
    kept: Vec<Setting>,
    index: BTreeMap<String, usize>,
    others: usize,
    cut: u64,
}

impl<'a> Source<'a> {
    fn new(knobs: &'a Knobs, kind: KnobKind, from: &str) -> Source<'a> {
        Source {
            knobs,
            kind,
            from: from.to_owned(),
            kept: Vec::new(),
            index: BTreeMap::new(),
            others: 0,
            cut: 0,
        }
    }

    fn add(&mut self, name: &str, value: &str, budget: &mut usize) {
        if name.len() + value.len() >= WORD {
            self.cut += 1;
            return;
        }
        if let Some(&at) = self.index.get(name) {
            self.kept[at].value = value.to_owned();
            return;
        }
        let exact = self
            .knobs
            .knobs
            .iter()
            .any(|k| k.kind == self.kind && k.name == name);
        if !exact {
            if self.others == KEPT_PER_SOURCE || *budget == 0 {
                self.cut += 1;
                return;
            }
            self.others += 1;
            *budget -= 1;
        }
        self.index.insert(name.to_owned(), self.kept.len());
        self.kept.push(setting(self.kind, name, value, &self.from));
    }

    /// Its settings, and a note when some were not kept.
    fn end(self, found: &mut Found) -> Vec<Setting> {
        if self.cut > 0 {
            let what = match self.kind {
                KnobKind::Env => "environment",
                KnobKind::Amdgpu => "amdgpu",
            };
            found.notes.push(format!(
                "{}: {} more {what} settings not kept (at most {KEPT_PER_SOURCE} from one place and {KEPT} in all besides the knobs the knowledge file names, each under {WORD} bytes)",
                self.from, self.cut
            ));
        }
        self.kept
    }
}

/// The knobs set below `root`, with `env` the environment judged (doctor's
/// own, or a process's). The work and what is kept are bounded, whatever
/// the files hold.
pub(crate) fn read(root: &Path, env: &BTreeMap<String, String>, knobs: &Knobs) -> Found {
    let mut found = Found::default();
    let mut budget = KEPT;
    let mut source = Source::new(knobs, KnobKind::Env, "environment");
    for (name, value) in env {
        let known = knobs.knobs.iter().any(|k| k.names(KnobKind::Env, name));
        if known
            || knobs
                .env_prefixes
                .iter()
                .any(|p| name.starts_with(p.as_str()))
        {
            source.add(name, value, &mut budget);
        }
    }
    let mut settings = source.end(&mut found);
    let mut module = modprobe_options(root, knobs, &mut budget, &mut found);
    let fs = super::fsread::Root::new(root);
    if let Ok(bytes) = fs.read(Path::new("proc/cmdline"), super::fsread::CMDLINE) {
        let cmdline = String::from_utf8_lossy(&bytes);
        let mut source = Source::new(knobs, KnobKind::Amdgpu, "kernel command line");
        for word in cmdline.split_whitespace() {
            if let Some((k, v)) = word.strip_prefix("amdgpu.").and_then(|w| w.split_once('=')) {
                source.add(k, v, &mut budget);
            }
        }
        module.extend(source.end(&mut found));
    }
    let param = |name: &str| {
        fs.read_text(
            Path::new(&format!("sys/module/amdgpu/parameters/{name}")),
            super::fsread::LINE,
        )
        .ok()
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
    settings.extend(module);
    found.settings = settings;
    found
}

/// The amdgpu options of `/etc/modprobe.d/*.conf`, file by file in name
/// order (at most [`FILES`] files). A file that is not UTF-8 is read with
/// its bad bytes replaced, and named; one that cannot be read is listed.
fn modprobe_options(
    root: &Path,
    knobs: &Knobs,
    budget: &mut usize,
    found: &mut Found,
) -> Vec<Setting> {
    let fs = super::fsread::Root::new(root);
    let dir = Path::new("etc/modprobe.d");
    let entries = match fs.list(dir) {
        Ok(entries) => entries,
        Err(u) if u.why == "does not exist" => Vec::new(),
        Err(u) => {
            found.unread.push(u);
            Vec::new()
        }
    };
    let files: Vec<String> = entries
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| n.ends_with(".conf"))
        .collect();
    if files.len() > FILES {
        found.notes.push(format!(
            "/etc/modprobe.d: {} more .conf files not read (at most {FILES})",
            files.len() - FILES
        ));
    }
    let mut module = Vec::new();
    for file in files.into_iter().take(FILES) {
        let from = format!("/etc/modprobe.d/{file}");
        let bytes = match fs.read(&dir.join(&file), super::fsread::LIST) {
            Ok(bytes) => bytes,
            Err(u) => {
                found.unread.push(u);
                continue;
            }
        };
        let mut source = Source::new(knobs, KnobKind::Amdgpu, &from);
        for line in bytes.split(|b| *b == b'\n') {
            let line = line.split(|b| *b == b'#').next().unwrap_or(&[]);
            let text = String::from_utf8_lossy(line);
            let mut words = text.split_whitespace();
            if words.next() == Some("options") && words.next() == Some("amdgpu") {
                for word in words {
                    if let Some((k, v)) = word.split_once('=') {
                        source.add(k, v, budget);
                    }
                }
            }
        }
        if std::str::from_utf8(&bytes).is_err() {
            found.notes.push(format!(
                "{from}: not UTF-8 text: read with its bad bytes replaced"
            ));
        }
        module.extend(source.end(found));
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
