//! `patchkit-bench package`: the whole story of building packages. On a
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

use crate::inputs::Inputs;
use crate::maintainer::Scratch;
use crate::measure::{fresh_dir, load_average, measure_ok, Measured};
use crate::reference::{Job, Setting};
use crate::report::{self, Goals, Report, Row, Side};
use crate::{floor, formats, nfpm};
use xtask::formats::Format;
use xtask::input::workspace::Workspace;

/// The recipe benchmarked by default: small, offline, seconds.
pub(crate) const DEMO_RECIPE: &str = "demo-hello";
/// The recipe `--source` benchmarks: Debian's amdgpu tree.
pub(crate) const AMDGPU_RECIPE: &str = "amdgpu-debian-6.12";

/// What `bench package` runs on, and how often.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// A DKMS recipe of the project; [`DEMO_RECIPE`], or [`AMDGPU_RECIPE`]
    /// with `source`.
    pub(crate) recipe: Option<String>,
    /// A kernel source archive to take the recipe's `local` source from.
    pub(crate) source: Option<PathBuf>,
    /// `--kernel` for build-dkms.
    pub(crate) kernel: Option<String>,
    /// Repetitions per packager.
    pub(crate) reps: u32,
    /// The formats to compare (all four when empty).
    pub(crate) formats: Vec<Format>,
}

/// `patchkit-bench package-one`: one of our writers (or with `floor` our compressor
/// alone on that payload) in a process of its own.
#[derive(Debug, Clone)]
pub(crate) struct OneOptions {
    pub(crate) project: PathBuf,
    pub(crate) recipe: String,
    pub(crate) format: Format,
    pub(crate) out: PathBuf,
    pub(crate) floor: Option<PathBuf>,
}

