//! `cargo xtask verify <tree> [--recipe R] [--json]`: a tree checked
//! against its state record, or, without a record, against a recipe's series.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::apply::drift::checks_to_text;
use crate::apply::patch::{self, PatchState};
use crate::apply::verify::{self, TreeReport};
use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;

/// A published dist/<recipe>/ (it has SHA256SUMS): every file is checked
/// against SHA256SUMS and manifest.json; exit status 0 only when both agree
/// with what is there.
///
/// With a state record in TREE/.patchkit/: every patch is reported applied,
/// not applied or changed after apply, then every file changed that no patch
/// touched; exit status 0 only when the tree is exactly as recorded.
///
/// Without a record, `--recipe` says for each patch of the recipe whether the
/// tree already carries it (applied), would take it (not applied) or
/// conflicts; exit status 0 unless a patch conflicts.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The tree (or published dist/<recipe>/ folder) to check
    pub(crate) tree: PathBuf,
    /// Check a tree without a record against this recipe's series
    #[arg(long, value_name = "RECIPE")]
    pub(crate) recipe: Option<String>,
    /// Print the report as JSON
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) series: super::SeriesArgs,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let has_record = crate::apply::state::state_path(&args.tree).is_file();
    if !has_record && args.recipe.is_none() && args.tree.join(crate::release::dist::SUMS).is_file()
    {
        return verify_dist(args);
    }
    if let (Some(name), false) = (&args.recipe, has_record) {
        let recipe = Recipe::load(&ws.root, name)?;
        let series = patch::recipe_series(ws, &recipe, args.series.offline)?;
        let tol = args.series.tolerance();
        let checks = verify::tree_against_series(&args.tree, &series, tol)?;
        if args.json {
            crate::shared::report::out_json(&serde_json::to_string_pretty(&checks)?);
        } else {
            crate::shared::report::out(&checks_to_text(&checks));
        }
        let conflicts = checks
            .iter()
            .filter(|c| c.verdict == PatchState::Conflicts)
            .count();
        if conflicts > 0 {
            bail!(
                "{conflicts} patches of {} conflict with {}",
                recipe.name,
                args.tree.display()
            );
        }
        return Ok(());
    }
    let memo = crate::shared::hash::memo::Memo::default();
    let report = verify::tree(&args.tree, &memo, &ws.reporter)?;
    if args.json {
        crate::shared::report::out_json(&serde_json::to_string_pretty(&report)?);
    } else {
        crate::shared::report::out(&to_text(&report));
    }
    if !report.ok {
        bail!("{} differs from its state record", args.tree.display());
    }
    rewrites_hold(&args.tree, args.json)
}

/// A tree that records a binary rewrite: every kernel file read again, and
/// none may still switch expert scheduling on.
fn rewrites_hold(tree: &std::path::Path, json: bool) -> Result<()> {
    let Some((state, _)) = crate::apply::state::read(tree)? else {
        return Ok(());
    };
    if state.rewrites().is_empty() {
        return Ok(());
    }
    let left = crate::line::transform::expert_sched_off::sites_left(tree)?;
    if !json {
        crate::shared::report::out_line(&if left.is_empty() {
            "ok: no kernel file switches expert scheduling on".to_owned()
        } else {
            format!(
                "{} kernel file(s) still switch expert scheduling on",
                left.len()
            )
        });
    }
    if let Some((path, n)) = left.first() {
        bail!(
            "{path} of {} switches expert scheduling on at {n} site(s)",
            tree.display()
        );
    }
    Ok(())
}

fn to_text(report: &TreeReport) -> String {
    let mut out = format!(
        "tree {} (recipe {} {}, {} source {})\n",
        report.tree.display(),
        report.recipe.name,
        report.recipe.version,
        report.source.kind,
        report.source.pin.as_deref().unwrap_or("unpinned")
    );
    for p in &report.patches {
        out.push_str(&format!("{:<20} {}\n", p.status.as_str(), p.patch));
        for f in &p.files {
            out.push_str(&format!("    {f}\n"));
        }
    }
    if !report.extra.is_empty() {
        out.push_str("files changed that no patch touched:\n");
        for e in &report.extra {
            let change = serde_json::to_value(e.change).unwrap_or_default();
            out.push_str(&format!(
                "    {:<9} {}\n",
                change.as_str().unwrap_or("?"),
                e.path
            ));
        }
    }
    out.push_str(if report.ok {
        "ok: the tree is exactly as recorded\n"
    } else {
        "the tree differs from its record\n"
    });
    out
}

/// Checks a published folder against its `SHA256SUMS` and `manifest.json`.
fn verify_dist(args: &Args) -> Result<()> {
    let problems = crate::release::dist::verify(&args.tree)?;
    let shown = crate::shared::diag::display_path(&args.tree);
    if args.json {
        crate::shared::report::out_json(&serde_json::to_string_pretty(
            &serde_json::json!({ "dist": shown, "ok": problems.is_empty(), "problems": problems }),
        )?);
    } else {
        for problem in &problems {
            crate::outln!("{problem}");
        }
    }
    if !problems.is_empty() {
        bail!(
            "{} does not match its SHA256SUMS and manifest.json ({} problems)",
            shown.display(),
            problems.len()
        );
    }
    if !args.json {
        crate::outln!("ok: {} is exactly as published", shown.display());
    }
    Ok(())
}
