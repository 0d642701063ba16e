//! `cargo xtask doctor [--root DIR] [--json]`: which known faults affect
//! this machine, why, and the next command.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::doctor;
use crate::gpu::codeobj;
use crate::input::knowledge::Knowledge;
use crate::input::recipe::{self, Recipe};
use crate::input::workspace::Workspace;
use crate::shared::error::Error;
use crate::shared::report;
use crate::shared::settings::Environment;

/// Which known faults affect this machine, why, and the fix to build
///
/// Reads the machine: GPU targets from the KFD topology
/// (/sys/class/kfd/kfd/topology/nodes/*/properties), the kernel release,
/// /proc/cmdline and amdgpu's cwsr_enable, the KFD ABI (from /dev/kfd when
/// --root is /, else judged from the kernel version), the ROCm version
/// (/opt/rocm/.info/version), hipBLASLt's version, MIOpen, the loaded amdgpu
/// and our DKMS packages (/var/lib/dkms, /sys/module/amdgpu/version).
///
/// For the RDNA4 trap-handler fault it reads the fix from the module itself:
/// the amdgpu modprobe would load for the running kernel (modules.dep, else
/// updates/ before extra/ before kernel/; .ko, .ko.xz, .ko.zst) and the gfx12
/// CWSR trap handler in it. What the module carries wins over the kernel
/// version; a module it cannot read falls back to the version, saying why.
/// It also says whether Secure Boot is on and whether DKMS's signing key
/// (/var/lib/dkms/mok.pub) is enrolled, and what to do when it is not.
/// It finds every hipBLASLt a program can load: /opt/rocm*/lib,
/// /usr/lib/<triplet>, ours in /opt/rocm-patchkit, and the copies PyTorch
/// wheels carry (site-packages/torch/lib) in $VIRTUAL_ENV, $CONDA_PREFIX, the
/// user's and the system's site-packages and every --python DIR. Each is
/// judged by its gfx12 kernels (hipblaslt/library/*.co, *.hsaco): whether a
/// code object switches expert scheduling on. "Off" verdicts are cached by
/// path, size and mtime in $XDG_CACHE_HOME/rocm-patchkit (or ~/.cache/...).
///
/// It reads the comgr the machine has (the dpkg status, rpm, /opt/rocm/lib)
/// and rocBLAS and hipSPARSELt with gfx12 kernels (judged like hipBLASLt).
/// It judges every knob set in the environment, /etc/modprobe.d, the kernel
/// command line and /sys/module/amdgpu/parameters from knowledge/knobs.toml:
/// fixes, mitigates, unconfirmed, diagnosis only, no effect here, harmful
/// here, or no known effect. With --pid it judges a running program instead:
/// the libraries it mapped, its environment and its GPU nodes.
///
/// For each fault of knowledge/faults.toml, it says affected, not affected,
/// mitigated, fixed or cannot tell, why, and the next command (the recipe to
/// build, or the stop-gap), then lists what it could not read. It never needs
/// root and never changes the system.
///
/// It lists the GPU faults of the crash the user had: those of the --log
/// files (a saved dmesg or journalctl -k, a job's stderr, a HIP log), else
/// of this boot's kernel log (journalctl -k -b, else /dev/kmsg; below a
/// --root other than /, that machine's /var/log/kern.log), each with its
/// time, process, address and UTCL2 client, and the known fault it points
/// to. It checks that /dev/kfd and the render nodes are usable (for --user
/// NAME, or for you), and lists the firmware versions amdgpu publishes.
///
/// The text report is wrapped to COLUMNS, else the terminal's width, else
/// 80 columns, and coloured on a terminal (--color, NO_COLOR); with -q it
/// prints only the verdicts: one line per known fault and the closing line.
///
/// Exit status: 0 when no known fault affects the machine unmitigated
/// (including "cannot tell" and informational findings), 3 when at least one
/// does, 1 when doctor itself failed (e.g. no knowledge file), 2 for bad
/// arguments or an invalid knowledge file.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the machine below this folder instead of / (a copy or a fake tree)
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub(crate) root: PathBuf,
    /// Print the report as JSON (keys sorted; docs/doctor-json.md)
    #[arg(long, conflicts_with = "report")]
    pub(crate) json: bool,
    /// Print the report as a Markdown block to paste into a bug report:
    /// machine, kernel and module, libraries, knobs, verdicts, firmware,
    /// the GPU faults of the logs; home folders shown as ~ and your user
    /// name as <user>, no environment variable doctor does not know
    #[arg(long)]
    pub(crate) report: bool,
    /// Also look for PyTorch's hipBLASLt in this Python environment (a venv,
    /// conda env or site-packages folder; repeatable; taken below --root)
    #[arg(long, value_name = "DIR")]
    pub(crate) python: Vec<PathBuf>,
    /// Read every kernel file again instead of trusting cached "off" verdicts
    #[arg(long)]
    pub(crate) no_cache: bool,
    /// Judge this running program instead of what could be loaded: the
    /// hipBLASLt, HIP, comgr and rocBLAS it mapped (/proc/PID/maps), its
    /// environment (/proc/PID/environ) and its GPU nodes (below --root)
    #[arg(long, value_name = "PID")]
    pub(crate) pid: Option<u32>,
    /// Judge access to /dev/kfd and the render nodes for this user of the
    /// machine (its /etc/passwd and /etc/group) instead of for you
    #[arg(long, value_name = "NAME")]
    pub(crate) user: Option<String>,
    /// Read the GPU faults of these saved logs (dmesg, journalctl -k, a
    /// job's stderr, an AMD_LOG_LEVEL=3 HIP log) instead of this boot's
    /// kernel log; repeatable (host paths, not taken below --root)
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub(crate) log: Vec<PathBuf>,
    /// Colour the text report: auto (on a terminal, unless NO_COLOR is
    /// set), always or never
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub(crate) color: Color,
}

