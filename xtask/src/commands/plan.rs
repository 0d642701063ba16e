//! `cargo xtask plan <recipe> [--json]`: every input with its pin, every
//! patch with its hash and every output path. No network, no writes.

use anyhow::Result;

use crate::plan;
use crate::recipe::Recipe;
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    pub recipe: String,
    /// Print the plan as JSON (keys sorted, stable)
    #[arg(long)]
    pub json: bool,
}

pub fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let recipe = Recipe::load(&ws.root, &args.recipe)?;
    let plan = plan::plan(&recipe)?;
    if args.json {
        print!("{}", plan::to_json(&plan)?);
    } else {
        print!("{}", plan::to_text(&plan));
    }
    Ok(())
}
