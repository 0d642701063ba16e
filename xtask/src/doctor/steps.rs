//! A verdict's next steps as values: what to run or do (which recipe or
//! folder, which kernel to move to) and what to keep or know, in the order
//! a person should try them: the cheapest that works first (a kernel
//! upgrade within the series, the no-reboot rewrite, a package of the fix),
//! then the alternatives with their cost. `advice.rs` renders each for the
//! program the user ran and the machine's distribution. Which steps a fault
//! offers on a machine is decided here, from the fixes of the knowledge
//! file.

use super::machine::Machine;
use crate::input::kernel::{KernelRange, KernelVersion};
use crate::input::knowledge::{Build, Fault, Version};

/// The environment variable that points programs at a patched hipBLASLt.
pub(crate) const LIBRARY_PATH: &str = "LD_LIBRARY_PATH";

/// One line of a verdict's next steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NextStep {
    /// `cargo xtask build-dkms|build-hipblaslt <recipe>`.
    Build { build: Build, recipe: String },
    /// Upgrade the kernel to `to` or later: within its series when
    /// `in_series` (the distribution's own upgrade brings it), else a move
    /// to another series; `lts` for Arch's `linux-lts`.
    UpgradeKernel {
        to: KernelVersion,
        in_series: bool,
        lts: bool,
    },
    /// Installing what [`NextStep::Build`] of `recipe` made.
    Install { build: Build, recipe: String },
    /// A fix's note, under it.
    FixNote(String),
    /// The stop-gap: `cargo xtask build-config <recipe>` and installing it.
    Stopgap { recipe: String },
    /// The fault's workaround (its text says its cost).
    Workaround { text: String },
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

impl NextStep {
    /// The recipe this step tells to build, if any.
    pub(crate) fn recipe(&self) -> Option<&str> {
        match self {
            NextStep::Build { recipe, .. } | NextStep::Stopgap { recipe } => Some(recipe),
            _ => None,
        }
    }
}

/// The fixes of `fault` that apply to this machine: a kernel upgrade
/// within the series first, then the packages of the fix.
pub(crate) fn fixes(fault: &Fault, m: &Machine) -> Vec<NextStep> {
    let mut steps = Vec::new();
    let upgrade = kernel_upgrade(fault, m);
    let in_series = matches!(
        upgrade,
        Some(NextStep::UpgradeKernel {
            in_series: true,
            ..
        })
    );
    steps.extend(upgrade.clone().filter(|_| in_series));
    steps.extend(packages(fault, m, Build::Dkms, in_series));
    steps.extend(upgrade.filter(|_| !in_series));
    steps.extend(packages(fault, m, Build::Hipblaslt, in_series));
    steps
}

/// The next steps of a fault that affects the machine, cheapest that works
/// first: our patched hipBLASLt to point at (`lead`), a kernel upgrade
/// within the series, the rewrite of the hipBLASLt found (`rewrites`: now,
/// no reboot), a kernel of a fixed series where the distribution brings
/// one, the package of the fix, the other packages; then the stop-gap and
/// the workaround.
pub(crate) fn affected(
    fault: &Fault,
    m: &Machine,
    lead: Vec<NextStep>,
    rewrites: Vec<NextStep>,
) -> Vec<NextStep> {
    let mut next = lead;
    next.extend(retired(fault, m));
    let upgrade = kernel_upgrade(fault, m);
    let in_series = matches!(
        upgrade,
        Some(NextStep::UpgradeKernel {
            in_series: true,
            ..
        })
    );
    let distro_kernel = m.os.as_ref().is_some_and(|os| os.moves_series());
    if in_series {
        next.extend(upgrade.clone());
    }
    next.extend(rewrites);
    if !in_series && distro_kernel {
        next.extend(upgrade.clone());
    }
    next.extend(packages(fault, m, Build::Dkms, in_series));
    if !in_series && !distro_kernel {
        next.extend(upgrade);
    }
    next.extend(packages(fault, m, Build::Hipblaslt, in_series));
    next.extend(stopgap_then_workaround(fault));
    next
}

/// Fixes, then the stop-gap or the workaround.
pub(crate) fn fixes_then_workaround(fault: &Fault, m: &Machine) -> Vec<NextStep> {
    let mut next: Vec<NextStep> = retired(fault, m).into_iter().collect();
    next.extend(fixes(fault, m));
    next.extend(stopgap_then_workaround(fault));
    next
}

