//! `patchkit-bench rewrite <DIR>`: the rewrite of expert scheduling
//! off in every gfx12 kernel file of a hipBLASLt kernel library (ours, in
//! process, over the cores) against the same work done by the reference
//! tools file by file on the files that have sites (`zstd -d` of the frame,
//! `md5sum` of the bundle, `zstd` at our level and window), with sizes and
//! our peak memory. `--disasm-all` then checks every code object with
//! `llvm-objdump` before and after (`codeobj::llvm`). A command, never a
//! timed test.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use xtask::gpu::codeobj::bundle::ZSTD_LEVEL;
use xtask::gpu::codeobj::bundle::{self, Scratch};
use xtask::gpu::codeobj::llvm;
use xtask::gpu::codeobj::rewrite::{self, Rewrite, ZSTD_WINDOW_LOG};
use xtask::shared::settings::Environment;

/// What `bench rewrite` reads and how.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The kernel library folder (`.../hipblaslt/library`)
    pub(crate) dir: PathBuf,
    /// Threads for ours (default: the machine's cores)
    pub(crate) threads: Option<usize>,
    /// Skip the reference pipeline
    pub(crate) no_reference: bool,
    /// Disassemble every code object before and after with llvm-objdump
    pub(crate) disasm_all: bool,
    /// The machine's environment (the reference's tools on its `PATH`)
    pub(crate) env: Environment,
}

/// The uncompressed bytes the threads may hold at once (a file larger than
/// this runs alone).
const MEMORY_BUDGET: u64 = 200 << 20;

/// A count of bytes in flight that threads wait on.
struct Budget {
    free: Mutex<u64>,
    freed: std::sync::Condvar,
    total: u64,
}

impl Budget {
    fn new(total: u64) -> Self {
        Budget {
            free: Mutex::new(total),
            freed: std::sync::Condvar::new(),
            total,
        }
    }

    /// Waits until `bytes` (at most the whole budget) are free and holds them.
    fn take(&self, bytes: u64) -> Held<'_> {
        let bytes = bytes.min(self.total);
        let mut free = self.free.lock().expect("no panics hold the lock");
        while *free < bytes {
            free = self.freed.wait(free).expect("no panics hold the lock");
        }
        *free -= bytes;
        Held {
            budget: self,
            bytes,
        }
    }
}

struct Held<'a> {
    budget: &'a Budget,
    bytes: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        *self.budget.free.lock().expect("no panics hold the lock") += self.bytes;
        self.budget.freed.notify_all();
    }
}

/// What our rewrite of one file gave.
struct Done {
    name: String,
    sites: usize,
    before: u64,
    after: u64,
    uncompressed: u64,
}

/// The gfx12 kernel files of `dir` (by name), sorted.
fn gfx12_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.contains("gfx120") && (name.ends_with(".co") || name.ends_with(".hsaco")) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Runs `each` over `items` on `threads` threads; the first error stops it.
fn parallel<T: Sync>(
    items: &[T],
    threads: usize,
    each: impl Fn(&T) -> Result<()> + Sync,
) -> Result<()> {
    xtask::shared::par::try_map(items, threads, each).map(|_| ())
}

