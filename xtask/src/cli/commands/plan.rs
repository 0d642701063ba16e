//! `cargo xtask plan <recipe> [--json] [--require-pinned]`: every input
//! with its pin, every patch with its hash and every output path. No
//! network, no writes.

use anyhow::{bail, Result};

use crate::input::plan;
use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    pub(crate) recipe: String,
    /// Print the plan as JSON (keys sorted, stable)
    #[arg(long)]
    pub(crate) json: bool,
    /// Fail (exit status 2) when an input has no pin, naming the `lock`
    /// command to run on a maintainer's machine; CI builds pinned recipes only
    #[arg(long)]
    pub(crate) require_pinned: bool,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let recipe = Recipe::load(&ws.root, &args.recipe)?;
    let unpinned = recipe.unpinned();
    if args.require_pinned && !unpinned.is_empty() {
        bail!(crate::shared::diag::UsageError(format!(
            "recipe `{}` is not pinned ({}): run `cargo xtask lock {}` on a maintainer's machine, \
             review `git diff {}` and commit it; CI builds pinned recipes only",
            recipe.name,
            unpinned.join(", "),
            recipe.name,
            crate::shared::diag::display_path(&recipe.path).display()
        )));
    }
    let plan = crate::line::plan::plan(&recipe)?;
    if args.json {
        crate::shared::report::out(&crate::shared::report::safe_json(&plan::to_json(&plan)?));
    } else {
        crate::shared::report::out(&plan::to_text(&plan));
    }
    Ok(())
}
