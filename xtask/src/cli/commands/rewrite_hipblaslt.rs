//! `cargo xtask rewrite-hipblaslt [PATH...] [--python DIR] [--all] [--check]
//! [--undo]`: expert scheduling rewritten off in an installed hipBLASLt's
//! gfx12 kernel files, in place (the work is [`crate::gpu::inplace`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::doctor::hipblaslt as found;
use crate::gpu::codeobj;
use crate::gpu::inplace::{self, comgr, Options};
use crate::input::workspace::Workspace;
use crate::shared::report::human_size;

/// Rewrite an installed hipBLASLt's gfx12 kernels with expert scheduling off, in place
///
/// For the hipBLASLt side of the RDNA4 expert-scheduling fault, now,
/// without a toolchain or a reboot. In every gfx12 kernel file (*.co,
/// *.hsaco) that switches expert scheduling on (`s_setreg_imm32_b32
/// hwreg(26, 0, 2), 2`), the 2 becomes 0 and nothing else changes; the
/// bundle is rebuilt with its sizes and hash. Each file is replaced
/// atomically; the original is kept in .patchkit/ beside the kernels, with a
/// record (sizes, sha256 before and after, sites) that --undo uses to put
/// every byte back. A file that cannot be read leaves its whole library
/// unchanged. A run that is killed leaves each file original or rewritten;
/// run it again to finish.
///
/// Which library: the folder holding libhipblaslt.so (a PyTorch wheel's
/// site-packages/torch/lib, /opt/rocm/lib, /usr/lib/x86_64-linux-gnu), or
/// its hipblaslt/library kernel folder; --python DIR for the PyTorch wheel
/// (or TheRock's rocm-sdk wheel, _rocm_sdk_libraries*/lib) of a venv or
/// conda env; --all for every affected hipBLASLt doctor finds.
///
/// A venv or a folder of yours needs no root. A system library does; its
/// package manager puts the original files back at the next upgrade (doctor
/// then says affected again). It also removes the entries of this user's
/// comgr cache (~/.cache/comgr, $AMD_COMGR_CACHE_DIR, and under sudo the
/// invoking user's) that hold kernels with
/// expert scheduling on, so no program is served the old code.
#[derive(Debug, clap::Args)]
#[command(after_long_help = examples("cargo xtask"))]
pub struct Args {
    /// A folder holding libhipblaslt.so, or its hipblaslt/library kernel folder
    #[arg(value_name = "PATH")]
    pub(crate) paths: Vec<PathBuf>,
    /// The PyTorch or TheRock wheel of this Python environment (a venv, conda env or
    /// site-packages folder; repeatable), as doctor takes it
    #[arg(long, value_name = "DIR")]
    pub(crate) python: Vec<PathBuf>,
    /// Every hipBLASLt doctor finds that switches expert scheduling on (with
    /// --undo: every one rewritten in place)
    #[arg(long)]
    pub(crate) all: bool,
    /// Say what would change and change nothing
    #[arg(long)]
    pub(crate) check: bool,
    /// Put back the original kernel files of a rewritten library, byte for
    /// byte; refuses, naming it, when a file changed since the rewrite
    #[arg(long)]
    pub(crate) undo: bool,
    /// Threads reading and rewriting kernel files [default: the CPUs]
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Rewrite gated kernel files too: those switch expert scheduling on
    /// only when the kernel reports KFD ABI 1.20 (the trap-handler fix in),
    /// and are left alone without it
    #[arg(long)]
    pub(crate) force: bool,
}

/// The examples of `--help`, for the program the user runs (`cargo xtask`,
/// `rocm-patchkit`).
pub(crate) fn examples(program: &str) -> String {
    let root = if program == "cargo xtask" {
        "sudo target/debug/xtask".to_owned()
    } else {
        format!("sudo \"$(command -v {program})\"")
    };
    let rows = [
        (
            format!("{program} doctor --python ~/venv"),
            "what is affected, and the next command",
        ),
        (
            format!("{program} rewrite-hipblaslt --python ~/venv --check"),
            "what would change",
        ),
        (
            format!("{program} rewrite-hipblaslt --python ~/venv"),
            "the wheel's kernels rewritten",
        ),
        (
            format!("{program} rewrite-hipblaslt --python ~/venv --undo"),
            "the original kernels back",
        ),
        (
            format!("{root} rewrite-hipblaslt /opt/rocm/lib"),
            "a system library (root)",
        ),
    ];
    let width = rows.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut out = "Examples:".to_owned();
    for (command, what) in rows {
        out.push_str(&format!("\n  {command:<width$}  {what}"));
    }
    out
}

/// The kernel library folder a user named: `PATH/hipblaslt/library` when
/// there is one, else `PATH` itself when it holds kernel files.
fn kernels_of(path: &Path) -> Result<PathBuf> {
    let below = path.join("hipblaslt/library");
    let dir = if below.is_dir() {
        below
    } else {
        path.to_path_buf()
    };
    let has_kernels = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", path.display()))?
        .flatten()
        .any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".co") || n.ends_with(".hsaco")
        });
    anyhow::ensure!(
        has_kernels,
        crate::shared::diag::UsageError(format!(
            "{} holds neither hipblaslt/library nor kernel files (*.co, *.hsaco): name the folder holding libhipblaslt.so",
            path.display()
        ))
    );
    std::fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))
}

