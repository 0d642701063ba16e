//! The check build-hipblaslt makes of its own output: the gfx12 kernels of
//! the staged library are read ([`crate::gpu::codeobj`]) and must show the
//! expert-scheduling verdict the recipe requires (`target.expert_sched`),
//! or the build is refused before anything is published.

use std::path::Path;

use anyhow::{bail, Result};

use crate::gpu::codeobj::{self, Judgement, VerdictCache};
use crate::input::recipe::{ExpertSched, Recipe};

/// Where an installed hipBLASLt keeps its kernel library, below its prefix.
pub(crate) const LIBRARY: &str = "lib/hipblaslt/library";

/// Judges the kernels staged in `root` + `prefix`; errors when the recipe
/// requires a verdict the kernels do not show. Returns the verdict, for the
/// manifest.
pub(crate) fn check(
    recipe: &Recipe,
    root: &Path,
    prefix: &str,
    gpu_targets: &str,
) -> Result<String> {
    let dir = root.join(prefix.trim_start_matches('/')).join(LIBRARY);
    let shown = format!("{prefix}/{LIBRARY}");
    let builds_gfx12 = gpu_targets.split(';').any(|t| t.starts_with("gfx120"));
    let judgement = if dir.is_dir() {
        let threads = crate::shared::par::cores();
        codeobj::judge_library(&dir, &mut VerdictCache::in_memory(), threads)
    } else {
        Judgement::CannotTell {
            why: format!("the build installed no kernel library at {shown}"),
        }
    };
    let describe = judgement
        .describe()
        .replace(&root.display().to_string(), "");
    let Some(want) = recipe.kind.expert_sched() else {
        return Ok(describe);
    };
    let ok = matches!(
        (&judgement, want),
        (Judgement::Off { .. }, ExpertSched::Off) | (Judgement::On { .. }, ExpertSched::On)
    );
    if ok {
        return Ok(describe);
    }
    let hint = match &judgement {
        Judgement::NoGfx12 { .. } | Judgement::CannotTell { .. } if !builds_gfx12 => {
            "; build for gfx1200;gfx1201 (--gpu-targets) so the fix can be checked"
        }
        Judgement::On { .. } | Judgement::Off { .. } => {
            "; the series does not have the effect the recipe promises: check that the fix patch applies to this release (cargo xtask verify)"
        }
        _ => "",
    };
    bail!(
        "recipe {} requires gfx12 expert scheduling `{}` (target.expert_sched), but the kernels \
         the build staged in {shown} say: {describe}{hint}; nothing was published",
        recipe.name,
        want.as_str()
    )
}
