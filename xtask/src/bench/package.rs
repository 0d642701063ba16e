//! `cargo xtask bench package`: the whole story of building packages. On a
//! scratch copy of a DKMS recipe (the demo by default, Debian's amdgpu tree
//! with `--source`): the maintainer's loop of `build-dkms` (cold, no-op, one
//! patch changed, one source file changed), then each format's writer of
//! ours against the reference tool at its defaults and at our compressor
//! and level, nfpm at its defaults, and our compressor alone (the floor),
//! all fed what build-dkms rendered and packaged. Every run is a child
//! process timed and measured (wall time, peak RSS) as a user sees it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::inputs::Inputs;
use super::maintainer::Scratch;
use super::reference::{self, Job, Setting};
use super::report::{self, Goals, Report, Row, Side};
use super::{floor, fresh_dir, load_average, measure_ok, nfpm, Measured};
use crate::recipe::Format;
use crate::workspace::Workspace;

/// The recipe benchmarked by default: small, offline, seconds.
pub const DEMO_RECIPE: &str = "demo-hello";
/// The recipe `--source` benchmarks: Debian's amdgpu tree.
pub const AMDGPU_RECIPE: &str = "amdgpu-debian-6.12";

/// What `bench package` runs on, and how often.
#[derive(Debug, Clone)]
pub struct Options {
    /// A DKMS recipe of the project; [`DEMO_RECIPE`], or [`AMDGPU_RECIPE`]
    /// with `source`.
    pub recipe: Option<String>,
    /// A kernel source archive to take the recipe's `local` source from.
    pub source: Option<PathBuf>,
    /// `--kernel` for build-dkms.
    pub kernel: Option<String>,
    /// Repetitions per packager.
    pub reps: u32,
    /// The formats to compare (all four when empty).
    pub formats: Vec<Format>,
}

/// `bench package-one`: one of our writers (or with `floor` our compressor
/// alone on that payload) in a process of its own.
#[derive(Debug, Clone)]
pub struct OneOptions {
    pub project: PathBuf,
    pub recipe: String,
    pub format: Format,
    pub out: PathBuf,
    pub floor: Option<PathBuf>,
}