/// The kernel folders the arguments name, each once.
fn libraries(ws: &Workspace, args: &Args, threads: usize) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in &args.paths {
        out.push(kernels_of(path)?);
    }
    for env in &args.python {
        let env = std::path::absolute(env)
            .with_context(|| format!("resolving --python {}", env.display()))?;
        let libs = found::python_libs(Path::new("/"), &env);
        anyhow::ensure!(
            !libs.is_empty(),
            crate::shared::diag::UsageError(format!(
                "no PyTorch wheel nor TheRock wheel in {} (looked for site-packages/torch/lib and site-packages/_rocm_sdk_libraries*/lib)",
                env.display()
            ))
        );
        for lib in libs {
            out.push(kernels_of(&lib)?);
        }
    }
    if args.all {
        let mut places = super::doctor::places(ws, Path::new("/"), &args.python);
        places.threads = threads;
        let mut cache = match codeobj::default_cache_path(&ws.settings.env) {
            Some(path) => codeobj::VerdictCache::load(path),
            None => codeobj::VerdictCache::in_memory(),
        };
        for lib in found::find(Path::new("/"), &places, &mut cache) {
            let on = matches!(lib.judgement, codeobj::Judgement::On { .. })
                || (args.force && matches!(lib.judgement, codeobj::Judgement::Gated { .. }));
            let kernels = PathBuf::from(&lib.kernels);
            // any record, whatever it is: one not ours is refused by name
            let recorded = std::fs::symlink_metadata(kernels.join(inplace::record::DIR)).is_ok();
            if if args.undo { recorded } else { on } {
                out.push(std::fs::canonicalize(&kernels).unwrap_or(kernels));
            }
        }
    }
    anyhow::ensure!(
        !out.is_empty() || args.all,
        crate::shared::diag::UsageError(
            "name a library: a folder holding libhipblaslt.so, --python DIR or --all".to_owned()
        )
    );
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|k| seen.insert(k.clone()));
    Ok(out)
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let threads = crate::shared::par::threads(args.threads);
    let opts = Options {
        check: args.check,
        threads,
        force: args.force,
    };
    let libs = libraries(ws, args, threads)?;
    if libs.is_empty() {
        crate::shared::report::out_line(&format!(
            "no hipBLASLt found {} (doctor --python DIR reads other environments)",
            if args.undo {
                "rewritten in place"
            } else {
                "switches expert scheduling on"
            }
        ));
        return Ok(());
    }
    let mut failed = Vec::new();
    let mut rewrote = false;
    for kernels in &libs {
        let done = if args.undo {
            undo_one(ws, args, opts, kernels)
        } else {
            rewrite_one(ws, args, opts, kernels).map(|r| rewrote |= r)
        };
        if let Err(why) = done {
            failed.push(why);
        }
    }
    comgr_cache(args.check, args.undo, rewrote, ws);
    if !failed.is_empty() {
        anyhow::bail!("{}", failed.join("\n"));
    }
    Ok(())
}

/// `--undo` of one library, said; the failure's text when it fails.
fn undo_one(
    ws: &Workspace,
    args: &Args,
    opts: Options,
    kernels: &Path,
) -> std::result::Result<(), String> {
    let would = if args.check { "would be " } else { "" };
    match inplace::undo(kernels, opts, &ws.reporter) {
        Ok(u) if !u.had_record => crate::shared::report::out_line(&format!(
            "{}: no rewrite recorded, nothing to undo",
            kernels.display()
        )),
        Ok(u) => crate::shared::report::out_line(&format!(
            "{}: {} kernel files {would}restored ({} already original){}",
            kernels.display(),
            u.restored.len(),
            u.already,
            match (&u.kept, args.check) {
                (_, true) => String::new(),
                (None, false) => "; record and kept originals removed".to_owned(),
                (Some(dir), false) => format!(
                    "; record and kept originals removed, {} kept: it holds files this tool did not write",
                    dir.display()
                ),
            }
        )),
        Err(e) => return Err(format!("{e:#}")),
    }
    Ok(())
}

