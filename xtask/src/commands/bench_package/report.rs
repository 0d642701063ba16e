//! The report of `bench package`: medians per side and format, the
//! totals, the floor, the goals, as a table and as JSON.

use serde::Serialize;

use super::Fmt;

/// The memory goal for our writers.
pub(super) const PEAK_GOAL_MIB: f64 = 256.0;

/// Timings of one side (ours or a reference tool) of one format.
#[derive(Debug, Serialize)]
pub(super) struct Side {
    pub(super) tool: String,
    pub(super) command: String,
    pub(super) seconds: Vec<f64>,
    pub(super) median_s: f64,
    pub(super) size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) peak_rss_mib: Option<f64>,
}

#[derive(Debug, Serialize)]
pub(super) struct Row {
    pub(super) format: Fmt,
    pub(super) ours: Side,
    pub(super) reference: Side,
    /// Our compressor alone on the uncompressed payload
    pub(super) floor: Side,
    /// ours / reference, median wall times
    pub(super) time_ratio: f64,
    /// ours / reference, compressed sizes
    pub(super) size_ratio: f64,
}

#[derive(Debug, Serialize)]
pub(super) struct Goals {
    pub(super) total_time_at_most_half: bool,
    pub(super) sizes_no_larger: bool,
    pub(super) peak_under_256_mib: bool,
}

#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) profile: &'static str,
    pub(super) cpus: usize,
    pub(super) load_average_before: String,
    pub(super) load_average_after: String,
    pub(super) reps: u32,
    pub(super) tree: String,
    pub(super) tree_files: usize,
    pub(super) tree_bytes: u64,
    pub(super) formats: Vec<Row>,
    pub(super) ours_total_s: f64,
    pub(super) reference_total_s: f64,
    pub(super) total_ratio: f64,
    /// Sum of the floor medians: the least total any writer at these
    /// compressors and levels can take
    pub(super) floor_total_s: f64,
    /// floor_total_s / reference_total_s
    pub(super) best_possible_ratio: f64,
    pub(super) peak_rss_mib: f64,
    pub(super) goals: Goals,
}

impl Report {
    /// The table, the floor and the verdicts on the goals.
    pub(super) fn print(&self) {
        let r = self;
        println!();
        println!(
            "{:<5} {:>9} {:>9} {:>6} {:>9}  {:>11} {:>11} {:>6}  {:>8}  reference tool",
            "fmt",
            "ours s",
            "ref s",
            "ratio",
            "floor s",
            "ours bytes",
            "ref bytes",
            "size",
            "peak MiB"
        );
        for row in &r.formats {
            println!(
                "{:<5} {:>9.2} {:>9.2} {:>6.2} {:>9.2}  {:>11} {:>11} {:>6.3}  {:>8.1}  {}",
                row.format.name(),
                row.ours.median_s,
                row.reference.median_s,
                row.time_ratio,
                row.floor.median_s,
                row.ours.size,
                row.reference.size,
                row.size_ratio,
                row.ours.peak_rss_mib.unwrap_or_default(),
                row.reference.tool
            );
        }
        println!(
            "{:<5} {:>9.2} {:>9.2} {:>6.2} {:>9.2}",
            "total", r.ours_total_s, r.reference_total_s, r.total_ratio, r.floor_total_s
        );
        println!(
            "medians of {} runs; {} build; {} CPUs; load average before {} / after {}",
            r.reps, r.profile, r.cpus, r.load_average_before, r.load_average_after
        );
        println!(
            "floor (our compressors alone on the uncompressed payloads): {:.1} s = {:.2} x reference, \
             the least a writer of ours at these compressors and levels can take",
            r.floor_total_s, r.best_possible_ratio
        );
        let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
        println!(
            "goal total time <= 0.5 x reference: {} ({:.2})",
            verdict(r.goals.total_time_at_most_half),
            r.total_ratio
        );
        println!(
            "goal sizes no larger than reference: {}",
            verdict(r.goals.sizes_no_larger)
        );
        println!(
            "goal peak RSS < {PEAK_GOAL_MIB:.0} MiB: {} ({:.1} MiB)",
            verdict(r.goals.peak_under_256_mib),
            r.peak_rss_mib
        );
    }
}
