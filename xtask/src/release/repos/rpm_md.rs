//! The rpm repository (`rpm/`): signed copies of the `.rpm` files
//! (`rpmsign --addsign`), `repodata/` written by createrepo_c, and
//! `repomd.xml.asc`.
//!
//! createrepo_c rather than ours: `primary.xml`, `filelists.xml` and
//! `other.xml` carry every dependency with its flags, every file, the
//! changelog and the header's byte range of each signed package, read from
//! the rpm header; dnf is strict about them and createrepo_c is Fedora's own
//! writer. Its output is made a function of the inputs by giving it the
//! publication's time as revision and timestamps
//! (`--set-timestamp-to-revision`) and every package that mtime.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::gpg::Signer;
use crate::shared::diag::UsageError;

/// Signed copies of `rpms` in `dir`, with `repodata/` and its signature.
pub(crate) fn write(dir: &Path, rpms: &[PathBuf], signer: &Signer) -> Result<()> {
    let copies = sign_copies(dir, rpms, signer)?;
    for copy in &copies {
        set_mtime(copy, signer.time())?;
    }
    let createrepo = tool(
        signer,
        "createrepo_c",
        "createrepo-c (Debian, Ubuntu) or createrepo_c (Fedora, Arch)",
    )?;
    let mut cmd = Command::new(createrepo);
    cmd.arg(format!("--revision={}", signer.time()))
        .args([
            "--set-timestamp-to-revision",
            "--no-database",
            "--general-compress-type=gz",
            "--checksum=sha256",
            "--quiet",
        ])
        .arg(dir)
        .env("LC_ALL", "C.UTF-8")
        .env("TZ", "UTC");
    run(
        &mut cmd,
        &format!("indexing {} with createrepo_c", dir.display()),
    )?;
    let repomd = dir.join("repodata/repomd.xml");
    let asc = signer.detach_file(&repomd, true)?;
    super::sums::write(&dir.join("repodata/repomd.xml.asc"), asc)
}

/// Copies of `rpms` in `dir`, signed there (`rpmsign --addsign` changes the
/// file it is given, so the published ones are never handed to it).
pub(crate) fn sign_copies(dir: &Path, rpms: &[PathBuf], signer: &Signer) -> Result<Vec<PathBuf>> {
    let mut copies = Vec::new();
    for rpm in rpms {
        let copy = dir.join(rpm.file_name().context("an rpm without a file name")?);
        super::sums::copy(rpm, &copy)?;
        copies.push(copy);
    }
    if copies.is_empty() {
        return Ok(copies);
    }
    let rpmsign = tool(
        signer,
        "rpmsign",
        "rpm (Debian, Ubuntu: it has rpmsign) or rpm-sign (Fedora)",
    )?;
    let mut cmd = Command::new(rpmsign);
    // Debian's rpm names /usr/bin/gpg2, which Debian does not ship: say
    // which gpg, and how it signs (at the publication's time).
    cmd.arg("--define")
        .arg(format!("__gpg {}", signer.gpg().display()))
        .arg("--define")
        .arg(format!("_gpg_name {}", signer.fingerprint))
        .arg("--define")
        .arg(format!(
            "_gpg_sign_cmd_extra_args --batch --no-tty {}",
            signer.faked_time_arg()
        ));
    if let Some(home) = signer.home() {
        cmd.arg("--define")
            .arg(format!("_gpg_path {}", home.display()));
    }
    cmd.arg("--addsign").args(&copies).env("LC_ALL", "C.UTF-8");
    run(
        &mut cmd,
        &format!("signing the rpm packages in {}", dir.display()),
    )?;
    Ok(copies)
}

/// A tool on PATH, or an error saying which package brings it.
fn tool(signer: &Signer, program: &str, package: &str) -> Result<PathBuf> {
    signer.which(program).ok_or_else(|| {
        UsageError(format!(
            "{program} is not installed: install {package}, then publish again"
        ))
        .into()
    })
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("{what}: starting the tool"))?;
    if !out.status.success() {
        bail!(
            "{what}: {} failed ({}): {}{}",
            cmd.get_program().to_string_lossy(),
            out.status,
            crate::shared::report::safe(String::from_utf8_lossy(&out.stdout).trim()),
            crate::shared::report::safe(String::from_utf8_lossy(&out.stderr).trim())
        );
    }
    Ok(())
}

fn set_mtime(path: &Path, time: i64) -> Result<()> {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(time.max(0) as u64);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(when))
        .with_context(|| format!("setting the mtime of {}", path.display()))
}
