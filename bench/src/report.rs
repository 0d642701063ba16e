//! The report of `bench package`: the maintainer's loop, then per format
//! our writer against the reference tool at its defaults and at our
//! compressor and level, nfpm at its defaults and our compressor alone
//! (the floor), times and sizes side by side with ratios, and the goals;
//! printed as tables and written as JSON.

use serde::Serialize;

use crate::maintainer::Step;
use crate::measure::median;

/// Issue 16's goals, measured here.
pub(crate) const PEAK_GOAL_MIB: f64 = 384.0;
pub(crate) const COLD_GOAL_RATIO: f64 = 0.25;
pub(crate) const PATCH_GOAL_S: f64 = 3.0;
pub(crate) const NOOP_GOAL_S: f64 = 0.1;

/// One packager's runs of one format.
#[derive(Debug, Serialize)]
pub(crate) struct Side {
    pub(crate) tool: String,
    pub(crate) command: String,
    pub(crate) seconds: Vec<f64>,
    pub(crate) median_s: f64,
    /// The package's size in bytes, as the file system reports it.
    pub(crate) size: u64,
    /// The largest peak RSS of its runs (a pipeline: its largest process).
    pub(crate) peak_rss_mib: f64,
}

impl Side {
    pub(crate) fn new(
        tool: String,
        command: String,
        seconds: Vec<f64>,
        size: u64,
        peak_kib: u64,
    ) -> Side {
        Side {
            median_s: median(&seconds),
            tool,
            command,
            seconds,
            size,
            peak_rss_mib: peak_kib as f64 / 1024.0,
        }
    }
}

/// ours / theirs, in time and in size: below 1, ours is faster or smaller.
#[derive(Debug, Serialize)]
pub(crate) struct Ratio {
    pub(crate) time: f64,
    pub(crate) size: f64,
}

