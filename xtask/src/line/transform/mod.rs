//! The apply stage as a transform of a tree: the pristine tree, extracted
//! once per pin, made into the tree a build packages by a [`Transform`]
//! (the recipe's text patches, or the `expert-sched-off` binary rewrite),
//! recorded in the tree's state record and copied into the build manifest
//! (hunk placements for patches, rewrite sites for rewrites), and verified.
//! Every transform follows the same rules: a tree is reused only when its
//! whole state record is the one the transform would write ([`made_by`]),
//! and a reused tree that no longer verifies is made again once.

pub(crate) mod expert_sched_off;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::apply::extract::Selection;
use crate::apply::patch::pristine::{self, Pristine};
use crate::apply::patch::{stage, Tolerance};
use crate::apply::state::{self, State};
use crate::fetch::Fetched;
use crate::input::recipe::Recipe;
use crate::release::manifest::Manifest;
use crate::shared::hash::memo::Memo;
use crate::shared::report::Reporter;

/// What the apply stage does to the pristine tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transform {
    /// The recipe's patch series, applied by the patch engine with this
    /// tolerance; hunk placements recorded.
    Patches(Tolerance),
    /// The binary rewrite of every gfx12 kernel file
    /// ([`expert_sched_off`]); the sites rewritten recorded.
    ExpertSchedOff,
}

/// The tree a transform made: where it is, the pristine tree it was made
/// from, and whether an earlier run left it.
pub(crate) struct Applied {
    pub(crate) tree: PathBuf,
    pub(crate) pristine: Pristine,
    pub(crate) reused: bool,
}

impl Transform {
    /// Makes the tree of `to` afresh from its pristine tree and writes its
    /// state record.
    fn apply(self, recipe: &Recipe, fetched: &Fetched, to: &Applied, r: &Reporter) -> Result<()> {
        let (pristine, dest, reporter) = (&to.pristine, to.tree.as_path(), r);
        match self {
            Transform::Patches(tol) => {
                stage::apply_recipe_from(recipe, fetched, pristine, dest, tol, reporter).map(|_| ())
            }
            Transform::ExpertSchedOff => {
                expert_sched_off::apply(recipe, fetched, pristine, dest, reporter)
            }
        }
    }

    /// Whether `tree` is as its state record says the transform left it.
    fn check(self, tree: &Path, memo: &Memo, reporter: &Reporter) -> Result<bool> {
        match self {
            Transform::Patches(_) => Ok(crate::apply::verify::tree(tree, memo, reporter)?.ok),
            Transform::ExpertSchedOff => expert_sched_off::check(tree, memo, reporter),
        }
    }

    /// Copies what the transform did, from the state record of `tree`,
    /// into the build manifest.
    fn record(self, tree: &Path, manifest: &mut Manifest) -> Result<()> {
        match self {
            Transform::Patches(_) => manifest.record_placement(tree),
            Transform::ExpertSchedOff => {
                let (record, _) =
                    state::read(tree)?.context("the rewritten tree has its state record")?;
                manifest.rewrites = crate::release::manifest::rewrites_of(&record);
                Ok(())
            }
        }
    }

    /// The words of the reporter's lines: the tree is already `done`, was
    /// changed since it was `made`, and is made `again`.
    fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Transform::Patches(_) => (
                "patched with this series",
                "applied",
                "applying the series again",
            ),
            Transform::ExpertSchedOff => ("rewritten", "rewritten", "rewriting it again"),
        }
    }

    /// The patches the transform records, in series order.
    fn patches(self, fetched: &Fetched) -> &[crate::fetch::FetchedPatch] {
        match self {
            Transform::Patches(_) => &fetched.patches,
            Transform::ExpertSchedOff => &[],
        }
    }

    /// The rewrites the transform records, by name.
    fn rewrites(self) -> &'static [&'static str] {
        match self {
            Transform::Patches(_) => &[],
            Transform::ExpertSchedOff => &[expert_sched_off::TRANSFORM],
        }
    }

    /// The fuzz the transform records.
    fn fuzz(self) -> usize {
        match self {
            Transform::Patches(tol) => tol.fuzz,
            Transform::ExpertSchedOff => 0,
        }
    }
}

