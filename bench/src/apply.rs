//! `patchkit-bench apply`: our apply against `git apply` and
//! `quilt push -a` on identical copies of the real amdgpu tree, with a
//! generated series (30 patches, 120 files). A command, never a timed test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::measure::{measure_ok, median, run_ok};
use xtask::apply::extract::{self, Selection};
use xtask::apply::patch::tree::Tree;
use xtask::apply::patch::{apply, PatchInput, Tolerance};
use xtask::input::workspace::Workspace;

/// What `bench apply` runs on.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The kernel source archive (Debian's linux-source-6.12)
    pub(crate) source: PathBuf,
    /// Repetitions per tool
    pub(crate) reps: usize,
    /// Patches in the generated series (4 files each)
    pub(crate) patches: usize,
}

const SUBTREE: &str = "drivers/gpu/drm/amd";

/// `patchkit-bench apply-series`: applies `patches` to `tree` in place, strictly.
pub(crate) fn apply_series(tree: &Path, patches: &[PathBuf]) -> Result<()> {
    let inputs: Vec<PatchInput> = patches
        .iter()
        .map(|p| PatchInput::read(p.display().to_string(), p))
        .collect::<Result<_>>()?;
    apply::series(&mut Tree::writing(tree), &inputs, Tolerance::strict())?;
    Ok(())
}

/// Runs the benchmark and prints its table.
pub(crate) fn run(ws: &Workspace, args: &Options) -> Result<()> {
    for tool in ["git", "quilt", "cp"] {
        if ws.settings.env.which(tool).is_none() {
            bail!("`{tool}` is missing: apt-get install git quilt coreutils");
        }
    }
    let dir = ws.work_dir.join("bench-apply");
    let pristine = extract_once(ws, args, &dir)?;
    let patch_dir = dir.join("patches");
    let (names, files) = generate_series(&pristine, &patch_dir, args.patches)?;
    println!(
        "series: {} patches touching {files} files; {} repetitions each",
        names.len(),
        args.reps
    );
    let exe = std::env::current_exe()?;
    let mut times: [Vec<f64>; 3] = Default::default();
    let mut peaks = [0u64; 3];
    for rep in 0..args.reps {
        for (tool, slot) in times.iter_mut().enumerate() {
            let copy = dir.join(format!("copy-{tool}"));
            let _ = std::fs::remove_dir_all(&copy);
            run_ok(Command::new("cp").arg("-a").arg(&pristine).arg(&copy))?;
            let mut cmd = tool_command(tool, &exe, &copy, &dir, &patch_dir, &names)?;
            let what = ["rocm-patchkit apply", "git apply", "quilt push -a"][tool];
            let (_, m) = measure_ok(&mut cmd, what)?;
            slot.push(m.secs);
            peaks[tool] = peaks[tool].max(m.peak_kib);
        }
        if rep == 0 {
            same_result(&dir, &patch_dir, &names)?;
        }
        for tool in 0..3 {
            let _ = std::fs::remove_dir_all(dir.join(format!("copy-{tool}")));
        }
    }
    print_table(&times, peaks);
    Ok(())
}

/// The pristine subtree in `<dir>/pristine`, extracted once and reused by
/// later runs.
fn extract_once(ws: &Workspace, args: &Options, dir: &Path) -> Result<PathBuf> {
    let pristine = dir.join("pristine");
    let marker = dir.join("pristine.done");
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(&pristine);
        std::fs::create_dir_all(&pristine)?;
        let sel = Selection {
            strip: 1,
            include: vec![SUBTREE.to_owned()],
            paths: Vec::new(),
        };
        let started = Instant::now();
        let manifest = extract::archive(
            &args.source,
            &sel,
            &pristine,
            ws.settings.extract,
            &ws.reporter,
        )
        .with_context(|| format!("extracting {SUBTREE} from {}", args.source.display()))?;
        let bytes: u64 = manifest.values().map(|f| f.size).sum();
        println!(
            "extracted {} files, {:.0} MB of {SUBTREE} in {:.1} s (once; reused by later runs)",
            manifest.len(),
            bytes as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        std::fs::write(&marker, "")?;
    }
    Ok(pristine)
}

/// The command that applies the series to `copy`: ours (0), git (1) or
/// quilt (2).
fn tool_command(
    tool: usize,
    exe: &Path,
    copy: &Path,
    dir: &Path,
    patch_dir: &Path,
    names: &[String],
) -> Result<Command> {
    Ok(match tool {
        0 => {
            let mut c = Command::new(exe);
            c.args(["apply-series"]).arg(copy);
            c.args(names.iter().map(|n| patch_dir.join(n)));
            c
        }
        1 => {
            let mut c = Command::new("git");
            c.arg("apply").current_dir(copy);
            // Not the repository the work dir may sit in: paths are the copy's.
            c.env("GIT_CEILING_DIRECTORIES", dir);
            c.args(names.iter().map(|n| patch_dir.join(n)));
            c
        }
        _ => {
            std::os::unix::fs::symlink(patch_dir, copy.join("patches"))?;
            let mut c = Command::new("quilt");
            c.args(["push", "-a", "-q"]).current_dir(copy);
            c.env("QUILT_PATCHES", "patches");
            c
        }
    })
}