/// When the text report is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Color {
    Auto,
    Always,
    Never,
}

/// Prints the report; a known fault affecting the machine unmitigated ends
/// in [`Error::FaultsAffect`] (exit status 3).
pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<(), Error> {
    let report = diagnose(ws, args)?;
    if args.json {
        report::out_json(&report.to_json(&ws.invocation)?);
    } else if args.report {
        let root = std::path::absolute(&args.root).unwrap_or_else(|_| args.root.clone());
        let private = doctor::bug_report::Private::read(&root, &ws.settings.env);
        report::out(&report.to_markdown(&ws.invocation, &private));
    } else if ws.reporter.mode() == report::Mode::Quiet {
        report::out_styled(&report.to_quiet_text(layout(args.color, &ws.settings.env)));
    } else {
        report::out_styled(&report.to_text(&ws.invocation, layout(args.color, &ws.settings.env)));
    }
    if !report.affected().is_empty() {
        std::io::stdout().flush().context("writing the report")?;
        return Err(Error::FaultsAffect);
    }
    Ok(())
}

/// The text report's width and colour: `COLUMNS` when set to a number,
/// else the terminal's width when stdout is one, else
/// [`doctor::Layout::DEFAULT_WIDTH`]; colour with `--color always`, or
/// `auto` when stdout is a terminal, `NO_COLOR` is unset or empty and
/// `TERM` is not `dumb`.
fn layout(color: Color, env: &Environment) -> doctor::Layout {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let columns = env
        .get("COLUMNS")
        .and_then(|c| c.to_str()?.trim().parse().ok());
    let width = columns
        .or_else(|| tty.then(terminal_width).flatten())
        .unwrap_or(doctor::Layout::DEFAULT_WIDTH);
    let no_color = env.non_empty("NO_COLOR").is_some();
    let dumb = env.get("TERM").is_some_and(|t| t == "dumb");
    let colour = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => tty && !no_color && !dumb,
    };
    doctor::Layout {
        colour,
        ..doctor::Layout::plain(width)
    }
}

/// The width of the terminal on stdout (`TIOCGWINSZ`), when it tells one.
fn terminal_width() -> Option<usize> {
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we own.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Reads the machine below `--root` (or the process of `--pid`) and judges
/// every known fault on it.
fn diagnose(ws: &Workspace, args: &Args) -> Result<doctor::Report> {
    let knowledge = Knowledge::read(&ws.knowledge)?;
    let root = std::path::absolute(&args.root)
        .with_context(|| format!("resolving --root {}", args.root.display()))?;
    anyhow::ensure!(
        root.is_dir(),
        crate::shared::diag::UsageError(format!(
            "--root {} is not a folder: give / or the root of a machine tree",
            args.root.display()
        ))
    );
    let (recipes, ours) = if ws.invocation.checkout {
        checkout_recipes(ws)
    } else {
        installed_recipes(&knowledge)
    };
    let mut machine = doctor::probe(&root, &knowledge, &ours, &ws.settings.env);
    let mut cache = match codeobj::default_cache_path(&ws.settings.env) {
        Some(path) if !args.no_cache => codeobj::VerdictCache::load(path),
        _ => codeobj::VerdictCache::in_memory(),
    };
    for python in &args.python {
        if let Some(unread) = doctor::hipblaslt::unreadable_python(&root, python) {
            machine.unread.push(unread);
        }
    }
    let places = places(ws, &root, &args.python);
    machine.comgr = doctor::comgr::find(&root, &places);
    let env = match args.pid {
        Some(pid) => {
            let (process, env) = doctor::pid::read(&root, pid)?;
            let names = doctor::env_names(&knowledge);
            doctor::probe::apply_process(&process, &env, &names, &mut machine, &places, &mut cache);
            machine.process = Some(process);
            env
        }
        None => {
            machine.hipblaslt_libraries = doctor::hipblaslt::find(&root, &places, &mut cache);
            machine.tensile_libraries = doctor::tensile::find(&root, &places, &mut cache);
            doctor::environment(&ws.settings.env)
        }
    };
    let knobs = doctor::knobs::read(&root, &env, &knowledge.knobs);
    machine.knob_settings = knobs.settings;
    machine.knob_notes = knobs.notes;
    machine.unread.extend(knobs.unread);
    let problems = unjudged_library_problems(&root, &machine);
    machine.unread.extend(problems);
    if let Err(err) = cache.save() {
        ws.reporter.warn(format!("{err:#}"));
    }
    machine.firmware = doctor::firmware::read(&root, &mut machine.unread);
    let who = match (&args.user, root == Path::new("/")) {
        (Some(name), _) => doctor::access::Who::User(name),
        (None, true) => doctor::access::Who::You,
        (None, false) => doctor::access::Who::Nobody,
    };
    let amd_gpu = machine.gpus.as_ref().is_some_and(|g| !g.is_empty()) || machine.amdgpu.is_some();
    machine.access = doctor::access::read(&root, who, amd_gpu);
    let (scan, unread) = doctor::log::read(&log_settings(&root, args, &knowledge));
    machine.unread.extend(unread);
    Ok(doctor::diagnose(&knowledge, machine, &recipes, scan))
}

/// The logs to read: `--log` files, else the machine's kernel log.
fn log_settings<'a>(
    root: &'a Path,
    args: &'a Args,
    knowledge: &Knowledge,
) -> doctor::log::Settings<'a> {
    doctor::log::Settings {
        root,
        files: &args.log,
        patterns: knowledge
            .faults
            .iter()
            .flat_map(|f| f.log.kernels.iter().cloned())
            .collect(),
        journalctl: std::ffi::OsStr::new("journalctl"),
    }
}

