//! The patch engine: reads patches (parsed by [`crate::fetch::diff`]), places hunks ([`hunk`]) on
//! a confined [`tree::Tree`], applies a series all or nothing ([`apply`]) and
//! builds a patched tree in a staging folder before moving it into place
//! ([`stage`]). Apply reads and writes only the files the patches name.

pub mod apply;
pub(crate) mod hunk;
pub(crate) mod pristine;
pub(crate) mod scan;
pub mod stage;
pub mod tree;

use std::path::Path;

use anyhow::{bail, Context, Result};

pub use apply::{Check, PatchState};
pub use hunk::Tolerance;

use crate::fetch::FetchedPatch;
use crate::input::placement::Placement;
use crate::input::recipe::{PatchOrigin, Recipe};
use crate::shared::hash::sha256_hex;

/// One patch of a series, its bytes in memory (patches are small).
#[derive(Debug, Clone)]
pub struct PatchInput {
    pub(crate) name: String,
    pub(crate) bytes: Vec<u8>,
    pub(crate) sha256: String,
    /// The fuzz the recipe allows this patch (0: exact context).
    pub fuzz: usize,
    /// Where its paths land in the tree.
    pub(crate) place: Placement,
    /// Tree path -> the git blob id the file must have once the patch
    /// landed (the recipe's `produces`); checked by [`apply::series`].
    pub(crate) produces: std::collections::BTreeMap<String, String>,
}

impl PatchInput {
    pub fn new(name: impl Into<String>, bytes: Vec<u8>) -> PatchInput {
        PatchInput {
            name: name.into(),
            sha256: sha256_hex(&bytes),
            bytes,
            fuzz: 0,
            place: Placement::default(),
            produces: Default::default(),
        }
    }

    /// The same patch with what its recipe entry (by name) says of it: the
    /// fuzz it allows and where its paths land.
    pub(crate) fn for_recipe(mut self, recipe: &Recipe) -> PatchInput {
        if let Some(p) = recipe.patches.iter().find(|p| p.name == self.name) {
            self.fuzz = p.fuzz;
            self.place = p.place.clone();
            self.produces = p.pin.produces.clone();
        }
        self
    }

    /// Reads a patch file.
    pub fn read(name: impl Into<String>, path: &Path) -> Result<PatchInput> {
        let bytes =
            std::fs::read(path).with_context(|| format!("reading patch {}", path.display()))?;
        Ok(PatchInput::new(name, bytes))
    }

    /// Reads a fetched patch and checks it still has the sha256 it was verified by.
    pub(crate) fn fetched(patch: &FetchedPatch) -> Result<PatchInput> {
        let input = PatchInput::read(&patch.name, &patch.path)?;
        if input.sha256 != patch.sha256 {
            bail!(
                "patch {} at {} has sha256 {} but was verified as {}; the cache was changed, fetch again",
                patch.name,
                patch.path.display(),
                input.sha256,
                patch.sha256
            );
        }
        Ok(input)
    }

    /// The file changes the patch makes, at the paths its placement gives.
    pub(crate) fn parse(&self) -> Result<Vec<crate::fetch::diff::FilePatch>> {
        let mut files = apply::parse_named(&self.name, &self.bytes)?;
        if self.place == Placement::default() {
            return Ok(files);
        }
        for file in &mut files {
            for path in [&mut file.old, &mut file.new].into_iter().flatten() {
                *path = self.place.place(path).with_context(|| {
                    format!(
                        "patch {}: `{path}` has no more than {} leading folders to drop (strip = {}); lower `strip` in the recipe's [[patch]] entry",
                        self.name, self.place.strip, self.place.strip
                    )
                })?;
            }
        }
        Ok(files)
    }
}

/// The series of a recipe whose patches are all curated files, read without
/// fetching; `None` when some patch must be fetched first.
pub(crate) fn local_series(recipe: &Recipe) -> Result<Option<Vec<PatchInput>>> {
    let mut inputs = Vec::new();
    for patch in &recipe.patches {
        match &patch.origin {
            PatchOrigin::File { path } => {
                inputs.push(PatchInput::read(&patch.name, path)?.for_recipe(recipe))
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(inputs))
}

/// The series of a recipe: read in place when every patch is a curated
/// file, fetched (through the cache) otherwise.
pub(crate) fn recipe_series(
    ws: &crate::input::workspace::Workspace,
    recipe: &Recipe,
    offline: bool,
) -> Result<Vec<PatchInput>> {
    if let Some(inputs) = local_series(recipe)? {
        return Ok(inputs);
    }
    let opts = crate::fetch::FetchOptions {
        offline,
        ..Default::default()
    };
    let fetched = crate::fetch::fetch(ws, recipe, &opts)
        .with_context(|| format!("fetching the patches of {}", recipe.name))?;
    placed(recipe, &fetched.patches)
}

/// The fetched patches of `recipe`, each with its entry's fuzz and placement.
pub(crate) fn placed(recipe: &Recipe, fetched: &[FetchedPatch]) -> Result<Vec<PatchInput>> {
    fetched
        .iter()
        .map(|p| Ok(PatchInput::fetched(p)?.for_recipe(recipe)))
        .collect()
}
