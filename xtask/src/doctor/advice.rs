//! A verdict's next steps rendered for the person who runs them: each
//! [`NextStep`] as an [`Advice`] (what and why, the commands as data, the cost),
//! its commands starting with the program the user ran ([`Invocation`]) and
//! the machine's distribution's own tools ([`OsRelease`]); every command
//! runnable as printed. The text report and `--json` both print these.

use std::fmt;

use serde::Serialize;

use super::os_release::{self, Command, Family, OsRelease};
use super::steps::{NextStep, LIBRARY_PATH};
use crate::input::invocation::Invocation;
use crate::input::knowledge::Build;

/// One next step as data: `action` says what kind, `role` where it stands
/// (`do`: the recommended one, `or`: an alternative, `then`/`and`: goes
/// with the step before it, `keep`, `note`), `commands` run in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Advice {
    pub(crate) action: &'static str,
    pub(crate) role: &'static str,
    pub(crate) text: String,
    pub(crate) commands: Vec<Command>,
    pub(crate) cost: Option<String>,
}

/// What the rendering needs besides the step.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) inv: &'a Invocation,
    pub(crate) os: Option<&'a OsRelease>,
}

/// The steps of one verdict, each with its role: the first step to act on
/// is `do`, the later ones `or`.
pub(crate) fn advise(steps: &[NextStep], cx: Context<'_>) -> Vec<Advice> {
    let mut acted = false;
    steps
        .iter()
        .filter_map(|step| {
            let mut a = one(step, cx)?;
            if a.role == "or" && !acted {
                a.role = "do";
            }
            acted |= a.role == "do";
            Some(a)
        })
        .collect()
}

/// One step as advice, its role `or` when it is an action; none for a
/// build of a kind that is no fix (the knowledge file refuses those).
fn one(step: &NextStep, cx: Context<'_>) -> Option<Advice> {
    let advice = |action, role, text: String, commands, cost: Option<&str>| Advice {
        action,
        role,
        text,
        commands,
        cost: cost.map(str::to_owned),
    };
    Some(match step {
        NextStep::Build { build, recipe } => return build_step(cx, *build, recipe),
        NextStep::Install { build, recipe } => return install_step(cx, *build, recipe),
        NextStep::UpgradeKernel { .. } => upgrade_kernel(step, cx),
        NextStep::Rewrite { dir, first, system } => rewrite(cx, dir, *first, *system),
        NextStep::FixNote(note) => advice("note", "note", note.clone(), vec![], None),
        NextStep::Stopgap { recipe } => advice(
            "stop-gap",
            "or",
            format!("stop-gap: a package that boots with amdgpu.cwsr_enable=0, built in a rocm-patchkit checkout, then installed from its dist/{recipe}/ like the fix"),
            vec![program(&Invocation::checkout(None), false, &["build-config", recipe])],
            Some("a reboot; no compute preemption and no GPU debugger while it is set"),
        ),
        NextStep::Workaround { text } => advice("workaround", "or", text.clone(), vec![], None),
        NextStep::Retired { why } => advice(
            "note",
            "note",
            format!("no package of ours for this kernel: {why}"),
            vec![],
            None,
        ),
        NextStep::ExportLibraryPath { prefix } => advice(
            "use-library",
            "or",
            format!("point this environment at our patched hipBLASLt in {prefix}"),
            vec![Command {
                command: "export".to_owned(),
                args: vec![format!(
                    "{LIBRARY_PATH}={prefix}/lib${{{LIBRARY_PATH}:+:${LIBRARY_PATH}}}"
                )],
            }],
            None,
        ),
        _ => keep_or_note(step),
    })
}

