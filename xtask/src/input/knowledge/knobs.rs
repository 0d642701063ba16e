//! The knobs file, `knowledge/knobs.toml`: environment variables and amdgpu
//! module parameters people set, and what each does to the known faults,
//! with its sources. Parsed with unknown keys refused and validated against
//! the fault ids; nothing here reads the machine.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::shared::diag::{Diag, InvalidInput};

/// Where the knobs file lives below the project root.
pub(crate) const PATH: &str = "knowledge/knobs.toml";

/// Every judged knob, in file order, and the environment prefixes to list.
#[derive(Debug, Clone, Default)]
pub struct Knobs {
    pub(crate) env_prefixes: Vec<String>,
    pub knobs: Vec<Knob>,
}

/// Where a knob is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum KnobKind {
    /// An environment variable of the program.
    Env,
    /// An amdgpu module parameter.
    Amdgpu,
}

/// What a knob does to a known fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Effect {
    Fixes,
    Mitigates,
    Unconfirmed,
    Diagnosis,
    None,
    Harmful,
}

/// One knob, validated.
#[derive(Debug, Clone)]
pub struct Knob {
    /// The name; a trailing `*` matches a family.
    pub name: String,
    pub(crate) kind: KnobKind,
    /// The judgement holds for this value only.
    pub(crate) value: Option<String>,
    pub(crate) effect: Effect,
    pub(crate) fault: Option<String>,
    /// Harmful when the value names another GPU than the machine's own and
    /// that GPU is one of `gfx_native` (ROCm supports it as it is).
    pub(crate) gfx_override: bool,
    pub(crate) gfx_native: Vec<String>,
    pub(crate) why: String,
    pub(crate) cost: Option<String>,
    pub links: Vec<String>,
}

impl Knob {
    /// Whether this entry judges `name` set to `value`.
    pub(crate) fn matches(&self, kind: KnobKind, name: &str, value: &str) -> bool {
        let name_ok = match self.name.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == self.name,
        };
        self.kind == kind && name_ok && self.value.as_deref().is_none_or(|v| v == value.trim())
    }

    /// Whether this entry names `name` at all (any value).
    pub(crate) fn names(&self, kind: KnobKind, name: &str) -> bool {
        self.kind == kind
            && match self.name.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == self.name,
            }
    }
}

type Text = Spanned<String>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKnobs {
    #[serde(default)]
    env_prefixes: Vec<String>,
    #[serde(default)]
    knob: Vec<Spanned<RawKnob>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKnob {
    name: Text,
    kind: KnobKind,
    value: Option<String>,
    effect: Effect,
    fault: Option<Text>,
    #[serde(default)]
    gfx_override: bool,
    #[serde(default)]
    gfx_native: Vec<String>,
    why: String,
    cost: Option<String>,
    links: Vec<Text>,
}

/// Parses and validates the knobs file; `faults` are the ids of
/// faults.toml a knob may name. Every problem comes as `path:line:col`.
pub(crate) fn parse(path: &Path, text: &str, faults: &BTreeSet<String>) -> Result<Knobs> {
    let raw: RawKnobs = toml::from_str(text).map_err(|err| {
        let at = err.span().map_or(0, |s| s.start);
        InvalidInput(vec![Diag::at(path, text, at, err.message().trim())])
    })?;
    let mut diags = Vec::new();
    let mut err = |at: usize, message: String| diags.push(Diag::at(path, text, at, message));
    let mut seen = BTreeSet::new();
    let mut knobs = Vec::new();
    for spanned in &raw.knob {
        let k = spanned.get_ref();
        let at = spanned.span().start;
        let name = k.name.get_ref();
        let body = name.strip_suffix('*').unwrap_or(name);
        if body.is_empty() || !body.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            err(
                k.name.span().start,
                format!("`name`: `{name}` is not a variable or parameter name"),
            );
        }
        if !seen.insert((name.clone(), k.kind, k.value.clone())) {
            err(
                k.name.span().start,
                format!("knob `{name}` is listed twice for the same value"),
            );
        }
        check_effect(k, name, at, faults, &mut err);
        knobs.push(Knob {
            name: name.clone(),
            kind: k.kind,
            value: k.value.clone(),
            effect: k.effect,
            fault: k.fault.as_ref().map(|f| f.get_ref().clone()),
            gfx_override: k.gfx_override,
            gfx_native: k.gfx_native.clone(),
            why: k.why.trim().to_owned(),
            cost: k.cost.as_ref().map(|c| c.trim().to_owned()),
            links: k.links.iter().map(|l| l.get_ref().clone()).collect(),
        });
    }
    if diags.is_empty() {
        Ok(Knobs {
            env_prefixes: raw.env_prefixes,
            knobs,
        })
    } else {
        diags.sort_by_key(|d| (d.line, d.col));
        Err(InvalidInput(diags).into())
    }
}