impl Ratio {
    fn of(ours: &Side, theirs: &Side) -> Ratio {
        Ratio {
            time: ours.median_s / theirs.median_s,
            size: ours.size as f64 / theirs.size as f64,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) format: String,
    pub(crate) ours: Side,
    /// The reference tool as a user calls it.
    pub(crate) reference_default: Side,
    /// The reference tool told to use our compressor and level: the same
    /// output size as ours (within a few percent), so time alone differs.
    pub(crate) reference_at_our_level: Side,
    /// nfpm at its defaults; none for the DKMS tarball or without nfpm.
    pub(crate) nfpm: Option<Side>,
    /// Our compressor alone on the uncompressed payload.
    pub(crate) floor: Side,
    pub(crate) vs_reference_default: Ratio,
    pub(crate) vs_reference_at_our_level: Ratio,
    pub(crate) vs_nfpm: Option<Ratio>,
}

impl Row {
    pub(crate) fn new(
        format: &str,
        ours: Side,
        reference_default: Side,
        reference_at_our_level: Side,
        nfpm: Option<Side>,
        floor: Side,
    ) -> Row {
        Row {
            format: format.into(),
            vs_reference_default: Ratio::of(&ours, &reference_default),
            vs_reference_at_our_level: Ratio::of(&ours, &reference_at_our_level),
            vs_nfpm: nfpm.as_ref().map(|n| Ratio::of(&ours, n)),
            ours,
            reference_default,
            reference_at_our_level,
            nfpm,
            floor,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Goals {
    /// Our four writers, cold (no chunk cache), against the reference
    /// tools at their defaults, both fed the same files: the goal.
    pub(crate) packages_ratio: f64,
    pub(crate) cold_packages_at_most_quarter: bool,
    /// The whole cold `build-dkms` (which also extracts the source archive
    /// and writes the orig tarball and the source packages) against the
    /// same total: for information.
    pub(crate) cold_build_ratio: f64,
    pub(crate) packages_no_larger_than_reference_default: bool,
    /// None when the loop had no patch to change.
    pub(crate) patch_rebuild_at_most_3_s: Option<bool>,
    pub(crate) noop_at_most_0_1_s: bool,
    pub(crate) peak_at_most_384_mib: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) profile: &'static str,
    pub(crate) cpus: usize,
    pub(crate) load_average_before: String,
    pub(crate) load_average_after: String,
    pub(crate) reps: u32,
    pub(crate) recipe: String,
    /// The benchmark's folder: the scratch project, stage/ and out/.
    pub(crate) dir: String,
    pub(crate) tree: String,
    pub(crate) tree_files: usize,
    pub(crate) tree_bytes: u64,
    pub(crate) maintainer_loop: Vec<Step>,
    pub(crate) formats: Vec<Row>,
    /// nfpm's version, or why it is missing and how to install it.
    pub(crate) nfpm: String,
    pub(crate) ours_total_s: f64,
    pub(crate) reference_default_total_s: f64,
    pub(crate) reference_at_our_level_total_s: f64,
    pub(crate) floor_total_s: f64,
    pub(crate) ours_total_bytes: u64,
    pub(crate) reference_default_total_bytes: u64,
    /// The largest peak RSS of any build of the loop and any writer of ours.
    pub(crate) peak_rss_mib: f64,
    pub(crate) goals: Goals,
}

impl Report {
    /// The tables, what each column means and the verdicts on the goals.
    pub(crate) fn print(&self) {
        self.print_loop();
        self.print_times();
        self.print_bytes();
        self.print_columns();
        self.print_goals();
    }

    /// The maintainer's loop: each build's time, peak and outcome.
    fn print_loop(&self) {
        let r = self;
        println!();
        println!(
            "maintainer's loop: build-dkms {} in a scratch project, one run each",
            r.recipe
        );
        println!(
            "{:<24} {:>8} {:>9}  {:<11} what changed",
            "step", "wall s", "peak MiB", "outcome"
        );
        for s in &r.maintainer_loop {
            let num = |v: Option<f64>, p: usize| v.map_or("-".into(), |v| format!("{v:.p$}"));
            println!(
                "{:<24} {:>8} {:>9}  {:<11} {}",
                s.step,
                num(s.seconds, 3),
                num(s.peak_rss_mib, 1),
                s.outcome,
                s.change
            );
            if !s.steps.is_empty() {
                let parts: Vec<String> = s
                    .steps
                    .iter()
                    .map(|t| format!("{} {:.2}", t.label, t.seconds))
                    .collect();
                println!("{:<24} where: {}", "", parts.join(", "));
            }
        }
    }

    /// The packages' times: ours, the reference tools', nfpm's, the floor.
    fn print_times(&self) {
        let r = self;
        println!();
        println!(
            "packages: median of {} runs each; ratio = ours / theirs (below 1: ours is faster or smaller)",
            r.reps
        );
        println!(
            "{:<5} {:>8} {:>8} | {:>8} {:>6} | {:>8} {:>6} | {:>8} {:>6} | {:>8}",
            "time",
            "ours s",
            "peak MiB",
            "ref dflt",
            "ratio",
            "ref ours",
            "ratio",
            "nfpm",
            "ratio",
            "floor s"
        );
        for row in &r.formats {
            let (nfpm_s, nfpm_ratio) = match (&row.nfpm, &row.vs_nfpm) {
                (Some(n), Some(ratio)) => {
                    (format!("{:.2}", n.median_s), format!("{:.2}", ratio.time))
                }
                _ => ("-".into(), "-".into()),
            };
            println!(
                "{:<5} {:>8.2} {:>8.1} | {:>8.2} {:>6.2} | {:>8.2} {:>6.2} | {:>8} {:>6} | {:>8.2}",
                row.format,
                row.ours.median_s,
                row.ours.peak_rss_mib,
                row.reference_default.median_s,
                row.vs_reference_default.time,
                row.reference_at_our_level.median_s,
                row.vs_reference_at_our_level.time,
                nfpm_s,
                nfpm_ratio,
                row.floor.median_s
            );
        }
        println!(
            "{:<5} {:>8.2} {:>8} | {:>8.2} {:>6.2} | {:>8.2} {:>6.2} | {:>8} {:>6} | {:>8.2}",
            "total",
            r.ours_total_s,
            "",
            r.reference_default_total_s,
            r.ours_total_s / r.reference_default_total_s,
            r.reference_at_our_level_total_s,
            r.ours_total_s / r.reference_at_our_level_total_s,
            "",
            "",
            r.floor_total_s
        );
    }

    /// The packages' sizes against the reference tools'.
    fn print_bytes(&self) {
        let r = self;
        println!(
            "{:<5} {:>11} | {:>11} {:>6} | {:>11} {:>6} | {:>11} {:>6}",
            "bytes", "ours", "ref dflt", "ratio", "ref ours", "ratio", "nfpm", "ratio"
        );
        for row in &r.formats {
            let (nfpm_b, nfpm_ratio) = match (&row.nfpm, &row.vs_nfpm) {
                (Some(n), Some(ratio)) => (n.size.to_string(), format!("{:.3}", ratio.size)),
                _ => ("-".into(), "-".into()),
            };
            println!(
                "{:<5} {:>11} | {:>11} {:>6.3} | {:>11} {:>6.3} | {:>11} {:>6}",
                row.format,
                row.ours.size,
                row.reference_default.size,
                row.vs_reference_default.size,
                row.reference_at_our_level.size,
                row.vs_reference_at_our_level.size,
                nfpm_b,
                nfpm_ratio
            );
        }
        println!(
            "{:<5} {:>11} | {:>11} {:>6.3}",
            "total",
            r.ours_total_bytes,
            r.reference_default_total_bytes,
            r.ours_total_bytes as f64 / r.reference_default_total_bytes as f64
        );
    }

    /// What each column means, and the commands the reference ran.
    fn print_columns(&self) {
        let r = self;
        println!("columns:");
        println!("  ref dflt: the reference tool as a user calls it, at its default compression");
        println!(
            "  ref ours: the same tool told to use our compressor and level, so its output is our \
             size (see the bytes): the ratio at equal output size"
        );
        println!("  nfpm: nfpm {} at its defaults", r.nfpm);
        println!(
            "  floor: our compressor alone on the uncompressed payload, the least any writer at \
             our compressors and levels can take"
        );
        println!(
            "  (rpmbuild's default is its %_binary_payload, which Debian's rpm leaves unset: \
             gzip -9; makepkg's is zstd -3 on one thread; dpkg-deb's is xz -6)"
        );
        println!("commands (paths below {}):", r.dir);
        let short = |command: &str| command.replace(&format!("{}/", r.dir), "");
        for row in &r.formats {
            let (d, o) = (
                &row.reference_default.command,
                &row.reference_at_our_level.command,
            );
            println!("  {} default: {}", row.format, short(d));
            if o != d {
                println!("  {} at our level: {}", row.format, short(o));
            }
            if let Some(n) = &row.nfpm {
                println!("  {} nfpm: {}", row.format, short(&n.command));
            }
        }
    }

    /// The machine, the tree, and the verdicts on the goals.
    fn print_goals(&self) {
        let r = self;
        println!(
            "{} build; {} CPUs; load average before {} / after {}; tree {}: {} entries, {} bytes",
            r.profile,
            r.cpus,
            r.load_average_before,
            r.load_average_after,
            r.tree,
            r.tree_files,
            r.tree_bytes
        );
        let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
        let g = &r.goals;
        println!(
            "goal the four packages, cold, <= {COLD_GOAL_RATIO} x the reference tools' total at their defaults: {} ({:.2}; the whole cold build-dkms, which also extracts the source archive and writes the orig tarball and the source packages: {:.2})",
            verdict(g.cold_packages_at_most_quarter),
            g.packages_ratio,
            g.cold_build_ratio
        );
        println!(
            "goal packages together no larger than the reference tools' at their defaults: {}",
            verdict(g.packages_no_larger_than_reference_default)
        );
        match g.patch_rebuild_at_most_3_s {
            Some(ok) => println!(
                "goal rebuild after one patch change <= {PATCH_GOAL_S} s: {}",
                verdict(ok)
            ),
            None => println!(
                "goal rebuild after one patch change <= {PATCH_GOAL_S} s: not measured (no patch)"
            ),
        }
        println!(
            "goal no-op re-run <= {NOOP_GOAL_S} s: {}",
            verdict(g.noop_at_most_0_1_s)
        );
        println!(
            "goal peak RSS <= {PEAK_GOAL_MIB:.0} MiB in any build: {} ({:.1} MiB)",
            verdict(g.peak_at_most_384_mib),
            r.peak_rss_mib
        );
    }
}
