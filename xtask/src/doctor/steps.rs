//! A verdict's next steps as values: the commands to run (which, for which
//! recipe or folder) and what to keep or know, each rendered to its one line
//! of the report here, with the program the user ran ([`Invocation`]).
//! Which steps a fault offers on a machine is decided here too, from the
//! fixes of the knowledge file.

use std::fmt;

use super::machine::Machine;
use crate::invocation::Invocation;
use crate::kernel::KernelVersion;
use crate::knowledge::{Build, Fault, Version};

/// The environment variable that points programs at a patched hipBLASLt.
pub const LIBRARY_PATH: &str = "LD_LIBRARY_PATH";

/// One line of a verdict's next steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `cargo xtask build-dkms|build-hipblaslt <recipe>`; `or` when another
    /// fix comes before it.
    Build {
        build: Build,
        recipe: String,
        or: bool,
    },
    /// Installing what [`Step::Build`] of `recipe` made.
    Install { build: Build, recipe: String },
    /// A fix's note, under it.
    FixNote(String),
    /// The stop-gap: `cargo xtask build-config <recipe>` and installing it.
    Stopgap { recipe: String },
    /// The fault's workaround, alone or (`or`) after the stop-gap.
    Workaround { text: String, or: bool },
    /// No recipe of ours fixes this kernel, and why.
    Retired { why: String },
    /// `cargo xtask rewrite-hipblaslt <dir>`: the first (`first`) or another
    /// library folder; `system` when it holds a package's files.
    Rewrite {
        dir: String,
        first: bool,
        system: bool,
    },
    /// Point this environment at our patched hipBLASLt below `prefix`.
    ExportLibraryPath { prefix: String },
    /// Keep this environment pointed at our patched hipBLASLt.
    KeepLibraryPath { prefix: String },
    /// Keep the fault's workaround variables set.
    KeepVariables,
    /// Keep the hipBLASLt that mitigates the fault: a `rewritten` one, or
    /// ours loaded by PyTorch; the kernel fix follows.
    KeepHipblaslt { rewritten: bool },
    /// The kernel fix follows, which gives compute preemption back.
    ForTheFixItself,
    /// `amdgpu.cwsr_enable=0` is set although the fault is fixed.
    DropCwsrOff,
    /// The recipes named above that this checkout lacks.
    NotInCheckout(Vec<String>),
}

impl Step {
    /// The recipe this step tells to build, if any.
    pub fn recipe(&self) -> Option<&str> {
        match self {
            Step::Build { recipe, .. } | Step::Stopgap { recipe } => Some(recipe),
            _ => None,
        }
    }
}

impl Step {
    /// The step's line of the report, its commands starting with the
    /// program `inv` says the user ran (as root: `sudo` and the binary's
    /// absolute path).
    pub fn render(&self, inv: &Invocation) -> String {
        let mut out = String::new();
        self.write(&mut out, inv).expect("writing to a String");
        out
    }

    fn write(&self, f: &mut impl fmt::Write, inv: &Invocation) -> fmt::Result {
        let build = |command: &str, recipe: &str| build_command(inv, command, recipe);
        match self {
            Step::Build {
                build: b,
                recipe,
                or,
            } => {
                let or = if *or { "or: " } else { "" };
                write!(f, "{or}{}", build(b.build_command(), recipe))
            }
            Step::Install { build, recipe } => write!(
                f,
                "  then install the package for your distro from dist/{recipe}/{}",
                build.install_advice().unwrap_or_default()
            ),
            Step::FixNote(note) => write!(f, "  ({note})"),
            Step::Stopgap { recipe } => write!(
                f,
                "stop-gap now: {}, then install it from dist/{recipe}/",
                build("build-config", recipe)
            ),
            Step::Workaround { text, or: true } => write!(f, "  or {text}"),
            Step::Workaround { text, or: false } => write!(f, "workaround: {text}"),
            Step::Retired { why } => write!(f, "no package of ours for this kernel: {why}"),
            Step::Rewrite { dir, first, system } => {
                f.write_str(&rewrite_command(inv, dir, *first, *system))
            }
            Step::ExportLibraryPath { prefix } => write!(
                f,
                "export {LIBRARY_PATH}={prefix}/lib${{{LIBRARY_PATH}:+:${LIBRARY_PATH}}}"
            ),
            Step::KeepLibraryPath { prefix } => write!(
                f,
                "keep {LIBRARY_PATH}={prefix}/lib for every program that uses hipBLASLt"
            ),
            Step::KeepVariables => {
                f.write_str("keep these variables set for every program that uses it")
            }
            Step::KeepHipblaslt { rewritten: true } => f.write_str(
                "the rewritten hipBLASLt stays fixed until its package or wheel is upgraded or reinstalled: run doctor again then (docs/rewrite-hipblaslt.md); for the kernel fix itself:",
            ),
            Step::KeepHipblaslt { rewritten: false } => f.write_str(
                "keep PyTorch loading our patched hipBLASLt (docs/build-hipblaslt.md, \"Using the patched hipBLASLt with PyTorch\"); for the kernel fix itself:",
            ),
            Step::ForTheFixItself => f.write_str("for the fix itself (compute preemption back):"),
            Step::DropCwsrOff => f.write_str(
                "amdgpu.cwsr_enable=0 is no longer needed for this fault: drop it to get compute preemption and the GPU debugger back",
            ),
            Step::NotInCheckout(recipes) => write!(
                f,
                "(not in this checkout yet: {}; update rocm-patchkit)",
                recipes.join(", ")
            ),
        }
    }
}

