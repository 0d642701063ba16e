//! `cargo xtask list`: the recipes of the project, one a line, each
//! unpinned input below it with the recipe's reason (`why_unpinned`).

use anyhow::Result;

use crate::input::recipe::{self, Recipe};
use crate::input::workspace::Workspace;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub(crate) fn run(ws: &Workspace, _args: &Args) -> Result<()> {
    let names = recipe::list(&ws.root)?;
    let width = names.iter().map(String::len).max().unwrap_or(0);
    for name in names {
        match Recipe::load(&ws.root, &name) {
            Ok(r) => {
                let reasons = r.unpinned_reasons();
                let pins = if reasons.is_empty() {
                    "pinned".to_owned()
                } else {
                    let inputs: Vec<String> = reasons.iter().map(|(i, _)| i.clone()).collect();
                    format!("unpinned: {}", inputs.join(", "))
                };
                let kernel = r
                    .target
                    .kernel
                    .as_ref()
                    .map(|k| format!("  kernel {}", k.as_str()))
                    .unwrap_or_default();
                crate::outln!(
                    "{name:width$}  {:<9} {} {}  {} patches  {pins}{kernel}",
                    r.kind.name().as_str(),
                    r.package.name,
                    r.package.about.version,
                    r.patches.len()
                );
                for (input, why) in reasons {
                    let why = why.unwrap_or_else(|| {
                        format!(
                            "no reason given; run `cargo xtask lock {name}` on a networked machine"
                        )
                    });
                    crate::shared::report::out_line(&format!("{:width$}    {input}: {why}", ""));
                }
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