/// The recipes of `fault` of this `build` that apply to the machine, each
/// with its install step and note; a note that says to upgrade the kernel
/// is left out when that step is there already (`upgrade_said`).
fn packages(fault: &Fault, m: &Machine, build: Build, upgrade_said: bool) -> Vec<NextStep> {
    let kernel = m
        .kernel_release
        .as_deref()
        .and_then(KernelVersion::from_release);
    let rocm = m.rocm_version.as_deref().and_then(Version::parse_prefix);
    let release = m.kernel_release.as_deref().unwrap_or("");
    let mut steps = Vec::new();
    for fix in fault.fixes.iter().filter(|f| f.build == build) {
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
        steps.push(NextStep::Build {
            build: fix.build,
            recipe: fix.recipe.clone(),
        });
        steps.push(NextStep::Install {
            build: fix.build,
            recipe: fix.recipe.clone(),
        });
        let note = fix.note.clone();
        let said = |n: &String| upgrade_said && n.contains("upgrade the kernel");
        steps.extend(note.filter(|n| !said(n)).map(NextStep::FixNote));
    }
    steps
}

/// The kernel a machine with an affected kernel moves to: the first
/// release of its own series the fault's `fixed` range holds, else the
/// first of a later series.
pub(crate) fn kernel_upgrade(fault: &Fault, m: &Machine) -> Option<NextStep> {
    let fixed = fault.kernel.as_ref()?.fixed.as_ref()?;
    let release = m.kernel_release.as_deref()?;
    let kv = KernelVersion::from_release(release)?;
    if fixed.matches(kv) {
        return None;
    }
    let lts = release.ends_with("-lts");
    let to = first_fixed(fixed, kv.0, kv.1, kv.2 + 1).map(|to| (to, true));
    let later = || {
        let minors = (kv.1 + 1..40).map(|minor| (kv.0, minor));
        let next_major = (0..40).map(|minor| (kv.0 + 1, minor));
        minors
            .chain(next_major)
            .find_map(|(major, minor)| first_fixed(fixed, major, minor, 0))
            .map(|to| (to, false))
    };
    let (to, in_series) = to.or_else(later)?;
    Some(NextStep::UpgradeKernel { to, in_series, lts })
}

/// The first release `major.minor.patch` or later of that series in `fixed`.
fn first_fixed(fixed: &KernelRange, major: u32, minor: u32, from: u32) -> Option<KernelVersion> {
    (from..400)
        .map(|patch| KernelVersion(major, minor, patch))
        .find(|v| fixed.matches(*v))
}

/// A retired kernel's note: no recipe of ours for it, and why.
fn retired(fault: &Fault, m: &Machine) -> Option<NextStep> {
    let kv = m
        .kernel_release
        .as_deref()
        .and_then(KernelVersion::from_release)?;
    let facts = fault.kernel.as_ref()?;
    let retired = facts.retired.as_ref()?.matches(kv);
    retired.then(|| NextStep::Retired {
        why: facts.retired_why.clone().unwrap_or_default(),
    })
}

/// The stop-gap recipe and the workaround, or the workaround alone.
fn stopgap_then_workaround(fault: &Fault) -> Vec<NextStep> {
    let mut next = Vec::new();
    if let Some(stopgap) = &fault.stopgap {
        next.push(NextStep::Stopgap {
            recipe: stopgap.clone(),
        });
    }
    next.push(NextStep::Workaround {
        text: fault.workaround.clone(),
    });
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cwsr() -> Fault {
        let text = include_str!("../../../knowledge/faults.toml");
        let k = crate::input::knowledge::parse(std::path::Path::new("faults.toml"), text).unwrap();
        k.faults
            .into_iter()
            .find(|f| f.id == "cwsr-expert-sched")
            .unwrap()
    }

    fn upgrade(release: &str) -> Option<NextStep> {
        let m = Machine {
            kernel_release: Some(release.to_owned()),
            ..Machine::default()
        };
        kernel_upgrade(&cwsr(), &m)
    }

    #[test]
    fn the_kernel_to_move_to_is_the_first_fixed_release_of_the_series_or_a_later_one() {
        let step = |major, minor, patch, in_series, lts| {
            Some(NextStep::UpgradeKernel {
                to: KernelVersion(major, minor, patch),
                in_series,
                lts,
            })
        };
        assert_eq!(upgrade("6.12.48-1-lts"), step(6, 12, 64, true, true));
        assert_eq!(upgrade("6.18.2-arch1-1"), step(6, 18, 4, true, false));
        assert_eq!(upgrade("6.14.0-36-generic"), step(6, 18, 4, false, false));
        assert_eq!(upgrade("6.17.13+deb13-amd64"), step(6, 18, 4, false, false));
        assert_eq!(upgrade("6.11.11"), step(6, 12, 64, false, false));
        assert_eq!(upgrade("6.12.64"), None);
        assert_eq!(upgrade("7.0.1"), None);
    }
}