/// A build command of a checkout; the installed command sends the user to one.
fn build_command(inv: &Invocation, command: &str, recipe: &str) -> String {
    if inv.checkout {
        format!("cargo xtask {command} {recipe}")
    } else {
        format!("in a rocm-patchkit checkout: cargo xtask {command} {recipe}")
    }
}

/// The rewrite of one library folder, as root (`sudo` and the binary's
/// path) when it holds a package's files.
fn rewrite_command(inv: &Invocation, dir: &str, first: bool, system: bool) -> String {
    let or = if first {
        "or now, the hipBLASLt side without a reboot: "
    } else {
        "  and: "
    };
    if system {
        format!(
            "{or}{} rewrite-hipblaslt {dir} (as root: a package's files, which its next upgrade puts back)",
            inv.as_root
        )
    } else {
        format!("{or}{} rewrite-hipblaslt {dir}", inv.program)
    }
}

/// A step as printed from a checkout whose binary's path is not known
/// (`cargo xtask`, as root `sudo cargo xtask`): what tests and logs show;
/// the report renders with the [`Invocation`] it is given.
impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &Invocation::checkout(None))
    }
}

/// The fixes of `fault` that apply to this machine.
pub fn fixes(fault: &Fault, m: &Machine) -> Vec<Step> {
    let kernel = m
        .kernel_release
        .as_deref()
        .and_then(KernelVersion::from_release);
    let rocm = m.rocm_version.as_deref().and_then(Version::parse_prefix);
    let release = m.kernel_release.as_deref().unwrap_or("");
    let mut steps = Vec::new();
    for fix in &fault.fixes {
        let kernel_ok = match (&fix.kernel, kernel) {
            (None, _) => true,
            (Some(range), Some(kv)) => range.matches(kv),
            (Some(_), None) => false,
        };
        let rocm_ok = match (&fix.rocm, &rocm) {
            (None, _) => true,
            (Some(range), Some(v)) => range.matches(v),
            (Some(_), None) => false,
        };
        let release_ok = fix
            .release_contains
            .as_deref()
            .is_none_or(|s| release.contains(s));
        if !(kernel_ok && rocm_ok && release_ok) {
            continue;
        }
        steps.push(Step::Build {
            build: fix.build,
            recipe: fix.recipe.clone(),
            or: !steps.is_empty(),
        });
        steps.push(Step::Install {
            build: fix.build,
            recipe: fix.recipe.clone(),
        });
        steps.extend(fix.note.clone().map(Step::FixNote));
    }
    steps
}

/// Fixes, then the stop-gap or the workaround.
pub fn fixes_then_workaround(fault: &Fault, m: &Machine) -> Vec<Step> {
    let mut next = fixes(fault, m);
    let kernel = m
        .kernel_release
        .as_deref()
        .and_then(KernelVersion::from_release);
    if let (Some(facts), Some(kv)) = (&fault.kernel, kernel) {
        if facts.retired.as_ref().is_some_and(|r| r.matches(kv)) {
            let why = facts.retired_why.clone().unwrap_or_default();
            next.insert(0, Step::Retired { why });
        }
    }
    let text = fault.workaround.clone();
    if let Some(stopgap) = &fault.stopgap {
        next.push(Step::Stopgap {
            recipe: stopgap.clone(),
        });
        next.push(Step::Workaround { text, or: true });
    } else {
        next.push(Step::Workaround { text, or: false });
    }
    next
}