/// Runs the benchmark and prints its figures.
pub(crate) fn run(args: &Options) -> Result<()> {
    let threads = xtask::shared::par::threads(args.threads);
    let files = gfx12_files(&args.dir)?;
    ensure!(
        !files.is_empty(),
        "no gfx12 kernel files (*gfx120*.co, *.hsaco) in {}",
        args.dir.display()
    );
    let scratch_dir = tempfile::tempdir().context("creating a scratch folder")?;
    let ours_dir = scratch_dir.path().join("ours");
    let theirs_dir = scratch_dir.path().join("reference");
    std::fs::create_dir_all(&ours_dir)?;
    std::fs::create_dir_all(&theirs_dir)?;
    println!(
        "bench rewrite: {} gfx12 kernel files in {} ({} build, {threads} threads, load {})",
        files.len(),
        args.dir.display(),
        crate::measure::profile(),
        crate::measure::load_average()
    );

    // ours: read, rewrite, write; the scratch buffers reused per thread, and
    // no more than MEMORY_BUDGET of uncompressed bundles in flight at once
    let budget = Budget::new(MEMORY_BUDGET);
    let done = Mutex::new(Vec::new());
    let started = Instant::now();
    let cpu = cpu_seconds();
    parallel(&files, threads, |path| {
        let one = rewrite_one(path, &ours_dir, &budget)?;
        done.lock().expect("no panics hold the lock").push(one);
        Ok(())
    })?;
    let ours_secs = started.elapsed().as_secs_f64();
    let ours_cpu = cpu_seconds() - cpu;
    let peak_mib = peak_rss_kib() as f64 / 1024.0;
    let mut done = done.into_inner().expect("no panics hold the lock");
    done.sort_by(|a, b| a.name.cmp(&b.name));
    let with_sites: Vec<&Done> = done.iter().filter(|d| d.sites > 0).collect();
    let sites: usize = done.iter().map(|d| d.sites).sum();
    let before: u64 = done.iter().map(|d| d.before).sum();
    let after: u64 = done.iter().map(|d| d.after).sum();
    let uncompressed: u64 = with_sites.iter().map(|d| d.uncompressed).sum();
    let sites_before: u64 = with_sites.iter().map(|d| d.before).sum();
    let sites_after: u64 = with_sites.iter().map(|d| d.after).sum();
    println!(
        "ours:      {ours_secs:>8.2} s wall {ours_cpu:>8.2} s cpu  peak {peak_mib:.0} MiB; {} files with sites, {sites} sites, {:.1} MB uncompressed",
        with_sites.len(),
        uncompressed as f64 / 1e6
    );
    println!(
        "sizes:     library {before} -> {after} bytes ({:+.2}%); files with sites {sites_before} -> {sites_after} ({:+.2}%)",
        pct(after, before),
        pct(sites_after, sites_before)
    );

    if !args.no_reference {
        reference(args, &with_sites, &theirs_dir, ours_secs)?;
    }
    println!(
        "goals:     time <= 0.6x the reference; peak < 512 MiB: {}; rewritten library no larger: {}",
        if peak_mib < 512.0 { "met" } else { "MISSED" },
        if after <= before { "met" } else { "MISSED" }
    );

    if args.disasm_all {
        disasm_all(&args.dir, &ours_dir, &done, threads, scratch_dir.path())?;
    }
    Ok(())
}

/// Rewrites one file into `ours_dir` (the scratch buffers reused per
/// thread), holding its uncompressed size of `budget` meanwhile.
fn rewrite_one(path: &Path, ours_dir: &Path, budget: &Budget) -> Result<Done> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
    }
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let original = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let size = bundle::header(&original).map_or(original.len() as u64, |h| h.uncompressed);
    let held = budget.take(size);
    let result = SCRATCH
        .with(|s| {
            let mut s = s.borrow_mut();
            let result = rewrite::rewrite_file_with(&original, &mut s);
            // a buffer kept beyond the budget would hold its memory on
            if s.out.capacity() as u64 > MEMORY_BUDGET / 4 {
                s.out = Vec::new();
            }
            result
        })
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let (after, sites, uncompressed) = match result {
        Rewrite::Rewritten {
            bytes,
            sites,
            uncompressed,
        } => {
            let out = ours_dir.join(&name);
            std::fs::write(&out, &bytes).with_context(|| format!("writing {}", out.display()))?;
            (bytes.len() as u64, sites.len(), uncompressed)
        }
        Rewrite::NoSites | Rewrite::NoGfx12 | Rewrite::OnlyGated { .. } => {
            (original.len() as u64, 0, 0)
        }
    };
    drop(held);
    Ok(Done {
        name,
        sites,
        before: original.len() as u64,
        after,
        uncompressed,
    })
}

fn pct(after: u64, before: u64) -> f64 {
    (after as f64 / before.max(1) as f64 - 1.0) * 100.0
}