/// The steps that keep a mitigation or say something: no command.
fn keep_or_note(step: &NextStep) -> Advice {
    let (action, role, text) = match step {
        NextStep::KeepLibraryPath { prefix } => ("keep", "keep", format!("keep {LIBRARY_PATH}={prefix}/lib for every program that uses hipBLASLt")),
        NextStep::KeepVariables => ("keep", "keep", "keep these variables set for every program that uses it".to_owned()),
        NextStep::KeepHipblaslt { rewritten: true } => ("keep", "keep", "the rewritten hipBLASLt stays fixed until its package or wheel is upgraded or reinstalled: run doctor again then (docs/rewrite-hipblaslt.md)".to_owned()),
        NextStep::KeepHipblaslt { rewritten: false } => ("keep", "keep", "keep PyTorch loading our patched hipBLASLt (docs/build-hipblaslt.md, \"Using the patched hipBLASLt with PyTorch\")".to_owned()),
        NextStep::ForTheFixItself => ("note", "note", "for the fix itself (compute preemption back):".to_owned()),
        NextStep::DropCwsrOff => ("drop-stop-gap", "or", "amdgpu.cwsr_enable=0 is no longer needed for this fault: drop it to get compute preemption and the GPU debugger back".to_owned()),
        NextStep::NotInCheckout(recipes) => ("note", "note", format!("not in this checkout yet: {}; update rocm-patchkit", recipes.join(", "))),
        other => ("note", "note", format!("{other:?}")),
    };
    Advice {
        action,
        role,
        text,
        commands: Vec::new(),
        cost: None,
    }
}

/// The words that run this tool: `cargo xtask`, the installed command, or
/// as root `sudo` and the binary's absolute path; then `args`.
fn program(inv: &Invocation, root: bool, args: &[&str]) -> Command {
    let mut words: Vec<String> = match (root, inv.as_root.strip_prefix("sudo ")) {
        (true, Some(exe)) => vec!["sudo".to_owned(), exe.to_owned()],
        _ if inv.checkout => vec!["cargo".to_owned(), "xtask".to_owned()],
        _ => vec![inv.program.clone()],
    };
    words.extend(args.iter().map(|a| (*a).to_owned()));
    let command = words.remove(0);
    Command {
        command,
        args: words,
    }
}

fn build_step(cx: Context<'_>, build: Build, recipe: &str) -> Option<Advice> {
    let fix = build.doctor_fix()?;
    let place = match cx.inv.checkout {
        true => "",
        false => " (in a rocm-patchkit checkout: git clone it, then run this in it)",
    };
    Some(Advice {
        action: "build",
        role: "or",
        text: format!("{}{place}", fix.what),
        commands: vec![program(
            &Invocation::checkout(None),
            false,
            &[build.build_command(), recipe],
        )],
        cost: Some(fix.cost.to_owned()),
    })
}

fn install_step(cx: Context<'_>, build: Build, recipe: &str) -> Option<Advice> {
    let dir = format!("dist/{recipe}");
    let family = cx.os.and_then(OsRelease::family);
    let after = build.doctor_fix()?.after_install;
    let (text, commands) = match family {
        Some(f) => (
            format!("install it from the checkout's {dir}/, {after}"),
            vec![os_release::install_package(f, &dir)],
        ),
        None => (
            format!(
                "install the package for your distribution from the checkout's {dir}/ (sudo apt install ./{dir}/*.deb, sudo dnf install ./{dir}/*.noarch.rpm or sudo pacman -U ./{dir}/*.pkg.tar.zst), {after}"
            ),
            Vec::new(),
        ),
    };
    Some(Advice {
        action: "install",
        role: "then",
        text,
        commands,
        cost: None,
    })
}

