//! `cargo xtask apply <recipe> [--into DIR]`: the pinned source extracted,
//! the series applied, the state record written, all in a staging folder
//! that replaces DIR only once everything succeeded.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::apply::patch::stage;
use crate::fetch::{self, FetchOptions};
use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;

/// Extract the pinned source and apply the series atomically, with a state record
///
/// Where a hunk lands: its whole context must match exactly, at its stated
/// line or at the one other line it matches (as `git apply` does); a
/// context that matches at several other places is refused, naming them.
/// Each hunk that moved is reported and recorded in .patchkit/state.json
/// (line, offset, fuzz). A hunk that does not land is named with its file
/// and line, and, when the patch has git `index` lines, with what the file's
/// blob id says: another version of the file (a backport is needed, not an
/// offset) or the patch's post-image (the change is already there).
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    pub(crate) recipe: String,
    /// Where the patched tree goes; replaced only when the whole series
    /// applied, and only if DIR is new, empty or a tree apply made (with its
    /// .patchkit/state.json): a folder of your own files is refused
    /// [default: target/patchkit/work/<recipe>/tree]
    #[arg(long, value_name = "DIR")]
    pub(crate) into: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) series: super::SeriesArgs,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let recipe = Recipe::load(&ws.root, &args.recipe)?;
    let dest = args
        .into
        .clone()
        .unwrap_or_else(|| default_tree(ws, &recipe.name));
    if args.into.is_some() {
        stage::check_into(&dest)?;
    } else {
        stage::check_replaceable(&dest)?;
    }
    let opts = FetchOptions {
        offline: args.series.offline,
        ..Default::default()
    };
    let fetched = fetch::fetch(ws, &recipe, &opts)
        .with_context(|| format!("fetching the inputs of {}", recipe.name))?;
    let tol = args.series.tolerance();
    let _lock = ws.lock_work(&recipe.name)?;
    let report = stage::apply_recipe(
        &recipe,
        &fetched,
        &dest,
        ws.settings.extract,
        tol,
        &ws.reporter,
    )?;
    crate::outln!(
        "applied {} patches of {} to {} ({} files); record in {}",
        report.state.patches().len(),
        recipe.name,
        report.dest.display(),
        report.files,
        crate::apply::state::state_path(&report.dest).display()
    );
    Ok(())
}

/// `<work_dir>/<recipe>/tree`, where `apply` puts a tree by default.
pub(crate) fn default_tree(ws: &Workspace, recipe: &str) -> PathBuf {
    ws.work_dir.join(recipe).join("tree")
}
