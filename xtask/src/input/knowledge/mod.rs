//! The knowledge file of known faults, `knowledge/faults.toml`: each fault
//! with its upstream links, affected GPU targets, kernel / ROCm / hipBLASLt
//! ranges, the recipes that fix it, the workaround and how it shows in
//! logs. Parsed with unknown keys refused and validated with every problem
//! reported at once; nothing here reads the machine (that is `doctor`).

pub(crate) mod knobs;
pub(crate) mod log;
mod parse;
mod version;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::input::kernel::KernelRange;
pub(crate) use knobs::{Effect, Knob, KnobKind, Knobs};
pub(crate) use log::{Glob, LogFacts};
pub(crate) use parse::parse;
pub use version::{Version, VersionRange};

/// Where the knowledge file lives below the project root.
pub(crate) const PATH: &str = "knowledge/faults.toml";

/// Every known fault, in file order.
#[derive(Debug, Clone)]
pub struct Knowledge {
    pub faults: Vec<Fault>,
    /// The knobs of `knowledge/knobs.toml` (empty when only faults were parsed).
    pub knobs: Knobs,
    /// Which knowledge files these are (doctor's `--json` says it).
    pub(crate) revision: Revision,
}

/// The knowledge files read: where from, and a hash of their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Revision {
    /// `built-in` (compiled into the binary), `checkout` (a checkout's
    /// `knowledge/`) or `--knowledge` (a folder given).
    pub(crate) source: &'static str,
    /// The faults file and the knobs file as read.
    pub(crate) files: Vec<String>,
    /// sha256 of `faults.toml`, a NUL, `knobs.toml`: the same files give
    /// the same revision wherever they were read.
    pub(crate) sha256: String,
}

/// How much an affected verdict matters: `Fault` makes `doctor` exit 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Fault,
    Info,
}

/// A library that must be present for a fault to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Library {
    Hipblaslt,
    Miopen,
    Comgr,
}

impl Library {}

/// The kind of a fix recipe (`build = "dkms"`), which names the `cargo
/// xtask build-*` command that builds it: the recipe's own kind word, one
/// whose [`KindName::doctor_fix`] doctor can give.
pub(crate) use crate::input::recipe::KindName as Build;

/// One known fault, validated.
#[derive(Debug, Clone)]
pub struct Fault {
    pub id: String,
    pub(crate) title: String,
    pub(crate) severity: Severity,
    /// GPU targets (`gfx1201`) or families (`gfx103*`).
    pub(crate) gfx: Vec<String>,
    pub(crate) summary: String,
    pub links: Vec<String>,
    pub(crate) kernel: Option<KernelFacts>,
    pub(crate) kfd_fixed: Option<VersionRange>,
    pub(crate) rocm: Option<VersionRange>,
    pub(crate) hipblaslt: Option<VersionRange>,
    pub(crate) hipblaslt_fixed: Option<VersionRange>,
    /// Versions of a distribution's comgr package (`libamd-comgr3`,
    /// upstream part of the package version) affected.
    pub comgr: Option<VersionRange>,
    pub(crate) trigger_rocm: Option<VersionRange>,
    /// Triggered only by hipBLASLt kernels that switch expert scheduling on
    /// for gfx12: doctor reads the kernels of every hipBLASLt it finds.
    pub(crate) trigger_expert_sched: bool,
    pub(crate) needs: Option<Library>,
    pub fixed_by_packages: Vec<String>,
    pub(crate) mitigation: Mitigation,
    pub stopgap: Option<String>,
    pub(crate) workaround: String,
    pub fixes: Vec<Fix>,
    /// How it shows in logs (`[fault.log]`), for `doctor --log`.
    pub(crate) log: LogFacts,
}

/// The kernels a kernel-side fault affects, is fixed in, or cannot happen on.
#[derive(Debug, Clone)]
pub(crate) struct KernelFacts {
    pub(crate) affected: KernelRange,
    pub(crate) fixed: Option<KernelRange>,
    pub(crate) unsupported: Option<KernelRange>,
    pub(crate) unsupported_why: Option<String>,
    /// Affected kernels we build no fix for any more (a retired recipe),
    /// and what their users do instead.
    pub(crate) retired: Option<KernelRange>,
    pub(crate) retired_why: Option<String>,
    /// Judge by the gfx12 CWSR trap handler of the amdgpu module modprobe
    /// would load: its content wins over the ranges.
    pub(crate) trap_handler: bool,
}

/// What makes the fault harmless without fixing it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mitigation {
    /// Compute wave save/restore switched off (`amdgpu.cwsr_enable=0`).
    pub(crate) cwsr_off: bool,
    /// Environment variables that, all set to these values, avoid it.
    pub(crate) env: BTreeMap<String, String>,
}

/// A recipe that fixes the fault, and when it applies.
#[derive(Debug, Clone)]
pub struct Fix {
    pub recipe: String,
    pub build: Build,
    pub kernel: Option<KernelRange>,
    pub(crate) rocm: Option<VersionRange>,
    /// Applies only when the kernel release contains this (`+deb`).
    pub(crate) release_contains: Option<String>,
    pub(crate) note: Option<String>,
}