/// Whether `recorded` is exactly the state record `transform` would write
/// for these inputs: the same recipe and version, the same pinned source
/// and selection, the same patches in order, the same rewrites, the same
/// tolerance, this tool. A tree applied with `apply --fuzz N` is not the
/// strict tree a build makes.
pub(crate) fn made_by(
    recorded: &State,
    recipe: &Recipe,
    fetched: &Fetched,
    transform: Transform,
) -> bool {
    let pin = crate::apply::extract::source_pin(&fetched.source, &Selection::of(&recipe.source));
    let patches = transform.patches(fetched);
    let same_patches = recorded.patches().len() == patches.len()
        && recorded
            .patches()
            .iter()
            .zip(patches)
            .all(|(r, f)| r.name == f.name && r.sha256 == f.sha256);
    let same_rewrites = recorded
        .rewrites()
        .iter()
        .map(|r| r.transform.as_str())
        .eq(transform.rewrites().iter().copied());
    same_patches
        && same_rewrites
        && recorded.format == state::FORMAT
        && recorded.recipe.name == recipe.name
        && recorded.recipe.version == recipe.package.about.version
        && pin.pin.is_some()
        && pin == recorded.source
        && recorded.tolerance
            == (state::ToleranceRecord {
                fuzz: transform.fuzz(),
            })
        && recorded.tool == state::ToolRef::current()
}

/// The ensure-applied step: the pristine tree, extracted once per pin and
/// verified, and the tree at `<work>/tree`, kept when its state record is
/// exactly what `transform` would write (checked again by [`verify`]),
/// else made afresh from a hard-link copy of the pristine tree.
pub(crate) fn ensure_applied(
    transform: Transform,
    recipe: &Recipe,
    fetched: &Fetched,
    work: &Path,
    memo: &Memo,
    limits: crate::apply::extract::Limits,
    reporter: &Reporter,
) -> Result<Applied> {
    let dest = work.join("tree");
    let pristine = pristine::ensure(
        recipe,
        &fetched.source,
        &work.join("pristine"),
        memo,
        limits,
        reporter,
    )?;
    let reused = matches!(state::read(&dest), Ok(Some((recorded, _)))
        if made_by(&recorded, recipe, fetched, transform));
    let applied = Applied {
        tree: dest,
        pristine,
        reused,
    };
    if reused {
        let (done, _, _) = transform.words();
        reporter.step(format!(
            "apply: {} is already {done}",
            applied.tree.display()
        ));
    } else {
        transform.apply(recipe, fetched, &applied, reporter)?;
    }
    Ok(applied)
}

/// The verify step: the tree against its state record (a kept tree that
/// no longer matches is made again once), then what the transform did
/// copied into the build manifest.
pub(crate) fn verify(
    transform: Transform,
    applied: &Applied,
    recipe: &Recipe,
    fetched: &Fetched,
    manifest: &mut Manifest,
    memo: &Memo,
    reporter: &Reporter,
) -> Result<()> {
    let tree = &applied.tree;
    let (_, made, again) = transform.words();
    let mut ok = transform.check(tree, memo, reporter)?;
    if !ok && applied.reused {
        reporter.warn(format!(
            "{} was changed since it was {made}: {again}",
            tree.display()
        ));
        transform.apply(recipe, fetched, applied, reporter)?;
        ok = transform.check(tree, memo, reporter)?;
    }
    if !ok {
        bail!(
            "the tree just {made} at {} does not verify: run `cargo xtask verify {}`",
            tree.display(),
            tree.display()
        );
    }
    transform.record(tree, manifest)
}