/// The rewrite (or with `--check`, its plan) of one library, said; whether
/// it rewrote (or would rewrite) a file, or the failure's text.
fn rewrite_one(
    ws: &Workspace,
    args: &Args,
    opts: Options,
    kernels: &Path,
) -> std::result::Result<bool, String> {
    let system = inplace::system_library(kernels);
    let summary = inplace::rewrite(kernels, opts, &ws.reporter).map_err(|e| format!("{e:#}"))?;
    for rel in &summary.changed_since {
        ws.reporter.warn(format!(
            "{}: changed since it was rewritten (a package upgrade?): read again",
            kernels.join(rel).display()
        ));
    }
    if !summary.unreadable.is_empty() {
        let names: Vec<String> = summary
            .unreadable
            .iter()
            .map(|(rel, why)| format!("{}: {why}", kernels.join(rel).display()))
            .collect();
        return Err(format!(
            "{} left unchanged: {} kernel file(s) could not be read:\n  {}\n\
             move such a file out of the folder (and tell us), then run again",
            kernels.display(),
            names.len(),
            names.join("\n  ")
        ));
    }
    if args.check {
        for (rel, sites) in &summary.rewritten {
            crate::shared::report::out_line(&format!(
                "would rewrite {} ({sites} sites)",
                kernels.join(rel).display()
            ));
        }
        if let Err(e) = inplace::ensure_writable(kernels) {
            if !summary.rewritten.is_empty() {
                crate::shared::report::out_line(&format!("  note: {e:#}"));
            }
        }
    }
    say_rewritten(ws, kernels, &summary, args.check, system);
    say_gated(kernels, &summary);
    Ok(!summary.rewritten.is_empty())
}

/// What the rewrite of one library did (or would do), and what follows.
fn say_rewritten(
    ws: &Workspace,
    kernels: &Path,
    summary: &inplace::Summary,
    check: bool,
    system: bool,
) {
    let would = if check { "would be " } else { "" };
    if summary.rewritten.is_empty() {
        crate::shared::report::out_line(&format!(
            "{}: nothing to rewrite ({} kernel files rewritten before, {} without a site)",
            kernels.display(),
            summary.already,
            summary.untouched
        ));
        return;
    }
    crate::shared::report::out_line(&format!(
        "{}: {} kernel files {would}rewritten ({} sites: expert scheduling 2 -> 0, {} -> {}), {} rewritten before, {} without a site",
        kernels.display(),
        summary.rewritten.len(),
        summary.sites(),
        human_size(summary.bytes_before),
        human_size(summary.bytes_after),
        summary.already,
        summary.untouched
    ));
    if !check {
        crate::shared::report::out_line(&format!(
            "  originals and record in {} (undo: {} rewrite-hipblaslt --undo {})",
            kernels.join(inplace::record::DIR).display(),
            if system {
                &ws.invocation.as_root
            } else {
                &ws.invocation.program
            },
            kernels.display()
        ));
    }
    if system {
        crate::shared::report::out_line(
            "  a system library: the package manager puts the original files back at its next upgrade or reinstall (doctor then says affected again; run this again)",
        );
    }
}

/// The kernel files left as they are because their expert scheduling is
/// gated on the kernel argument the host sets from the KFD's support.
fn say_gated(kernels: &Path, summary: &inplace::Summary) {
    if summary.gated.is_empty() {
        return;
    }
    let sites: usize = summary.gated.iter().map(|(_, s)| s).sum();
    let how = summary.first_gate.as_ref().map_or(String::new(), |g| {
        format!(" (kernel argument {}, e.g. in {})", g.argument, g.kernel)
    });
    crate::shared::report::out_line(&format!(
        "{}: {} kernel files left as they are ({sites} sites gated{how}): they switch expert scheduling on only when the kernel reports KFD ABI 1.20, which carries the trap-handler fix, and stay off below it; --force rewrites them too",
        kernels.display(),
        summary.gated.len(),
    ));
}

/// Removes (or with `check`, lists) this user's comgr cache entries that
/// can serve kernels with expert scheduling on, and says what is left to do.
fn comgr_cache(check: bool, undo: bool, rewrote: bool, ws: &Workspace) {
    if undo {
        return;
    }
    let reporter = &ws.reporter;
    let off = ws.settings.env.get("AMD_COMGR_CACHE") == Some(std::ffi::OsStr::new("0"));
    for dir in comgr::dirs(&ws.settings.env) {
        let stale = match comgr::stale_entries(&dir) {
            Ok(stale) => stale,
            Err(e) => {
                reporter.warn(format!(
                    "comgr cache {}: not cleaned ({e:#}); the rewrite itself is done: if comgr \
                     caches somewhere, remove its llvmcache-* files there",
                    dir.display()
                ));
                continue;
            }
        };
        if stale.is_empty() {
            if dir.is_dir() {
                crate::shared::report::out_line(&format!(
                    "comgr cache {}: no entry holds the old code",
                    dir.display()
                ));
            }
            continue;
        }
        let mut stale = stale;
        if !check {
            stale.retain(|entry| match std::fs::remove_file(entry) {
                Ok(()) => true,
                Err(e) => {
                    reporter.warn(format!(
                        "comgr cache entry {} holds the old code and could not be removed ({e}): remove it",
                        entry.display()
                    ));
                    false
                }
            });
        }
        crate::shared::report::out_line(&format!(
            "comgr cache {}: {} entr{} holding kernels with expert scheduling on {}removed",
            dir.display(),
            stale.len(),
            if stale.len() == 1 { "y" } else { "ies" },
            if check { "would be " } else { "" }
        ));
    }
    if !off && !check && rewrote {
        reporter.step(
            "other users' comgr caches (~/.cache/comgr of each user who ran ROCm programs) may hold the old code too: remove their llvmcache-* files there (comgr makes them again)",
        );
    }
}