/// What a knob's effect asks of it: the fault it acts on, its cost, its
/// links.
fn check_effect(
    k: &RawKnob,
    name: &str,
    at: usize,
    faults: &BTreeSet<String>,
    err: &mut dyn FnMut(usize, String),
) {
    let acts_on_fault = matches!(
        k.effect,
        Effect::Fixes | Effect::Mitigates | Effect::Unconfirmed
    );
    match &k.fault {
        None if acts_on_fault => err(
            at,
            format!("knob `{name}`: an effect on a fault names the `fault`"),
        ),
        Some(f) if !faults.contains(f.get_ref()) => err(
            f.span().start,
            format!(
                "`fault`: `{}` is not a fault of {}",
                f.get_ref(),
                super::PATH
            ),
        ),
        Some(f) if !acts_on_fault => err(
            f.span().start,
            "`fault` is only for effects `fixes`, `mitigates` and `unconfirmed`".to_owned(),
        ),
        _ => {}
    }
    if matches!(k.effect, Effect::Diagnosis | Effect::Mitigates) && k.cost.is_none() {
        err(
            at,
            format!("knob `{name}`: a `diagnosis` or `mitigates` knob says its `cost`"),
        );
    }
    if k.gfx_override && k.effect != Effect::Harmful {
        err(
            at,
            format!("knob `{name}`: `gfx_override` is for a `harmful` knob"),
        );
    }
    if k.links.is_empty() {
        err(
            at,
            format!("knob `{name}`: give at least one link to its source"),
        );
    }
    for link in &k.links {
        if !link.get_ref().starts_with("https://") {
            err(
                link.span().start,
                "`links`: a source link starts with https://".to_owned(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults() -> BTreeSet<String> {
        ["cwsr-expert-sched".to_owned()].into()
    }

    #[test]
    fn the_knobs_file_parses() {
        let text = include_str!("../../../../knowledge/knobs.toml");
        let faults = super::super::parse(
            Path::new("faults.toml"),
            include_str!("../../../../knowledge/faults.toml"),
        )
        .unwrap()
        .faults
        .into_iter()
        .map(|f| f.id)
        .collect();
        let knobs = parse(Path::new("knobs.toml"), text, &faults).unwrap();
        assert!(knobs
            .knobs
            .iter()
            .any(|k| k.name == "HSA_OVERRIDE_GFX_VERSION"));
    }

    #[test]
    fn unknown_keys_and_faults_are_refused_with_their_place() {
        let text = "[[knob]]\nname = \"X\"\nkind = \"env\"\neffect = \"fixes\"\nfault = \"nope\"\nwhy = \"w\"\nlinks = [\"http://a\"]\n";
        let err = parse(Path::new("k.toml"), text, &faults())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("k.toml:5:9: `fault`: `nope` is not a fault"),
            "{err}"
        );
        assert!(err.contains("k.toml:7:10: `links`"), "{err}");
        let text = "[[knob]]\nname = \"X\"\ncolour = \"red\"\n";
        let err = parse(Path::new("k.toml"), text, &faults())
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `colour`"), "{err}");
    }

    #[test]
    fn a_family_name_matches_its_members_and_a_value_only_itself() {
        let text = "[[knob]]\nname = \"MIOPEN_DEBUG_CONV_*\"\nkind = \"env\"\neffect = \"none\"\nwhy = \"w\"\nlinks = [\"https://a\"]\n\n[[knob]]\nname = \"cwsr_enable\"\nkind = \"amdgpu\"\nvalue = \"0\"\neffect = \"mitigates\"\nfault = \"cwsr-expert-sched\"\ncost = \"c\"\nwhy = \"w\"\nlinks = [\"https://a\"]\n";
        let k = parse(Path::new("k.toml"), text, &faults()).unwrap().knobs;
        assert!(k[0].matches(KnobKind::Env, "MIOPEN_DEBUG_CONV_WINOGRAD", "0"));
        assert!(!k[0].matches(KnobKind::Amdgpu, "MIOPEN_DEBUG_CONV_WINOGRAD", "0"));
        assert!(k[1].matches(KnobKind::Amdgpu, "cwsr_enable", "0\n"));
        assert!(!k[1].matches(KnobKind::Amdgpu, "cwsr_enable", "1"));
        assert!(k[1].names(KnobKind::Amdgpu, "cwsr_enable"));
    }
}