/// Runs the benchmark, prints its tables and writes
/// `<work>/bench-package/report.json`.
pub(crate) fn run(ws: &Workspace, opts: &Options) -> Result<()> {
    let (formats, recipe) = (formats(ws, opts)?, recipe_of(opts));
    let dir = ws.work_dir.join("bench-package");
    let load_before = load_average();
    println!(
        "bench package: {recipe} in a scratch project under {}; {} build",
        dir.display(),
        crate::measure::profile()
    );
    if cfg!(debug_assertions) {
        println!(
            "(debug build: `cargo run --release -p patchkit-bench -- package` gives real figures)"
        );
    }
    let (scratch, steps) = maintainer_loop(ws, opts, &recipe, &dir)?;

    let inputs = Inputs::read(&scratch.root, &scratch.recipe)?;
    let tree = inputs.dkms_tree()?;
    let (tree_files, tree_bytes) = (tree.len(), tree.content_size());
    let (stage, out) = (dir.join("stage"), dir.join("out"));
    fresh_dir(&stage)?;
    fresh_dir(&out)?;
    let nfpm_bin = nfpm::find(&ws.settings);
    let nfpm_note = match &nfpm_bin {
        Some(bin) => nfpm_version(bin),
        None => format!("is missing, so left out: {}", nfpm::INSTALL_HINT),
    };
    let started = Instant::now();
    let mut lanes: Vec<Lane> = formats
        .iter()
        .map(|f| Lane::stage(*f, &inputs, &tree, nfpm_bin.as_deref(), &stage, &out))
        .collect::<Result<_>>()?;
    println!(
        "tree {}: {tree_files} entries, {tree_bytes} bytes; staged in {:.1} s (untimed)",
        inputs.tree_root.display(),
        started.elapsed().as_secs_f64()
    );
    let exe = std::env::current_exe().context("finding this program to run our writers")?;
    for rep in 0..opts.reps {
        for lane in &mut lanes {
            lane.run_once(&exe, &inputs, &out, rep == 0)?;
            println!("rep {}/{} {}", rep + 1, opts.reps, lane.last_line());
        }
    }
    let load_after = load_average();
    let rows = lanes
        .into_iter()
        .map(Lane::finish)
        .collect::<Result<Vec<Row>>>()?;
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

/// The formats asked for (all by default), their reference tools checked.
fn formats(ws: &Workspace, opts: &Options) -> Result<Vec<Format>> {
    let formats: Vec<Format> = if opts.formats.is_empty() {
        Format::ALL.to_vec()
    } else {
        opts.formats.clone()
    };
    for format in &formats {
        formats::check_tools(*format, &ws.settings.env)?;
    }
    Ok(formats)
}

/// The recipe asked for, else amdgpu's with a source archive, else the demo.
fn recipe_of(opts: &Options) -> String {
    opts.recipe.clone().unwrap_or_else(|| {
        if opts.source.is_some() {
            AMDGPU_RECIPE
        } else {
            DEMO_RECIPE
        }
        .to_owned()
    })
}

/// The maintainer's loop in a scratch project under `dir`, each step printed.
fn maintainer_loop(
    ws: &Workspace,
    opts: &Options,
    recipe: &str,
    dir: &Path,
) -> Result<(Scratch, Vec<crate::maintainer::Step>)> {
    let scratch = Scratch::create(
        &ws.root,
        recipe,
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
    Ok((scratch, steps))
}

/// Totals and goals over the loop and the rows.
#[allow(clippy::too_many_arguments)]
fn assemble(
    opts: &Options,
    recipe: String,
    inputs: &Inputs,
    tree_files: usize,
    tree_bytes: u64,
    steps: Vec<crate::maintainer::Step>,
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
        packages_ratio: ours_total_s / reference_default_total_s,
        cold_packages_at_most_quarter: ours_total_s
            <= report::COLD_GOAL_RATIO * reference_default_total_s,
        cold_build_ratio: cold / reference_default_total_s,
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
        profile: crate::measure::profile(),
        cpus: xtask::shared::par::cores(),
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

/// `patchkit-bench package-one`: our writer of one format, or with `floor` its
/// compressor alone, in this process; prints the artifact.
pub(crate) fn run_one(opts: &OneOptions) -> Result<()> {
    let art = match &opts.floor {
        Some(payload) => floor::compress(opts.format, payload, &opts.out)?,
        None => Inputs::read(&opts.project, &opts.recipe)?.write_ours(opts.format, &opts.out)?,
    };
    println!("artifact {} {}", art.size, art.path.display());
    Ok(())
}

/// One format: our writer, the reference tool at each setting, nfpm and
/// the floor, staged once and run `--reps` times.
struct Lane {
    format: Format,
    ours: Runs,
    theirs: Vec<(Setting, Job, Runs)>,
    nfpm: Option<(Job, Runs)>,
    /// The uncompressed payload the floor compresses.
    payload: PathBuf,
    floor: Runs,
}

impl Lane {
    /// Stages the reference tool's and nfpm's inputs and writes the floor's
    /// payload, untimed.
    fn stage(
        format: Format,
        inputs: &Inputs,
        tree: &xtask::formats::FileTree,
        nfpm_bin: Option<&Path>,
        stage: &Path,
        out: &Path,
    ) -> Result<Lane> {
        let theirs = formats::stage(format, inputs, &stage.join(format.as_str()), out)?
            .into_iter()
            .map(|(setting, job)| (setting, job, Runs::default()))
            .collect();
        let nfpm = match nfpm_bin {
            Some(bin) => nfpm::stage(bin, format, inputs, &stage.join("nfpm"), out)?,
            None => None,
        };
        let (payload, _) = floor::prepare(format, tree, &inputs.prefix, out)?;
        Ok(Lane {
            format,
            ours: Runs::default(),
            theirs,
            nfpm: nfpm.map(|job| (job, Runs::default())),
            payload,
            floor: Runs::default(),
        })
    }

    /// One run of each; with `check`, the reference tool's and nfpm's
    /// packages must hold the same paths as ours.
    fn run_once(&mut self, exe: &Path, inputs: &Inputs, out: &Path, check: bool) -> Result<()> {
        let name = self.format.as_str();
        let ours_out = out.join(format!("ours-{name}"));
        fresh_dir(&ours_out)?;
        let mut cmd = one_command(exe, inputs, self.format, &ours_out, None);
        let (ours, m) = child_artifact(&mut cmd, &format!("our {name} writer"))?;
        self.ours.push(m, &ours)?;
        for (_, job, runs) in &mut self.theirs {
            let (path, m) = run_job(job)?;
            runs.push(m, &path)?;
            if check {
                formats::same_entries(self.format, &ours, &path)?;
            }
        }
        if let Some((job, runs)) = &mut self.nfpm {
            let (path, m) = run_job(job)?;
            runs.push(m, &path)?;
            if check {
                formats::same_entries(self.format, &ours, &path)?;
            }
        }
        // The last run's package goes first: no timed run replaces a file.
        let _ = std::fs::remove_file(out.join(floor::compressed_name(self.format)));
        let mut cmd = one_command(exe, inputs, self.format, out, Some(&self.payload));
        let (path, m) = child_artifact(&mut cmd, &format!("our {name} compressor"))?;
        self.floor.push(m, &path)
    }

    /// `deb ours 1.23 s  dpkg-deb --build (default) 1.50 s ...` of the last run.
    fn last_line(&self) -> String {
        let last = |runs: &Runs| runs.secs.last().copied().unwrap_or(0.0);
        let mut line = format!("{:<5} ours {:.2} s", self.format.as_str(), last(&self.ours));
        for (setting, job, runs) in &self.theirs {
            line.push_str(&format!(
                "  {} ({}) {:.2} s",
                job.tool,
                setting.name(),
                last(runs)
            ));
        }
        if let Some((_, runs)) = &self.nfpm {
            line.push_str(&format!("  nfpm {:.2} s", last(runs)));
        }
        line + &format!("  floor {:.2} s", last(&self.floor))
    }

    /// The report's row; removes the floor's payload.
    fn finish(self) -> Result<Row> {
        std::fs::remove_file(&self.payload)
            .with_context(|| format!("removing {}", self.payload.display()))?;
        let name = self.format.as_str();
        let ours = self.ours.side(
            "rocm-patchkit".into(),
            format!("patchkit-bench package-one {name}"),
        );
        let side_of = |setting: Setting| -> Side {
            // A tool whose default is our setting ran once, for both columns.
            let (_, job, runs) = self
                .theirs
                .iter()
                .find(|(s, _, _)| *s == setting)
                .unwrap_or(&self.theirs[0]);
            runs.side(job.tool.clone(), job.describe())
        };
        let nfpm = self
            .nfpm
            .as_ref()
            .map(|(job, runs)| runs.side(job.tool.clone(), job.describe()));
        let floor = self.floor.side(
            format!("{} alone", floor::describe(floor::compression(self.format))),
            format!("patchkit-bench package-one --floor {name}"),
        );
        Ok(Row::new(
            name,
            ours,
            side_of(Setting::Default),
            side_of(Setting::Ours),
            nfpm,
            floor,
        ))
    }
}

/// The runs of one packager on one format.
#[derive(Debug, Clone, Default)]
struct Runs {
    secs: Vec<f64>,
    peak_kib: u64,
    size: u64,
}

impl Runs {
    /// Records a run whose package is `path` (its size read from the file system).
    fn push(&mut self, m: Measured, path: &Path) -> Result<()> {
        self.secs.push(m.secs);
        self.peak_kib = self.peak_kib.max(m.peak_kib);
        self.size = std::fs::metadata(path)
            .with_context(|| format!("reading the size of {}", path.display()))?
            .len();
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
    cmd.args(["--quiet", "package-one"]);
    if let Some(payload) = floor {
        cmd.arg("--floor").arg(payload);
    }
    cmd.arg(&inputs.root)
        .arg(&inputs.recipe.name)
        .arg(format.as_str())
        .arg(out);
    cmd
}

/// Runs a `patchkit-bench package-one` child; the package it printed, measured.
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