/// The reference pipeline on the files with sites, one at a time: the
/// frame after the `CCOB` header through `zstd -d`, `md5sum` of the
/// bundle, `zstd -<level> --long=<window>` of it.
fn reference(args: &Options, with_sites: &[&Done], out: &Path, ours_secs: f64) -> Result<()> {
    let dir = &args.dir;
    for tool in ["zstd", "md5sum", "tail", "sh"] {
        if args.env.which(tool).is_none() {
            bail!("{tool} is not on PATH: the reference pipeline needs it");
        }
    }
    let mut script = String::from("set -e\n");
    for d in with_sites {
        let path = dir.join(&d.name);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let header =
            bundle::header(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let q = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
        let plain = out.join(format!("{}.bundle", d.name));
        script.push_str(&format!(
            "tail -c +{} {} | zstd -q -d -c > {p}\nmd5sum {p} > /dev/null\nzstd -q -{ZSTD_LEVEL} --long={ZSTD_WINDOW_LOG} -c {p} > {}\nrm {p}\n",
            header.len() + 1,
            q(&path),
            q(&out.join(&d.name)),
            p = q(&plain),
        ));
    }
    let script_path = out.join("pipeline.sh");
    std::fs::write(&script_path, &script)
        .with_context(|| format!("writing {}", script_path.display()))?;
    let (_, measured) = crate::measure::measure_ok(
        std::process::Command::new("sh").arg(&script_path),
        "the reference pipeline",
    )?;
    let mut size = 0;
    for d in with_sites {
        size += std::fs::metadata(out.join(&d.name)).map_or(0, |m| m.len());
    }
    println!(
        "reference: {:>8.2} s wall (zstd -d | md5sum | zstd -{ZSTD_LEVEL} --long={ZSTD_WINDOW_LOG}, file by file), {size} bytes of frames; ours/reference {:.2}x",
        measured.secs,
        ours_secs / measured.secs.max(1e-9)
    );
    Ok(())
}

/// Every gfx12 code object disassembled before and after by llvm-objdump.
fn disasm_all(
    dir: &Path,
    ours_dir: &Path,
    done: &[Done],
    threads: usize,
    scratch: &Path,
) -> Result<()> {
    let Some(objdump) = llvm::objdump() else {
        bail!("llvm-objdump of llvm-19 is not installed (apt-get install llvm-19)");
    };
    let started = Instant::now();
    let totals = Mutex::new((0u64, 0u64, 0usize));
    // each comparison runs two llvm-objdump at once
    parallel(done, (threads / 2).max(1), |d| {
        let mut scratch_buf = Scratch::default();
        let original = std::fs::read(dir.join(&d.name))?;
        let rewritten = if d.sites > 0 {
            std::fs::read(ours_dir.join(&d.name))?
        } else {
            original.clone()
        };
        let plain = |bytes: &[u8], s: &mut Scratch| -> Result<Vec<u8>> {
            if bytes.starts_with(bundle::CCOB) {
                bundle::decompress(bytes, s).map_err(|e| anyhow::anyhow!("{}: {e}", d.name))?;
                Ok(std::mem::take(&mut s.out))
            } else {
                Ok(bytes.to_vec())
            }
        };
        let before = plain(&original, &mut scratch_buf)?;
        let after = plain(&rewritten, &mut scratch_buf)?;
        let objects = |p: &[u8]| -> Result<Vec<(usize, usize)>> {
            if p.starts_with(bundle::ELF) {
                return Ok(vec![(0, p.len())]);
            }
            Ok(bundle::entries(p)
                .map_err(|e| anyhow::anyhow!("{}: {e}", d.name))?
                .iter()
                .filter(|e| e.gfx().is_some_and(|g| g.starts_with("gfx120")))
                .map(|e| (e.offset, e.bytes.len()))
                .collect())
        };
        let mut sites = 0;
        for (offset, len) in objects(&before)? {
            let c = llvm::compare_disassembly(
                &objdump,
                &before[offset..offset + len],
                &after[offset..offset + len],
                scratch,
            )
            .map_err(|e| anyhow::anyhow!("{}: {e}", d.name))?;
            sites += c.sites as usize;
            let mut t = totals.lock().expect("no panics hold the lock");
            t.0 += c.instructions;
            t.1 += c.sites;
            t.2 += 1;
        }
        ensure!(
            sites == d.sites,
            "{}: llvm-objdump shows {sites} sites, the rewrite changed {}",
            d.name,
            d.sites
        );
        Ok(())
    })?;
    let (instructions, sites, objects) = totals.into_inner().expect("no panics hold the lock");
    println!(
        "disasm-all: {objects} code objects, {instructions} instructions, {sites} sites: llvm-objdump agrees (listings equal but for the sites, boundaries the walker's) in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn cpu_seconds() -> f64 {
    usage().map_or(0.0, |u| {
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    })
}

/// This process's peak resident set, KiB.
fn peak_rss_kib() -> u64 {
    usage().map_or(0, |u| u64::try_from(u.ru_maxrss).unwrap_or(0))
}

fn usage() -> Option<libc::rusage> {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    (unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0).then_some(usage)
}