/// Each tool's median, least and most time and peak, and the ratios.
fn print_table(times: &[Vec<f64>; 3], peaks: [u64; 3]) {
    let med: Vec<f64> = times.iter().map(|t| median(t)).collect();
    println!(
        "{:<16} {:>10} {:>10} {:>10} {:>9}",
        "tool", "median s", "min s", "max s", "peak MiB"
    );
    for ((name, t), peak) in ["rocm-patchkit", "git apply", "quilt push -a"]
        .iter()
        .zip(times)
        .zip(peaks)
    {
        let min = t.iter().cloned().fold(f64::MAX, f64::min);
        let max = t.iter().cloned().fold(0.0, f64::max);
        println!(
            "{name:<16} {:>10.3} {min:>10.3} {max:>10.3} {:>9.1}",
            median(t),
            peak as f64 / 1024.0
        );
    }
    println!(
        "ratio rocm-patchkit / git apply:     {:.2}",
        med[0] / med[1]
    );
    println!(
        "ratio rocm-patchkit / quilt push -a: {:.2}",
        med[0] / med[2]
    );
    println!("peak MiB: each tool's peak RSS (wait4), the largest of its runs");
}

/// Checks that our result and git's are the same on every file the series touches.
fn same_result(dir: &Path, patch_dir: &Path, names: &[String]) -> Result<()> {
    for name in names {
        let text = std::fs::read_to_string(patch_dir.join(name))?;
        for line in text.lines().filter(|l| l.starts_with("+++ b/")) {
            let rel = &line[6..];
            let ours = std::fs::read(dir.join("copy-0").join(rel))?;
            for other in ["copy-1", "copy-2"] {
                if std::fs::read(dir.join(other).join(rel))? != ours {
                    bail!("{rel} differs between rocm-patchkit and {other}");
                }
            }
        }
    }
    Ok(())
}

/// Writes `count` patches of 4 files each (3 hunks per file) into `out`,
/// chosen deterministically from the `.c` files of `tree`; returns their
/// names and the number of files touched.
fn generate_series(tree: &Path, out: &Path, count: usize) -> Result<(Vec<String>, usize)> {
    let mut sources = Vec::new();
    let mut stack = vec![tree.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() && e.path().extension().is_some_and(|x| x == "c") {
                let rel = e.path().strip_prefix(tree)?.to_string_lossy().into_owned();
                if e.metadata()?.len() > 8_000 {
                    sources.push(rel);
                }
            }
        }
    }
    sources.sort();
    let want = count * 4;
    if sources.len() < want {
        bail!("only {} .c files to patch, {want} needed", sources.len());
    }
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out)?;
    let stride = sources.len() / want;
    let mut names = Vec::new();
    let mut series = String::new();
    for p in 0..count {
        let mut text = format!(
            "Subject: [PATCH {}/{count}] bench change {p}\n\n---\n",
            p + 1
        );
        for f in 0..4 {
            let rel = &sources[(p * 4 + f) * stride];
            let data = std::fs::read(tree.join(rel))?;
            text.push_str(&file_diff(rel, &data, p));
        }
        let name = format!("{:04}-bench-{p}.patch", p + 1);
        std::fs::write(out.join(&name), text)?;
        series.push_str(&name);
        series.push('\n');
        names.push(name);
    }
    std::fs::write(out.join("series"), series)?;
    Ok((names, want))
}

/// A `diff --git` of `rel` with a comment added after lines at 1/4, 1/2, 3/4.
fn file_diff(rel: &str, data: &[u8], patch: usize) -> String {
    let lines: Vec<String> = String::from_utf8_lossy(data)
        .split_inclusive('\n')
        .map(str::to_owned)
        .collect();
    let mut out = format!("diff --git a/{rel} b/{rel}\n--- a/{rel}\n+++ b/{rel}\n");
    let n = lines.len();
    for (k, at) in [n / 4, n / 2, 3 * n / 4].into_iter().enumerate() {
        let (from, to) = (at - 3, at + 3);
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            from + 1,
            to - from,
            from + 1 + k,
            to - from + 1
        ));
        for line in &lines[from..at] {
            out.push(' ');
            out.push_str(line);
        }
        out.push_str(&format!("+/* rocm-patchkit bench {patch}.{k} */\n"));
        for line in &lines[at..to] {
            out.push(' ');
            out.push_str(line);
        }
    }
    out
}
