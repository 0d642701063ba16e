//! The build manifest (`dist/<recipe>/manifest.json`): which recipe, which
//! inputs with which pins, which patches with which hashes, which build
//! parameters and `SOURCE_DATE_EPOCH`, and every output with its size and
//! sha256. Shared by every kind of build; also the key of the no-op check.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::apply::state::ToolRef;
use crate::fetch::{Fetched, FetchedSource};
use crate::input::plan::Plan;
use crate::release::dist::Output;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) tool: ToolRef,
    pub(crate) recipe: String,
    pub(crate) recipe_file: String,
    pub(crate) kind: String,
    pub(crate) package: PackageRef,
    pub(crate) source_date_epoch: i64,
    pub(crate) source: InputRef,
    pub(crate) patches: Vec<PatchRef>,
    /// Build parameters: kernel release, formats, GPU targets, ...
    pub(crate) build: BTreeMap<String, String>,
    /// The binary rewrites of the tree (a rewrite recipe's transform), from
    /// its state record: per file the sha256 before and after and the sites
    /// rewritten. They follow from the inputs: not part of `inputs_digest`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) rewrites: Vec<RewriteRef>,
    /// sha256 over everything above plus the templates: equal keys mean an
    /// equal build, which is how a re-run knows it has nothing to do.
    pub(crate) inputs_digest: String,
    pub(crate) outputs: BTreeMap<String, Output>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PackageRef {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) release: String,
}

/// The source as fetched: its kind, where from, and the pin it was verified by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InputRef {
    pub(crate) kind: String,
    pub(crate) location: String,
    /// `commit <id>` or `sha256 <hex>`.
    pub(crate) pin: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PatchRef {
    pub(crate) index: usize,
    pub(crate) name: String,
    pub(crate) origin: String,
    pub(crate) sha256: String,
    /// Hunks that landed away from their stated line (or with fuzz), from
    /// the state record of the applied tree; absent when all landed in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) placement: Vec<crate::apply::state::HunkRecord>,
    /// How the patch applied, from the same record: `exact`, or the
    /// largest offset and fuzz any hunk needed (`offset +3, fuzz 1`).
    #[serde(default)]
    pub(crate) applied: String,
}

/// `exact`, `offset +3`, `fuzz 1` or `offset -2, fuzz 1`: the largest
/// offset and fuzz among `hunks` (those that did not land as written).
pub(crate) fn applied(hunks: &[crate::apply::state::HunkRecord]) -> String {
    let offset = hunks
        .iter()
        .map(|h| h.offset)
        .max_by_key(|o| o.unsigned_abs());
    let fuzz = hunks.iter().map(|h| h.fuzz).max().unwrap_or(0);
    let mut parts = Vec::new();
    if let Some(offset) = offset.filter(|o| *o != 0) {
        parts.push(format!("offset {offset:+}"));
    }
    if fuzz > 0 {
        parts.push(format!("fuzz {fuzz}"));
    }
    if parts.is_empty() {
        "exact".to_owned()
    } else {
        parts.join(", ")
    }
}

impl Manifest {
    /// Everything but the outputs; `templates` are (name, bytes) of every
    /// template the build renders.
    pub(crate) fn new(
        plan: &Plan,
        fetched: &Fetched,
        source_date_epoch: i64,
        build: BTreeMap<String, String>,
        templates: &[(String, Vec<u8>)],
    ) -> Result<Manifest> {
        let (kind, location) = source_location(plan);
        let pin = match &fetched.source {
            FetchedSource::Archive { sha256, .. } => format!("sha256 {sha256}"),
            FetchedSource::Git { commit, .. } => format!("commit {commit}"),
            FetchedSource::Dir { path } => {
                format!("tree-sha256 {}", crate::fetch::local::tree_sha256(path)?)
            }
        };
        let patches = plan
            .patches
            .iter()
            .zip(&fetched.patches)
            .map(|(planned, got)| PatchRef {
                index: planned.index,
                name: got.name.clone(),
                origin: patch_origin(&planned.origin),
                sha256: got.sha256.clone(),
                placement: Vec::new(),
                applied: String::new(),
            })
            .collect();
        let mut manifest = Manifest {
            tool: ToolRef::current(),
            recipe: plan.recipe.clone(),
            recipe_file: plan.recipe_file.clone(),
            kind: plan.kind.as_str().to_owned(),
            package: PackageRef {
                name: plan.package.name.clone(),
                version: plan.package.about.version.clone(),
                release: plan.package.about.release.clone(),
            },
            source_date_epoch,
            source: InputRef {
                kind,
                location,
                pin,
            },
            patches,
            build,
            rewrites: Vec::new(),
            inputs_digest: String::new(),
            outputs: BTreeMap::new(),
        };
        let mut hasher = Sha256::new();
        hasher.update(serde_json::to_vec(&manifest)?);
        hasher.update(serde_json::to_vec(plan)?);
        for (name, bytes) in templates {
            hasher.update(name.as_bytes());
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        }
        manifest.inputs_digest = hex::encode(hasher.finalize());
        Ok(manifest)
    }

