//! `cargo xtask lock <recipe>`: resolves refs and hashes downloads, and
//! writes the pins (`commit`, `sha256`) into the recipe file.

use anyhow::Result;

use crate::fetch::lock;
use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;
use crate::shared::diag::display_path;

/// Write pins (commit, sha256) for a recipe's inputs into the recipe file
///
/// `commit` for a git source (where `ref` points now; a stale pin moves
/// with its `ref`), `sha256` for a tarball and url patches that have none,
/// and `diff_sha256` (of the normalised diff) for upstream commit patches
/// that have none, checked first against their `produces` when they have
/// it. A pin that is set is kept.
///
/// The recipe file keeps its formatting and comments; review the diff and
/// commit it. Downloads made while locking are verified into the cache.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    pub(crate) recipe: String,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let recipe = Recipe::load(&ws.root, &args.recipe)?;
    let changes = lock::lock(ws, &recipe)?;
    let file = display_path(&recipe.path);
    if changes.is_empty() {
        crate::outln!("{}: every pin is current", file.display());
        return Ok(());
    }
    for change in &changes {
        let what = match &change.patch {
            Some(name) => format!("{} ({name})", change.key),
            None => change.key.clone(),
        };
        let old = change.old.as_deref().unwrap_or("(none)");
        crate::outln!("{what}: {old} -> {}", change.new);
        if let Some(note) = &change.note {
            crate::outln!("  {note}");
        }
    }
    crate::outln!("wrote {} pin(s) into {}", changes.len(), file.display());
    Ok(())
}