fn upgrade_kernel(step: &NextStep, cx: Context<'_>) -> Advice {
    let NextStep::UpgradeKernel { to, in_series, lts } = step else {
        return keep_or_note(step);
    };
    let family = cx.os.and_then(OsRelease::family);
    let os = cx.os.map(OsRelease::describe);
    let kfd = match to.0 < 7 {
        true => "; Linux 7.0 and later also report KFD ABI 1.20, which lets newer hipBLASLt use the fast path again",
        false => "",
    };
    let version = format!("{}.{}.{}", to.0, to.1, to.2);
    let (text, commands, cost) = if *in_series {
        let commands = family
            .map(|f| os_release::kernel_upgrade(f, *lts))
            .unwrap_or_default();
        let whose = match (&os, commands.is_empty()) {
            (Some(os), false) => format!("{os}'s kernel"),
            _ => "the kernel with your distribution's package manager".to_owned(),
        };
        let text = format!(
            "upgrade {whose} to {version} or later (the fix is in this series' stable releases)"
        );
        (text, commands, "a reboot")
    } else {
        let commands = series_move(cx.os, family);
        let how = match (&os, commands.is_empty()) {
            (Some(os), false) => format!(", which {os}'s kernel packages bring"),
            (Some(os), true) => format!(" ({os}: no package of such a kernel known to doctor)"),
            (None, _) => {
                " (your distribution's kernel packages, or a newer release of it)".to_owned()
            }
        };
        let text =
            format!("move to a kernel of a series with the fix: {version} or later{how}{kfd}");
        (text, commands, "a reboot into a new kernel series")
    };
    Advice {
        action: "upgrade-kernel",
        role: "or",
        text,
        commands,
        cost: Some(cost.to_owned()),
    }
}

/// The distribution's way to a kernel of a later series, where doctor
/// knows one: the kernel packages of Fedora, Arch and Tumbleweed follow
/// new series; Debian 13's trixie-backports serves 6.18.
fn series_move(os: Option<&OsRelease>, family: Option<Family>) -> Vec<Command> {
    let (Some(os), Some(family)) = (os, family) else {
        return Vec::new();
    };
    if os.moves_series() {
        return os_release::kernel_upgrade(family, false);
    }
    if os.id == "debian" && os.version_codename.as_deref() == Some("trixie") {
        return vec![
            Command::new("sudo", &["apt", "update"]),
            Command::new(
                "sudo",
                &[
                    "apt",
                    "install",
                    "-t",
                    "trixie-backports",
                    "linux-image-amd64",
                ],
            ),
        ];
    }
    Vec::new()
}

fn rewrite(cx: Context<'_>, dir: &str, first: bool, system: bool) -> Advice {
    let text = match (first, system) {
        (true, false) => format!("now, without a reboot: switch expert scheduling off in the kernels of the hipBLASLt in {dir}"),
        (true, true) => format!("now, without a reboot: switch expert scheduling off in the kernels of the hipBLASLt in {dir} (as root: a package's files, which its next upgrade puts back)"),
        (false, false) => format!("and the hipBLASLt in {dir}"),
        (false, true) => format!("and the hipBLASLt in {dir} (as root: a package's files)"),
    };
    Advice {
        action: "rewrite-hipblaslt",
        role: if first { "or" } else { "and" },
        text,
        commands: vec![program(cx.inv, system, &["rewrite-hipblaslt", dir])],
        cost: first.then(|| "none now; undone by the library's next upgrade or reinstall (run doctor again then), --undo restores it".to_owned()),
    }
}

impl Command {
    /// The line as typed: `export` keeps its shell expansion unquoted.
    pub(crate) fn shown(&self) -> String {
        match self.command.as_str() {
            "export" => format!("export {}", self.args.join(" ")),
            _ => self.line(),
        }
    }
}

/// A step as printed from a checkout for an unknown distribution: its
/// text, then its commands (what unit tests and logs show).
impl fmt::Display for NextStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inv = Invocation::checkout(None);
        let cx = Context {
            inv: &inv,
            os: None,
        };
        let Some(a) = one(self, cx) else {
            return Ok(());
        };
        f.write_str(&a.text)?;
        let lines: Vec<String> = a.commands.iter().map(Command::shown).collect();
        if !lines.is_empty() {
            write!(f, ": {}", lines.join(" && "))?;
        }
        Ok(())
    }
}
