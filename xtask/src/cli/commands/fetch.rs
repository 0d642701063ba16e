//! `cargo xtask fetch <recipe> [--offline] [--allow-unpinned]`: every input
//! of a recipe downloaded, verified and stored in the cache.

use anyhow::Result;

use crate::fetch::{self, FetchOptions};
use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;

/// Download and verify a recipe's inputs into the cache
///
/// Every input goes into the content-addressed cache (default
/// target/patchkit/cache; see --cache-dir).
///
/// git sources are fetched at their pinned commit, tarballs and url patches
/// are checked against their sha256. An upstream commit patch comes from its
/// patch URLs (`urls`, cgit's and GitHub's) in kilobytes, by git only when
/// they fail, is normalised to file headers and hunks and checked against
/// `diff_sha256` and, by its `index` lines, `produces` (which `apply` checks
/// on the patched files). Nothing unverified enters the cache. Two fetches
/// at once share the cache safely.
///
/// HTTP limits (environment): PATCHKIT_HTTP_CONNECT_TIMEOUT_MS (15000),
/// PATCHKIT_HTTP_READ_TIMEOUT_MS (30000), PATCHKIT_HTTP_ATTEMPTS (4),
/// PATCHKIT_HTTP_RETRY_BASE_MS (500, doubled per retry),
/// PATCHKIT_HTTP_MAX_BYTES (4 GiB), PATCHKIT_HTTP_DEADLINE_MS (3600000:
/// one download, retries included), PATCHKIT_HTTP_MIN_RATE (1024 bytes/s
/// over each read timeout). A failed download leaves nothing behind.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    pub(crate) recipe: String,
    /// Open no network connection; fail listing every input missing from
    /// the cache
    #[arg(long)]
    pub(crate) offline: bool,
    /// Fetch inputs that have no pin as they are now, and record the pins
    /// taken in <cache>/taken-pins/<recipe>.toml (`cargo xtask lock` writes
    /// pins into the recipe instead)
    #[arg(long)]
    pub(crate) allow_unpinned: bool,
    /// When a git server will not hand out one commit by id, fetch every
    /// branch and tag of the repository even past the size cap
    /// (PATCHKIT_GIT_MAX_BYTES, 256 MiB); for a kernel tree that is
    /// gigabytes. Give the patch a `urls` entry instead where you can
    #[arg(long)]
    pub(crate) allow_full_fetch: bool,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let recipe = Recipe::load(&ws.root, &args.recipe)?;
    let opts = FetchOptions {
        offline: args.offline,
        allow_unpinned: args.allow_unpinned,
        allow_full_fetch: args.allow_full_fetch,
    };
    fetch::fetch(ws, &recipe, &opts)?;
    Ok(())
}