/// Runs the benchmark, prints its tables and writes
/// `<work>/bench-package/report.json`.
pub fn run(ws: &Workspace, opts: &Options) -> Result<()> {
    let formats = if opts.formats.is_empty() {
        Format::ALL.iter().map(|(_, f)| *f).collect()
    } else {
        opts.formats.clone()
    };
    for format in &formats {
        reference::check_tools(*format)?;
    }
    let recipe = opts.recipe.clone().unwrap_or_else(|| {
        if opts.source.is_some() {
            AMDGPU_RECIPE
        } else {
            DEMO_RECIPE
        }
        .to_owned()
    });
    let dir = ws.work_dir.join("bench-package");
    let load_before = load_average();
    println!(
        "bench package: {recipe} in a scratch project under {}; {} build",
        dir.display(),
        super::profile()
    );
    if cfg!(debug_assertions) {
        println!(
            "(debug build: `cargo run --release -p xtask -- bench package` gives real figures)"
        );
    }
    let scratch = Scratch::create(
        &ws.root,
        &recipe,
        opts.source.as_deref(),
        &dir.join("project"),
        opts.kernel.clone(),
    )?;
    let steps = scratch.run_loop()?;
    for s in &steps {
        println!(
            "loop: {:<24} {:<11} {}",
            s.step,
            s.outcome,
            s.seconds.map_or(String::new(), |v| format!("{v:.3} s"))
        );
    }

    let inputs = Inputs::read(&scratch.root, &scratch.recipe)?;
    let tree = inputs.dkms_tree()?;
    let (tree_files, tree_bytes) = (tree.len(), tree.content_size());
    let stage = dir.join("stage");
    let out = dir.join("out");
    fresh_dir(&stage)?;
    fresh_dir(&out)?;
    let refs: Vec<Vec<(Setting, Job)>> = formats
        .iter()
        .map(|f| reference::stage(*f, &inputs, &stage.join(f.as_str()), &out))
        .collect::<Result<_>>()?;
    let nfpm_bin = nfpm::find();
    let nfpm_note = match &nfpm_bin {
        Some(bin) => nfpm_version(bin),
        None => format!("is missing, so left out: {}", nfpm::INSTALL_HINT),
    };
    let nfpm_jobs: Vec<Option<Job>> = formats
        .iter()
        .map(|f| match &nfpm_bin {
            Some(bin) => nfpm::stage(bin, *f, &inputs, &stage.join("nfpm"), &out),
            None => Ok(None),
        })
        .collect::<Result<_>>()?;

    // The floor's uncompressed payloads, written once and untimed.
    let started = Instant::now();
    let payloads: Vec<(PathBuf, u64)> = formats
        .iter()
        .map(|f| floor::prepare(*f, &tree, &inputs.prefix, &out))
        .collect::<Result<_>>()?;
    println!(
        "tree {}: {tree_files} entries, {tree_bytes} bytes; floor payloads written in {:.1} s (untimed)",
        inputs.tree_root.display(),
        started.elapsed().as_secs_f64()
    );

    let exe = std::env::current_exe().context("finding this program to run our writers")?;
    let n = formats.len();
    let mut ours: Vec<Runs> = vec![Runs::default(); n];
    let mut floors: Vec<Runs> = vec![Runs::default(); n];
    let mut theirs: Vec<Vec<Runs>> = refs
        .iter()
        .map(|j| vec![Runs::default(); j.len()])
        .collect();
    let mut nfpms: Vec<Runs> = vec![Runs::default(); n];
    for rep in 0..opts.reps {
        for (i, format) in formats.iter().enumerate() {
            let ours_out = out.join(format!("ours-{}", format.as_str()));
            fresh_dir(&ours_out)?;
            let mut cmd = one_command(&exe, &inputs, *format, &ours_out, None);
            let (path, m) = child_artifact(&mut cmd, &format!("our {} writer", format.as_str()))?;
            ours[i].push(m, &path)?;
            for (k, (_, job)) in refs[i].iter().enumerate() {
                let (path, m) = run_job(job)?;
                theirs[i][k].push(m, &path)?;
                if rep == 0 {
                    reference::same_entries(*format, &ours[i].path, &path)?;
                }
            }
            if let Some(job) = &nfpm_jobs[i] {
                let (path, m) = run_job(job)?;
                nfpms[i].push(m, &path)?;
            }
            let _ = std::fs::remove_file(out.join(floor::compressed_name(*format)));
            let mut cmd = one_command(&exe, &inputs, *format, &out, Some(&payloads[i].0));
            let (path, m) =
                child_artifact(&mut cmd, &format!("our {} compressor", format.as_str()))?;
            floors[i].push(m, &path)?;
            println!(
                "rep {}/{} {:<5} ours {:>7.2} s  {}  floor {:>7.2} s",
                rep + 1,
                opts.reps,
                format.as_str(),
                ours[i].secs.last().copied().unwrap_or(0.0),
                refs[i]
                    .iter()
                    .zip(&theirs[i])
                    .map(|((s, job), runs)| format!(
                        "{} ({}) {:.2} s",
                        job.tool,
                        s.name(),
                        runs.secs.last().copied().unwrap_or(0.0)
                    ))
                    .collect::<Vec<_>>()
                    .join("  "),
                floors[i].secs.last().copied().unwrap_or(0.0)
            );
        }
    }
    let load_after = load_average();
    for (path, _) in &payloads {
        std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    }

    let mut rows = Vec::new();
    for (i, format) in formats.iter().enumerate() {
        let ours_side = ours[i].side(
            "rocm-patchkit".into(),
            format!("bench package-one {}", format.as_str()),
        );
        let side_of = |setting: Setting| -> Side {
            // A tool whose default is our setting ran once for both columns.
            let k = refs[i].iter().position(|(s, _)| *s == setting).unwrap_or(0);
            let job = &refs[i][k].1;
            theirs[i][k].side(job.tool.clone(), job.describe())
        };
        let nfpm_side = nfpm_jobs[i]
            .as_ref()
            .map(|job| nfpms[i].side(job.tool.clone(), job.describe()));
        let floor_side = floors[i].side(
            format!("{} alone", floor::describe(floor::compression(*format))),
            format!("bench package-one --floor {}", format.as_str()),
        );
        rows.push(Row::new(
            format.as_str(),
            ours_side,
            side_of(Setting::Default),
            side_of(Setting::Ours),
            nfpm_side,
            floor_side,
        ));
    }
    let report = assemble(
        opts,
        recipe,
        &inputs,
        tree_files,
        tree_bytes,
        steps,
        rows,
        nfpm_note,
        load_before,
        load_after,
    );
    report.print();
    let path = dir.join("report.json");
    let json = serde_json::to_string_pretty(&report).context("serialising the report")?;
    std::fs::write(&path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    println!("report: {}", path.display());
    Ok(())
}

/// Totals and goals over the loop and the rows.
#[allow(clippy::too_many_arguments)]
fn assemble(
    opts: &Options,
    recipe: String,
    inputs: &Inputs,
    tree_files: usize,
    tree_bytes: u64,
    steps: Vec<super::maintainer::Step>,
    rows: Vec<Row>,
    nfpm: String,
    load_before: String,
    load_after: String,
) -> Report {
    let sum = |f: &dyn Fn(&Row) -> f64| rows.iter().map(f).sum::<f64>();
    let ours_total_s = sum(&|r| r.ours.median_s);
    let reference_default_total_s = sum(&|r| r.reference_default.median_s);
    let ours_total_bytes: u64 = rows.iter().map(|r| r.ours.size).sum();
    let reference_default_total_bytes: u64 = rows.iter().map(|r| r.reference_default.size).sum();
    let step = |name: &str| steps.iter().find(|s| s.step == name);
    let cold = step("cold build")
        .and_then(|s| s.seconds)
        .unwrap_or(f64::MAX);
    let noop = step("no-op re-run");
    let patch = step("one patch changed").filter(|s| s.outcome != "skipped");
    let peak = steps
        .iter()
        .filter_map(|s| s.peak_rss_mib)
        .chain(rows.iter().map(|r| r.ours.peak_rss_mib))
        .fold(0.0, f64::max);
    let goals = Goals {
        cold_build_ratio: cold / reference_default_total_s,
        cold_build_at_most_quarter: cold <= report::COLD_GOAL_RATIO * reference_default_total_s,
        packages_no_larger_than_reference_default: ours_total_bytes
            <= reference_default_total_bytes,
        patch_rebuild_at_most_3_s: patch
            .map(|s| s.seconds.unwrap_or(f64::MAX) <= report::PATCH_GOAL_S),
        noop_at_most_0_1_s: noop.is_some_and(|s| {
            s.outcome == "up to date" && s.seconds.unwrap_or(f64::MAX) <= report::NOOP_GOAL_S
        }),
        peak_at_most_384_mib: peak <= report::PEAK_GOAL_MIB,
    };
    Report {
        profile: super::profile(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average_before: load_before,
        load_average_after: load_after,
        reps: opts.reps,
        recipe,
        dir: inputs
            .root
            .parent()
            .unwrap_or(&inputs.root)
            .display()
            .to_string(),
        tree: inputs.tree_root.display().to_string(),
        tree_files,
        tree_bytes,
        maintainer_loop: steps,
        ours_total_s,
        reference_default_total_s,
        reference_at_our_level_total_s: sum(&|r| r.reference_at_our_level.median_s),
        floor_total_s: sum(&|r| r.floor.median_s),
        ours_total_bytes,
        reference_default_total_bytes,
        formats: rows,
        nfpm,
        peak_rss_mib: peak,
        goals,
    }
}

/// `bench package-one`: our writer of one format, or with `floor` its
/// compressor alone, in this process; prints the artifact.
pub fn run_one(opts: &OneOptions) -> Result<()> {
    let art = match &opts.floor {
        Some(payload) => floor::compress(opts.format, payload, &opts.out)?,
        None => Inputs::read(&opts.project, &opts.recipe)?.write_ours(opts.format, &opts.out)?,
    };
    println!("artifact {} {}", art.size, art.path.display());
    Ok(())
}

/// The runs of one packager on one format.
#[derive(Debug, Clone, Default)]
struct Runs {
    secs: Vec<f64>,
    peak_kib: u64,
    size: u64,
    path: PathBuf,
}

impl Runs {
    /// Records a run whose package is `path` (its size read from the file system).
    fn push(&mut self, m: Measured, path: &Path) -> Result<()> {
        self.secs.push(m.secs);
        self.peak_kib = self.peak_kib.max(m.peak_kib);
        self.size = std::fs::metadata(path)
            .with_context(|| format!("reading the size of {}", path.display()))?
            .len();
        self.path = path.to_path_buf();
        Ok(())
    }

    fn side(&self, tool: String, command: String) -> Side {
        Side::new(tool, command, self.secs.clone(), self.size, self.peak_kib)
    }
}

fn one_command(
    exe: &Path,
    inputs: &Inputs,
    format: Format,
    out: &Path,
    floor: Option<&Path>,
) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["--quiet", "bench", "package-one"]);
    if let Some(payload) = floor {
        cmd.arg("--floor").arg(payload);
    }
    cmd.arg(&inputs.root)
        .arg(&inputs.recipe.name)
        .arg(format.as_str())
        .arg(out);
    cmd
}

/// Runs a `bench package-one` child; the package it printed, measured.
fn child_artifact(cmd: &mut Command, what: &str) -> Result<(PathBuf, Measured)> {
    let (out, m) = measure_ok(cmd, what)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("artifact "))
        .and_then(|rest| rest.split_once(' '))
        .map(|(_, p)| PathBuf::from(p));
    match path {
        Some(path) => Ok((path, m)),
        None => bail!("{what} printed no artifact: {stdout:?}"),
    }
}

/// Runs a reference job into its emptied folder; the one package it left.
fn run_job(job: &Job) -> Result<(PathBuf, Measured)> {
    fresh_dir(&job.out_dir)?;
    let (_, m) = measure_ok(&mut job.command(), &job.tool)?;
    Ok((job.artifact()?.0, m))
}

/// `2.48.0` from `nfpm --version`.
fn nfpm_version(bin: &Path) -> String {
    let out = Command::new(bin).arg("--version").output();
    out.ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout).lines().find_map(|l| {
                l.trim()
                    .strip_prefix("GitVersion:")
                    .map(|v| v.trim().to_owned())
            })
        })
        .unwrap_or_else(|| "(version unknown)".into())
}
