//! What every build shares around a publication (the publication itself,
//! atomic, and its verification are `dist`): how a build ended
//! ([`Outcome`]), the record of the last publication that makes an
//! unchanged re-run a no-op ([`Stamp`]), the template bytes a build depends
//! on, and the lines that report what it wrote. Prints nothing: the
//! commands print the [`Outcome::to_text`] it returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::formats::Artifact;
use crate::release::dist::{self, Staging};
use crate::release::manifest::Manifest;
use crate::shared::report::{human_size, Reporter};

/// How a build ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    Published {
        dir: PathBuf,
        outputs: BTreeMap<String, dist::Output>,
    },
    UpToDate {
        dir: PathBuf,
    },
}

impl Outcome {
    /// What the `build-*` commands print: every output with its size, or
    /// that there was nothing to do; a line each.
    pub(crate) fn to_text(&self) -> String {
        let shown = |dir: &Path| crate::shared::diag::display_path(dir).display().to_string();
        match self {
            Outcome::UpToDate { dir } => {
                format!("{} is up to date: nothing to do\n", shown(dir))
            }
            Outcome::Published { dir, outputs } => {
                let mut text = String::new();
                for (name, output) in outputs {
                    text += &format!("{:>10}  {name}\n", human_size(output.size));
                }
                text += &format!(
                    "published {} (check it with `cargo xtask verify {}`)\n",
                    shown(dir),
                    shown(dir)
                );
                text
            }
        }
    }
}

/// Publishes `staging` with `manifest` (its outputs filled in), then records
/// the stamp that makes the next unchanged run a no-op.
pub(crate) fn finish(staging: Staging, manifest: Manifest, stamp: &Stamp) -> Result<Outcome> {
    let dir = staging.publish(|outputs| Manifest {
        outputs,
        ..manifest
    })?;
    stamp.write()?;
    let outputs = Manifest::read(&dir)
        .with_context(|| {
            format!(
                "reading back the manifest just published in {}",
                dir.display()
            )
        })?
        .outputs;
    Ok(Outcome::Published { dir, outputs })
}

/// The record, kept in the work dir, of the last publication this tool
/// made: the inputs digest, the tool binary that built it, and where.
pub(crate) struct Stamp {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
}

impl Stamp {
    /// The binary is part of the key (a changed tool must rebuild) but stays
    /// out of the manifest, which must not depend on the machine.
    pub(crate) fn new(path: PathBuf, manifest: &Manifest, out: &Path) -> Stamp {
        let exe = tool_identity();
        let text = format!("{} {exe} {}\n", manifest.inputs_digest, out.display());
        Stamp { path, text }
    }

    /// Records a finished publication.
    pub(crate) fn write(&self) -> Result<()> {
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&self.path, &self.text)
            .with_context(|| format!("writing {}", self.path.display()))
    }

    /// Whether `out` already holds exactly this build: same inputs digest,
    /// made by this very binary, and every recorded output present with its
    /// recorded size. (`cargo xtask verify` rehashes everything; this check
    /// stays fast.)
    pub(crate) fn up_to_date(&self, out: &Path, manifest: &Manifest) -> bool {
        let Some(published) = Manifest::read(out) else {
            return false;
        };
        published.inputs_digest == manifest.inputs_digest
            && std::fs::read_to_string(&self.path).is_ok_and(|t| t == self.text)
            && published
                .outputs
                .iter()
                .all(|(name, o)| std::fs::metadata(out.join(name)).is_ok_and(|m| m.len() == o.size))
    }
}

/// The running tool binary, by size and mtime: a rebuilt tool may write
/// other bytes, so what it made before is kept only for the same binary.
pub(crate) fn tool_identity() -> String {
    use std::os::unix::fs::MetadataExt;
    std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| format!("{} {}.{}", m.len(), m.mtime(), m.mtime_nsec()))
        .unwrap_or_default()
}

/// Every template's name and bytes: part of what a build depends on.
pub(crate) fn template_bytes(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    crate::release::render::template_files(dir)?
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name))
                .with_context(|| format!("reading template {name}"))?;
            Ok((name, bytes))
        })
        .collect()
}

/// As [`wrote`], with a note after the size (`15.1 MiB; ...`).
pub(crate) fn wrote_noting(reporter: &Reporter, artifact: &Artifact, dir: &Path, note: &str) {
    let sep = if note.is_empty() { "" } else { "; " };
    reporter.step(format!(
        "wrote {} ({}{sep}{note})",
        relative(&artifact.path, dir),
        human_size(artifact.size)
    ));
}

/// `path` relative to `base`, for messages.
fn relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}
