//! `patchkit-bench kernels <DIR>...`: how long judging a hipBLASLt kernel
//! library takes, cold (no verdict cache) and warm (a second look through the
//! cache the first one filled), with the verdict. A command, never a timed test.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{ensure, Result};

use xtask::gpu::codeobj::{self, VerdictCache};

/// What `bench kernels` judges, and how often.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Kernel library folders (`.../hipblaslt/library`), or hipBLASLt library
    /// folders holding one (`/usr/lib/x86_64-linux-gnu`)
    pub(crate) dirs: Vec<PathBuf>,
    /// Threads (default: the machine's cores)
    pub(crate) threads: Option<usize>,
    /// Cold runs per library (each with an empty cache, taking the median)
    pub(crate) reps: usize,
}

/// Runs the benchmark and prints its table.
pub(crate) fn run(args: &Options) -> Result<()> {
    ensure!(
        args.reps > 0,
        xtask::shared::diag::UsageError("--reps must be at least 1".to_owned())
    );
    let threads = xtask::shared::par::threads(args.threads);
    println!(
        "{:<60} {:>9} {:>9} {:>9} {:>7}  verdict",
        "kernel library", "cold s", "cold cpu", "warm s", "files"
    );
    for dir in &args.dirs {
        let library = if dir.join("hipblaslt/library").is_dir() {
            dir.join("hipblaslt/library")
        } else {
            dir.clone()
        };
        let files = codeobj::kernel_files(&library)
            .map(|f| f.len())
            .unwrap_or(0);
        let scratch = tempfile::tempdir()?;
        let mut colds = Vec::new();
        let mut cpus = Vec::new();
        let mut verdict = None;
        for rep in 0..args.reps {
            let path = scratch.path().join(format!("cache-{rep}.json"));
            let mut cache = VerdictCache::load(path.clone());
            let start = Instant::now();
            let cpu = cpu_seconds();
            let v = codeobj::judge_library(&library, &mut cache, threads);
            colds.push(start.elapsed().as_secs_f64());
            cpus.push(cpu_seconds() - cpu);
            cache.save()?;
            verdict = Some(v);
        }
        colds.sort_by(f64::total_cmp);
        cpus.sort_by(f64::total_cmp);
        let cold = colds[colds.len() / 2];
        let cpu = cpus[cpus.len() / 2];
        let mut cache = VerdictCache::load(scratch.path().join("cache-0.json"));
        let start = Instant::now();
        let warm_verdict = codeobj::judge_library(&library, &mut cache, threads);
        let warm = start.elapsed().as_secs_f64();
        let verdict = verdict.expect("at least one rep");
        ensure!(
            verdict == warm_verdict,
            "the warm verdict differs from the cold one on {}: {warm_verdict:?} against {verdict:?}",
            library.display()
        );
        println!(
            "{:<60} {cold:>9.3} {cpu:>9.3} {warm:>9.3} {files:>7}  {}",
            library.display(),
            verdict.describe()
        );
    }
    println!(
        "({threads} threads; cold: median of {} runs with an empty verdict cache; cold cpu: \
         user + system seconds of all threads, which other load on the machine does not inflate)",
        args.reps
    );
    Ok(())
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