impl Fault {
    /// Whether a GPU target such as `gfx1201` is one this fault affects.
    pub(crate) fn affects_gfx(&self, gfx: &str) -> bool {
        self.gfx
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => gfx.starts_with(prefix),
                None => gfx == pattern,
            })
    }
}

/// Where the knowledge files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// `<root>/knowledge/` of a checkout (`cargo xtask`).
    Checkout(PathBuf),
    /// The files this binary was built with (the installed command).
    BuiltIn,
    /// `--knowledge DIR`: newer files, in DIR or in DIR/knowledge/.
    Dir(PathBuf),
}

/// The knowledge files this binary was built with.
const BUILT_IN_FAULTS: &str = include_str!("../../../../knowledge/faults.toml");
const BUILT_IN_KNOBS: &str = include_str!("../../../../knowledge/knobs.toml");

impl Knowledge {
    /// Reads and validates the knowledge files of `source`.
    pub(crate) fn read(source: &Source) -> Result<Knowledge> {
        match source {
            Source::Checkout(root) => Knowledge::load(root),
            Source::BuiltIn => Knowledge::parse_both(
                Path::new("knowledge/faults.toml (built in)"),
                BUILT_IN_FAULTS,
                Path::new("knowledge/knobs.toml (built in)"),
                BUILT_IN_KNOBS,
            ),
            Source::Dir(dir) => Knowledge::load_dir(dir),
        }
        .map(|mut k| {
            k.revision.source = match source {
                Source::Checkout(_) => "checkout",
                Source::BuiltIn => "built-in",
                Source::Dir(_) => "--knowledge",
            };
            k
        })
    }

    /// Reads and validates `<root>/knowledge/faults.toml`.
    pub fn load(root: &Path) -> Result<Knowledge> {
        let path = root.join(PATH);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading the knowledge file {}: run from a rocm-patchkit checkout (or set PATCHKIT_ROOT)",
                path.display()
            )
        })?;
        let knobs_path = root.join(knobs::PATH);
        let knobs = std::fs::read_to_string(&knobs_path)
            .with_context(|| format!("reading the knobs file {}", knobs_path.display()))?;
        Knowledge::parse_both(&path, &text, &knobs_path, &knobs)
    }

    /// `--knowledge DIR`: `faults.toml` and `knobs.toml` in DIR, or in
    /// DIR/knowledge/ (a checkout).
    pub(crate) fn load_dir(dir: &Path) -> Result<Knowledge> {
        let folder = if dir.join("faults.toml").is_file() {
            dir.to_path_buf()
        } else if dir.join(PATH).is_file() {
            dir.join("knowledge")
        } else {
            anyhow::bail!(crate::shared::diag::UsageError(format!(
                "--knowledge {}: no faults.toml there nor in {}: give the folder holding faults.toml and knobs.toml",
                dir.display(),
                dir.join("knowledge").display()
            )));
        };
        let read = |name: &str| {
            let path = folder.join(name);
            std::fs::read_to_string(&path)
                .with_context(|| {
                    format!(
                        "reading the knowledge file {} (--knowledge)",
                        path.display()
                    )
                })
                .map(|text| (path, text))
        };
        let (faults_path, faults) = read("faults.toml")?;
        let (knobs_path, knobs) = read("knobs.toml")?;
        Knowledge::parse_both(&faults_path, &faults, &knobs_path, &knobs)
    }

    /// Parses and validates a faults file and its knobs file.
    fn parse_both(
        path: &Path,
        text: &str,
        knobs_path: &Path,
        knobs_text: &str,
    ) -> Result<Knowledge> {
        let mut knowledge = parse(path, text).with_context(|| {
            format!(
                "the knowledge file {} is invalid",
                crate::shared::diag::display_path(path).display()
            )
        })?;
        let ids = knowledge.faults.iter().map(|f| f.id.clone()).collect();
        knowledge.knobs = knobs::parse(knobs_path, knobs_text, &ids).with_context(|| {
            format!(
                "the knobs file {} is invalid",
                crate::shared::diag::display_path(knobs_path).display()
            )
        })?;
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(0);
        bytes.extend_from_slice(knobs_text.as_bytes());
        knowledge.revision = Revision {
            source: "",
            files: [path, knobs_path]
                .iter()
                .map(|p| crate::shared::diag::display_path(p).display().to_string())
                .collect(),
            sha256: crate::shared::hash::sha256_hex(&bytes),
        };
        Ok(knowledge)
    }

    /// Every recipe a fault names (fixes and stop-gaps), sorted.
    pub fn recipes(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for fault in &self.faults {
            names.extend(fault.fixes.iter().map(|f| f.recipe.clone()));
            names.extend(fault.stopgap.iter().cloned());
        }
        names
    }
}
