//! `cargo xtask list`: the recipes of the project, one a line.

use anyhow::Result;

use crate::recipe::{self, Recipe};
use crate::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(ws: &Workspace, _args: &Args) -> Result<()> {
    let names = recipe::list(&ws.root)?;
    let width = names.iter().map(String::len).max().unwrap_or(0);
    for name in names {
        match Recipe::load(&ws.root, &name) {
            Ok(r) => {
                let pins = if r.unpinned().is_empty() {
                    "pinned".to_owned()
                } else {
                    format!("unpinned: {}", r.unpinned().join(", "))
                };
                let kernel = r
                    .target
                    .kernel
                    .as_ref()
                    .map(|k| format!("  kernel {}", k.as_str()))
                    .unwrap_or_default();
                crate::outln!(
                    "{name:width$}  {:<9} {} {}  {} patches  {pins}{kernel}",
                    r.target.kind.as_str(),
                    r.package.name,
                    r.package.version,
                    r.patches.len()
                );
            }
            Err(_) => {
                crate::outln!(
                    "{name:width$}  INVALID (run `cargo xtask plan {name}` for the problems)"
                )
            }
        }
    }
    Ok(())
}
