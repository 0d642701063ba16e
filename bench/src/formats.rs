//! What the package benchmark knows of each format beyond the library's
//! `PackageFormat` (name, file names, writer, compressor): the reference
//! tools that build and list its packages, nfpm's packager, and how our
//! writer lays out the payload it compresses. [`of`] is the bench's one
//! `match` over formats; the rest of the bench asks what it returns.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::inputs::{Inputs, EPOCH};
use crate::reference::{self, Job, Jobs, Setting, Stage};
use xtask::formats::tar::{write_tree, Names};
use xtask::formats::{rpm, FileTree, Format};
use xtask::shared::hash::memo::Memo;
use xtask::shared::settings::Environment;

/// The uncompressed payload our writer streams through its compressor,
/// written to `w` from the DKMS tree below its prefix.
pub(crate) type Payload = fn(BufWriter<File>, &FileTree, &str) -> Result<BufWriter<File>>;

/// The bench's view of one format.
pub(crate) struct Bench {
    /// nfpm's `--packager`; none where nfpm has no such format.
    pub(crate) nfpm: Option<&'static str>,
    /// The reference tools, and the Debian packages that hold them.
    pub(crate) tools: &'static [&'static str],
    pub(crate) tool_packages: &'static str,
    /// A shell line listing the paths in package `$1`.
    pub(crate) list: &'static str,
    /// `tar` or `cpio`: the payload archive, and how to write it.
    pub(crate) archive: &'static str,
    pub(crate) payload: Payload,
    /// The reference builds of the format.
    pub(crate) jobs: Jobs,
}

/// The bench's view of `format`.
pub(crate) fn of(format: Format) -> Bench {
    match format {
        Format::Deb => Bench {
            nfpm: Some("deb"),
            tools: &["dpkg-deb", "cp"],
            tool_packages: "dpkg",
            list: "dpkg-deb --fsys-tarfile \"$1\" | tar -t",
            archive: "tar",
            payload: dot_slash_tar,
            jobs: reference::deb_jobs,
        },
        Format::Rpm => Bench {
            nfpm: Some("rpm"),
            tools: &["rpmbuild", "cp"],
            tool_packages: "rpm",
            list: "rpm -qpl --nosignature \"$1\"",
            archive: "cpio",
            payload: rpm_cpio,
            jobs: reference::rpm_jobs,
        },
        Format::Arch => Bench {
            nfpm: Some("archlinux"),
            tools: &["bsdtar", "zstd", "bash", "cp"],
            tool_packages: "libarchive-tools zstd",
            list: "bsdtar -tf \"$1\"",
            archive: "tar",
            payload: plain_tar,
            jobs: reference::arch_jobs,
        },
        Format::Tar => Bench {
            nfpm: None,
            tools: &["tar", "gzip", "bash", "cp"],
            tool_packages: "tar gzip",
            list: "bsdtar -tf \"$1\"",
            archive: "tar",
            payload: dkms_tar,
            jobs: reference::tar_jobs,
        },
    }
}

/// deb's `data.tar`: `./`-prefixed names.
pub(crate) fn dot_slash_tar(
    w: BufWriter<File>,
    tree: &FileTree,
    _prefix: &str,
) -> Result<BufWriter<File>> {
    write_tree(w, tree, EPOCH, Names::DotSlash)
}

/// The Arch package's files: plain names.
pub(crate) fn plain_tar(
    w: BufWriter<File>,
    tree: &FileTree,
    _prefix: &str,
) -> Result<BufWriter<File>> {
    write_tree(w, tree, EPOCH, Names::Plain)
}

/// rpm's cpio (newc) payload.
pub(crate) fn rpm_cpio(
    w: BufWriter<File>,
    tree: &FileTree,
    _prefix: &str,
) -> Result<BufWriter<File>> {
    rpm::write_payload(tree, EPOCH, w, &Memo::default())
}

/// The DKMS tarball's tree: the source below `prefix` as
/// `dkms_source_tree/`, beside an empty `dkms_main_tree/`.
pub(crate) fn dkms_tar(
    w: BufWriter<File>,
    tree: &FileTree,
    prefix: &str,
) -> Result<BufWriter<File>> {
    let mut tar = tree.subtree(prefix)?.nested("dkms_source_tree")?;
    tar.add_dir("dkms_main_tree")?;
    write_tree(w, &tar, EPOCH, Names::DotSlash)
}

/// Fails unless the tools of `format`'s reference build are installed,
/// saying what to install.
pub(crate) fn check_tools(format: Format, env: &Environment) -> Result<()> {
    let bench = of(format);
    let (tools, packages) = (bench.tools, bench.tool_packages);
    for tool in tools {
        if env.which(tool).is_none() {
            bail!(
                "`{tool}` is missing for the {} reference: apt-get install {packages}",
                format.as_str()
            );
        }
    }
    Ok(())
}

/// Prepares `dir` for `format`'s reference builds from what build-dkms
/// published in `inputs` and returns the jobs at each setting; one job when
/// the tool's default is our compressor and level.
pub(crate) fn stage(
    format: Format,
    inputs: &Inputs,
    dir: &Path,
    out: &Path,
) -> Result<Vec<(Setting, Job)>> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let pkg = dir.join("pkg");
    let ours = inputs.published(format);
    let out_dir = |s: Setting| out.join(format!("ref-{}-{}", format.as_str(), s.name()));
    let stage = Stage {
        inputs,
        ours: &ours,
        pkg: &pkg,
        dir,
        out_dir: &out_dir,
    };
    (of(format).jobs)(&stage)
}

/// Fails unless our package and the reference tool's hold the same
/// paths (the generated metadata files of each format aside).
pub(crate) fn same_entries(format: Format, ours: &Path, reference: &Path) -> Result<()> {
    let (a, b) = (entries(format, ours)?, entries(format, reference)?);
    if a != b {
        let only_ours: Vec<_> = a.difference(&b).take(5).collect();
        let only_ref: Vec<_> = b.difference(&a).take(5).collect();
        bail!(
            "the {} packages differ: only ours has {only_ours:?}, only the reference has {only_ref:?}",
            format.as_str()
        );
    }
    Ok(())
}

fn entries(format: Format, package: &Path) -> Result<std::collections::BTreeSet<String>> {
    let list = of(format).list;
    let out = Command::new("bash")
        .args(["-o", "pipefail", "-c", list, "bash"])
        .arg(package)
        .output()
        .with_context(|| format!("listing {}", package.display()))?;
    if !out.status.success() {
        bail!(
            "listing {} failed: {}",
            package.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").trim_matches('/').to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('.'))
        .collect())
}
