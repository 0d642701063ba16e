//! `lock`: resolves what a recipe names loosely (a git `ref`, a URL without
//! its hash) to pins, and writes them back into the recipe file with
//! `toml_edit`, so formatting and comments survive and the diff is
//! reviewable. Downloads made on the way are verified into the cache.

use std::path::Path;

use anyhow::{Context, Result};
use toml_edit::{DocumentMut, TableLike};

use crate::fetch::cache::Cache;
use crate::fetch::inputs::fixed;
use crate::fetch::net::Net;
use crate::input::recipe::{PatchOrigin, Recipe, Source};
use crate::input::workspace::Workspace;

/// One pin written (or moved) in the recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// `source.commit`, `source.sha256` or `patch[<i>].sha256`.
    pub(crate) key: String,
    /// The patch name, for patch pins.
    pub(crate) patch: Option<String>,
    pub(crate) old: Option<String>,
    pub(crate) new: String,
    /// Why an existing pin moved, when it did.
    pub(crate) note: Option<String>,
}

/// Pins every input of `recipe` and writes the pins into its file
/// (atomically: temp file + rename). Returns what changed, in file order.
pub(crate) fn lock(ws: &Workspace, recipe: &Recipe) -> Result<Vec<Change>> {
    let reporter = &ws.reporter;
    let cache = Cache::new(&ws.cache_dir);
    let _lock = cache.lock(reporter)?;
    let mut net = Net::new(false, &ws.settings);
    let mut changes = source_changes(&cache, &mut net, reporter, &recipe.source)?;
    for (i, patch) in recipe.patches.iter().enumerate() {
        if patch.pin.diff_sha256.is_some() {
            // A fix pinned by its normalised diff stays as it is.
            continue;
        }
        let (key, new) = match &patch.origin {
            // A fix pinned by `produces` only gains its `diff_sha256`, taken
            // from a rendering that passed the `produces` checks.
            PatchOrigin::Git { .. } | PatchOrigin::Url { .. } if patch.pin.is_pinned() => (
                "diff_sha256",
                fixed(&cache, &mut net, reporter, patch, &fix_key_of(patch))?.sha256,
            ),
            PatchOrigin::Url { url, sha256: None } => {
                ("sha256", url_patch(&cache, &mut net, reporter, url)?)
            }
            // An upstream commit is pinned by its normalised diff, which
            // every rendering of it (cgit, GitHub, git) has in common.
            PatchOrigin::Git {
                commit,
                sha256: None,
                ..
            } => (
                "diff_sha256",
                fixed(&cache, &mut net, reporter, patch, commit)?.sha256,
            ),
            _ => continue,
        };
        changes.push(Change {
            key: format!("patch[{i}].{key}"),
            patch: Some(patch.name.clone()),
            old: None,
            new,
            note: None,
        });
    }
    if !changes.is_empty() {
        write_pins(&recipe.path, &changes)?;
    }
    Ok(changes)
}

/// The sha256 of the patch `url` serves, once it reads as `apply` reads a
/// patch; an HTML page or text without a diff is refused, not pinned.
fn url_patch(
    cache: &Cache,
    net: &mut Net,
    reporter: &crate::shared::report::Reporter,
    url: &str,
) -> Result<String> {
    let got = net.http()?.download(cache, url, None, reporter)?;
    let bytes =
        std::fs::read(&got.path).with_context(|| format!("reading {}", got.path.display()))?;
    crate::fetch::patch_url::check_is_patch(&bytes).with_context(|| {
        format!("{url} is not pinned: what it serves is not a patch (check the URL in a browser)")
    })?;
    Ok(got.sha256)
}

/// The pins a source gains or moves: a git source's commit (where its
/// `ref` points now), an unpinned tarball's sha256.
fn source_changes(
    cache: &Cache,
    net: &mut Net,
    reporter: &crate::shared::report::Reporter,
    source: &Source,
) -> Result<Vec<Change>> {
    let mut changes = Vec::new();
    if let Source::Git {
        url,
        commit,
        reference,
        ..
    } = source
    {
        let (resolved, _) = net.git_source(
            cache,
            url,
            commit.as_deref(),
            reference.as_deref(),
            true,
            reporter,
        )?;
        if commit.as_deref() != Some(resolved.as_str()) {
            let note = commit.as_ref().map(|_| {
                format!(
                    "`ref = \"{}\"` now points at a new commit; the pin moves with it",
                    reference.as_deref().unwrap_or("HEAD")
                )
            });
            changes.push(Change {
                key: "source.commit".into(),
                patch: None,
                old: commit.clone(),
                new: resolved,
                note,
            });
        }
    }
    if let Source::Tarball {
        url, sha256: None, ..
    } = source
    {
        let got = net.http()?.download(cache, url, None, reporter)?;
        changes.push(Change {
            key: "source.sha256".into(),
            patch: None,
            old: None,
            new: got.sha256,
            note: None,
        });
    }
    Ok(changes)
}

/// The cache key of a fix (its commit, or its URL's).
fn fix_key_of(patch: &crate::input::recipe::Patch) -> String {
    match &patch.origin {
        PatchOrigin::Git { commit, .. } => commit.clone(),
        PatchOrigin::Url { url, .. } => {
            format!("url-{}", crate::shared::hash::sha256_hex(url.as_bytes()))
        }
        PatchOrigin::File { .. } => String::new(),
    }
}

/// Writes `changes` into the recipe at `path`, keeping everything else of
/// the file as it is.
fn write_pins(path: &Path, changes: &[Change]) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading recipe {}", path.display()))?;
    let mut doc: DocumentMut = text
        .parse()
        .with_context(|| format!("parsing recipe {}", path.display()))?;
    for change in changes {
        let (table, key) = match change.key.split_once('.') {
            Some(("source", key)) => (
                doc.get_mut("source").and_then(|s| s.as_table_like_mut()),
                key,
            ),
            Some((patch, key)) => {
                let index: usize = patch
                    .trim_start_matches("patch[")
                    .trim_end_matches(']')
                    .parse()
                    .context("patch index")?;
                (
                    doc.get_mut("patch")
                        .and_then(|p| p.as_array_of_tables_mut())
                        .and_then(|a| a.get_mut(index))
                        .map(|t| t as &mut dyn TableLike),
                    key,
                )
            }
            None => (None, change.key.as_str()),
        };
        let table = table.with_context(|| {
            format!(
                "recipe {} changed while locking: `{}` has no table; run lock again",
                path.display(),
                change.key
            )
        })?;
        set(table, key, &change.new);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".lock-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, doc.to_string().as_bytes())
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path)
        .with_context(|| format!("replacing recipe {}", path.display()))?;
    Ok(())
}

/// Sets `key` to a string, keeping the comments and spacing around an
/// existing value.
fn set(table: &mut dyn TableLike, key: &str, value: &str) {
    match table.get_mut(key).and_then(|item| item.as_value_mut()) {
        Some(old) => {
            let decor = old.decor().clone();
            *old = toml_edit::Value::from(value);
            *old.decor_mut() = decor;
        }
        None => {
            table.insert(key, toml_edit::value(value));
        }
    }
}