/// The DKMS packages our recipes build (`[package] name` of every recipe
/// of kind dkms), which the installed command, without a checkout, calls
/// ours; a test holds this list to recipes/.
pub const DKMS_PACKAGES: &[&str] = &["amdgpu-debian", "amdgpu-expert-sched"];

/// Without a checkout: the recipes the knowledge file names (a next step
/// then sends the user to a checkout to build them) and [`DKMS_PACKAGES`].
fn installed_recipes(knowledge: &Knowledge) -> (BTreeSet<String>, BTreeSet<String>) {
    let ours = DKMS_PACKAGES.iter().map(|p| (*p).to_owned()).collect();
    (knowledge.recipes(), ours)
}

/// Where hipBLASLt is looked for on the machine below `root`: the Python
/// environment this binary is installed in first (a wheel's script; with
/// `--root`, only when the binary lies below it), then `--python`,
/// `$VIRTUAL_ENV`, `$CONDA_PREFIX` and the user's home.
pub(crate) fn places(ws: &Workspace, root: &Path, python: &[PathBuf]) -> doctor::hipblaslt::Places {
    let mut places = doctor::hipblaslt::Places::from_env(python, &ws.settings.env);
    let own = ws.invocation.python_env.as_deref().and_then(|env| {
        let below = env.strip_prefix(root).ok()?;
        Some(Path::new("/").join(below))
    });
    if let Some(env) = own {
        if !places.pythons.contains(&env) {
            places.pythons.insert(0, env);
        }
    }
    places
}

/// The recipes of this checkout, and the DKMS package names they build
/// (doctor calls those ours). A recipe it cannot read is named in a
/// warning: its package is then not known as ours.
fn checkout_recipes(ws: &Workspace) -> (BTreeSet<String>, BTreeSet<String>) {
    let names = recipe::list(&ws.root).unwrap_or_else(|err| {
        ws.reporter.warn(format!(
            "{err:#}: every recipe a next step names is taken as not in this checkout"
        ));
        Vec::new()
    });
    let mut ours = BTreeSet::new();
    for name in &names {
        match Recipe::load(&ws.root, name) {
            Ok(r) if r.kind.name().is_kernel_module() => {
                ours.insert(r.package.name.clone());
            }
            Ok(_) => {}
            Err(err) => ws.reporter.warn(format!(
                "recipe {name} could not be read, so its package is not known as ours: {err:#}"
            )),
        }
    }
    (names.into_iter().collect(), ours)
}

/// What kept a kernel library unjudged, listed with the rest unread.
fn unjudged_library_problems(
    root: &Path,
    machine: &doctor::Machine,
) -> Vec<doctor::fsread::Unread> {
    let kernel_libraries: BTreeSet<&str> = machine
        .hipblaslt_libraries
        .iter()
        .chain(&machine.tensile_libraries)
        .filter(|l| matches!(l.judgement, codeobj::Judgement::CannotTell { .. }))
        .map(|l| l.kernels.as_str())
        .collect();
    kernel_libraries
        .into_iter()
        .flat_map(|kernels| doctor::hipblaslt::kernel_library_problems(root, Path::new(kernels)))
        .collect()
}
