//! `cargo xtask drift <recipe> --against <upstream>`: whether the series
//! still applies to a newer upstream, patch by patch, with failing hunks.

use anyhow::{bail, Result};

use crate::apply::drift::{self, checks_to_text, Against};
use crate::apply::patch;
use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;

/// For each patch: `applied` (upstream carries it: drop it), `not applied`
/// (it still applies) or `conflicts` (upstream moved the code: refresh it),
/// with every hunk that failed. Exit status 0 only when the whole series
/// applies to the upstream as it is.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    pub(crate) recipe: String,
    /// The upstream: `git:<repo>#<commit>` or `<repo>@<commit>` (a local git
    /// repository; the commit may be a tag or a branch), a tar/tar.gz/tar.xz/
    /// tar.zst archive (the recipe's strip and include apply), or a folder
    /// holding the tree
    #[arg(long, value_name = "UPSTREAM")]
    pub(crate) against: String,
    /// Print the report as JSON
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) series: super::SeriesArgs,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let recipe = Recipe::load(&ws.root, &args.recipe)?;
    let against = Against::parse(&args.against)
        .map_err(|e| crate::shared::diag::UsageError(format!("--against: {e:#}")))?;
    let series = patch::recipe_series(ws, &recipe, args.series.offline)?;
    let tol = args.series.tolerance();
    let lock = ws.lock_work(&recipe.name)?;
    let scratch = lock.dir.clone();
    let report = drift::drift(
        &recipe,
        &series,
        &against,
        &scratch,
        ws.settings.extract,
        tol,
        &ws.reporter,
    )?;
    if args.json {
        crate::shared::report::out_json(&serde_json::to_string_pretty(&report)?);
    } else {
        crate::outln!("{} against {}", report.recipe, report.against);
        crate::shared::report::out(&checks_to_text(&report.checks));
    }
    if !report.applies() {
        bail!(
            "the series of {} does not apply to {} as it is: drop the applied patches, refresh the conflicting ones",
            recipe.name,
            report.against
        );
    }
    Ok(())
}
