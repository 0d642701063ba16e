//! The binary build: CMake configure, build and install into a staging
//! root, each a subprocess whose output goes to one build log, shown as a
//! spinner with elapsed time; a failure ends with the tail of the log.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::toolchain::Toolchain;
use crate::shared::report::Reporter;

/// Lines of the log printed when a step fails.
pub(crate) const TAIL_LINES: usize = 40;

/// What to build, where, for which GPUs.
#[derive(Debug, Clone)]
pub(crate) struct BuildSpec<'a> {
    pub(crate) toolchain: &'a Toolchain,
    /// `<tree>/projects/hipblaslt`.
    pub(crate) source: PathBuf,
    /// The CMake build folder (made afresh).
    pub(crate) build: PathBuf,
    /// The staging root `cmake --install` writes into via `DESTDIR` (made afresh).
    pub(crate) root: PathBuf,
    /// Absolute install prefix inside the root (`/opt/rocm-patchkit/hipblaslt-7.1.1`).
    pub(crate) prefix: String,
    /// `gfx1200;gfx1201`.
    pub(crate) gpu_targets: String,
    pub(crate) jobs: usize,
    pub(crate) source_date_epoch: i64,
    pub(crate) log: PathBuf,
}

/// The configure arguments: release build, a RUNPATH that finds the
/// library's siblings and the ROCm it was built against (the prefix is
/// not below /opt/rocm, so upstream's `$ORIGIN/../lib` alone would not),
/// the GPU targets under both
/// names hipBLASLt has used (`GPU_TARGETS`, `AMDGPU_TARGETS`), clients,
/// tests, samples and benchmarks off under their old (`BUILD_CLIENTS_*`)
/// and new (`HIPBLASLT_ENABLE_CLIENT`, `HIPBLASLT_BUILD_TESTING`) names.
pub(crate) fn configure_args(spec: &BuildSpec) -> Vec<String> {
    let tc = spec.toolchain;
    let mut args = vec![
        "-S".to_owned(),
        spec.source.display().to_string(),
        "-B".to_owned(),
        spec.build.display().to_string(),
        "-DCMAKE_BUILD_TYPE=Release".to_owned(),
        format!("-DCMAKE_INSTALL_PREFIX={}", spec.prefix),
        format!("-DCMAKE_PREFIX_PATH={}", tc.prefix.display()),
        format!("-DCMAKE_CXX_COMPILER={}", tc.cxx.display()),
        format!(
            "-DCMAKE_INSTALL_RPATH=$ORIGIN/../lib:{0}/lib:{0}/llvm/lib",
            tc.prefix.display()
        ),
        format!("-DGPU_TARGETS={}", spec.gpu_targets),
        format!("-DAMDGPU_TARGETS={}", spec.gpu_targets),
        "-DBUILD_CLIENTS_TESTS=OFF".to_owned(),
        "-DBUILD_CLIENTS_BENCHMARKS=OFF".to_owned(),
        "-DBUILD_CLIENTS_SAMPLES=OFF".to_owned(),
        "-DHIPBLASLT_ENABLE_CLIENT=OFF".to_owned(),
        "-DHIPBLASLT_BUILD_TESTING=OFF".to_owned(),
        "-DHIPBLASLT_ENABLE_SAMPLES=OFF".to_owned(),
        "-DBUILD_TESTING=OFF".to_owned(),
    ];
    if let Some(cc) = &tc.cc {
        args.push(format!("-DCMAKE_C_COMPILER={}", cc.display()));
    }
    args
}

/// Configures, builds and installs; the staging root holds the result.
pub(crate) fn build(spec: &BuildSpec, reporter: &Reporter) -> Result<()> {
    for dir in [&spec.build, &spec.root] {
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("removing the previous {}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut log = Log::create(&spec.log)?;
    let cmake = &spec.toolchain.cmake;

    let mut configure = Command::new(cmake);
    configure.args(configure_args(spec));
    log.run("configure", configure, spec, reporter)?;

    let mut build = Command::new(cmake);
    build
        .arg("--build")
        .arg(&spec.build)
        .arg("--parallel")
        .arg(spec.jobs.to_string());
    log.run("build", build, spec, reporter)?;

    let mut install = Command::new(cmake);
    install
        .arg("--install")
        .arg(&spec.build)
        .env("DESTDIR", &spec.root);
    log.run("install", install, spec, reporter)?;
    Ok(())
}

/// The build log, appended to by every step.
struct Log {
    path: PathBuf,
    file: File,
}

impl Log {
    fn create(path: &Path) -> Result<Log> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("creating the build log {}", path.display()))?;
        Ok(Log {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Runs `cmd` with its output appended to the log, showing a spinner
    /// with elapsed time and the count of log lines.
    fn run(
        &mut self,
        step: &str,
        mut cmd: Command,
        spec: &BuildSpec,
        reporter: &Reporter,
    ) -> Result<()> {
        let shown = format!("{cmd:?}");
        writeln!(self.file, "\n=== {step}: {shown}")
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.file.flush()?;
        let out = self.file.try_clone()?;
        let err = self.file.try_clone()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .env("SOURCE_DATE_EPOCH", spec.source_date_epoch.to_string())
            .env("ROCM_PATH", &spec.toolchain.prefix)
            .env("LC_ALL", "C");
        reporter.step(format!("{step}: {shown}"));
        let started = Instant::now();
        let mut progress = reporter.progress(format!("{step} (log lines)"), None, false);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {step}: {shown}"))?;
        let mut seen = self.file.stream_position()?;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            std::thread::sleep(Duration::from_millis(200));
            let (lines, end) = new_lines(&self.path, seen)?;
            seen = end;
            progress.inc(lines);
        };
        progress.finish();
        let secs = started.elapsed().as_secs_f64();
        if !status.success() {
            let tail = tail(&self.path, TAIL_LINES)?;
            bail!(
                "{step} failed ({status}) after {secs:.1}s; the last {TAIL_LINES} lines of {}:\n{tail}\n\
                 the whole log is {}; dist/ was left as it was",
                self.path.display(),
                self.path.display()
            );
        }
        reporter.step(format!("{step}: done in {secs:.1}s"));
        self.file.seek(SeekFrom::End(0))?;
        Ok(())
    }
}

/// Newlines written to `path` after byte `from`, and the new end.
fn new_lines(path: &Path, from: u64) -> Result<(u64, u64)> {
    let mut file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    file.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    let lines = buf.iter().filter(|b| **b == b'\n').count() as u64;
    Ok((lines, from + buf.len() as u64))
}

/// The last `n` lines of a file (lossy UTF-8).
pub(crate) fn tail(path: &Path, n: usize) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    Ok(lines[lines.len().saturating_sub(n)..].join("\n"))
}
