//! Fetch: the only module that opens sockets. Brings every input of a recipe
//! into the content-addressed cache, verified by commit id or sha256 before
//! anything enters it.
//!
//! CONTRACT (used by `apply`; the fetch work fills in the body): the types
//! below and the signature of [`fetch`] stay as they are.

pub(crate) mod inputs;

pub(crate) mod deb;

pub(crate) mod cache;
pub(crate) mod diff;
pub(crate) mod git;
pub(crate) mod http;
pub(crate) mod local;
pub(crate) mod lock;
pub(crate) mod net;
pub(crate) mod patch_url;
mod tally;

use std::path::PathBuf;

use anyhow::Result;

use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;

#[derive(Debug, Clone, Default)]
pub(crate) struct FetchOptions {
    /// Open no socket; fail listing every input missing from the cache.
    pub(crate) offline: bool,
    /// Fetch inputs that carry no pin, and record the pin taken.
    pub(crate) allow_unpinned: bool,
    /// Let git fetch every branch and tag of a repository that refuses to
    /// hand out one commit, past the size cap (`PATCHKIT_GIT_MAX_BYTES`).
    pub(crate) allow_full_fetch: bool,
}

/// Every input of a recipe, verified and ready to read.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub source: FetchedSource,
    /// In series order, one per `recipe.patches` entry.
    pub patches: Vec<FetchedPatch>,
}

#[derive(Debug, Clone)]
pub enum FetchedSource {
    /// An archive (tar, tar.gz, tar.xz, tar.zst) with the sha256 it was verified by;
    /// `strip` and `include` come from the recipe.
    Archive { path: PathBuf, sha256: String },
    /// A local folder, read in place.
    Dir { path: PathBuf },
    /// A bare repository in the cache that holds `commit`.
    Git { repo: PathBuf, commit: String },
}

#[derive(Debug, Clone)]
pub struct FetchedPatch {
    pub name: String,
    /// The verified patch bytes (in the cache, or the curated file in patches/).
    pub path: PathBuf,
    pub sha256: String,
}

/// Brings every input of `recipe` into the cache and returns where each is.
///
/// Refuses unpinned inputs unless `opts.allow_unpinned`; with it, the pins
/// taken are reported as warnings and recorded in
/// `<cache>/taken-pins/<recipe>.toml`. With `opts.offline` no socket is
/// opened and every input missing from the cache is listed at once.
pub(crate) fn fetch(ws: &Workspace, recipe: &Recipe, opts: &FetchOptions) -> Result<Fetched> {
    inputs::fetch(ws, recipe, opts)
}