    /// Copies where each patch's hunks landed, and how it applied, from the
    /// state record of the applied `tree`. Placement follows from the inputs, so it is not part
    /// of `inputs_digest`.
    pub(crate) fn record_placement(&mut self, tree: &std::path::Path) -> Result<()> {
        let Some((state, _)) = crate::apply::state::read(tree)? else {
            anyhow::bail!(
                "{} has no state record: apply the recipe again",
                tree.display()
            );
        };
        for patch in &mut self.patches {
            if let Some(record) = state.patches().iter().find(|r| r.name == patch.name) {
                patch.placement = record.hunks.clone();
                patch.applied = applied(&record.hunks);
            }
        }
        Ok(())
    }

    /// The manifest of a published folder, if it has a readable one.
    pub(crate) fn read(dir: &std::path::Path) -> Option<Manifest> {
        let bytes = std::fs::read(dir.join(crate::release::dist::MANIFEST)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// One binary rewrite as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RewriteRef {
    pub(crate) transform: String,
    /// Every site rewritten, in all files.
    pub(crate) sites: usize,
    pub(crate) files: Vec<RewrittenRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RewrittenRef {
    pub(crate) path: String,
    pub(crate) before: String,
    pub(crate) after: String,
    pub(crate) sites: usize,
}

/// The rewrites of a tree's state record, for the manifest (the sites'
/// offsets stay in the record).
pub(crate) fn rewrites_of(state: &crate::apply::state::State) -> Vec<RewriteRef> {
    state
        .rewrites()
        .iter()
        .map(|r| RewriteRef {
            transform: r.transform.clone(),
            sites: r.files.iter().map(|f| f.sites).sum(),
            files: r
                .files
                .iter()
                .map(|f| RewrittenRef {
                    path: f.path.clone(),
                    before: f.before.clone(),
                    after: f.after.clone(),
                    sites: f.sites,
                })
                .collect(),
        })
        .collect()
}

fn source_location(plan: &Plan) -> (String, String) {
    use crate::input::recipe::Source;
    match &plan.source.source {
        Source::Git { url, .. } => ("git".to_owned(), url.clone()),
        Source::Tarball { url, .. } => ("tarball".to_owned(), url.clone()),
        Source::Local { path, .. } => ("local".to_owned(), path.display().to_string()),
        Source::Deb(deb) => ("deb".to_owned(), deb.file_name()),
    }
}

fn patch_origin(origin: &crate::input::recipe::PatchOrigin) -> String {
    use crate::input::recipe::PatchOrigin;
    match origin {
        PatchOrigin::File { path } => format!("file {}", path.display()),
        PatchOrigin::Url { url, .. } => format!("url {url}"),
        PatchOrigin::Git { url, commit, .. } => format!("git {url} {commit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::applied;
    use crate::apply::state::HunkRecord;

    fn hunk(offset: isize, fuzz: usize) -> HunkRecord {
        HunkRecord {
            file: "a.c".to_owned(),
            fuzz,
            hunk: 1,
            line: 10,
            offset,
        }
    }

    #[test]
    fn applied_names_the_largest_offset_and_fuzz() {
        assert_eq!(applied(&[]), "exact");
        assert_eq!(applied(&[hunk(3, 0), hunk(-5, 0)]), "offset -5");
        assert_eq!(applied(&[hunk(0, 1)]), "fuzz 1");
        assert_eq!(applied(&[hunk(2, 0), hunk(0, 2)]), "offset +2, fuzz 2");
    }
}
