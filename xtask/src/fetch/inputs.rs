//! The fetch of one recipe, input by input: pin checks, the `--offline`
//! inventory, the per-input work and the summary.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::net::Net;
use super::tally::FetchTally;
use super::{git, local, FetchOptions, Fetched, FetchedPatch, FetchedSource};
use crate::fetch::cache::Cache;
use crate::input::recipe::{Patch, PatchOrigin, Recipe, Source};
use crate::input::workspace::Workspace;
use crate::shared::hash::{sha256_file, sha256_hex};
use crate::shared::report::{human_size, Reporter};

pub(crate) fn fetch(ws: &Workspace, recipe: &Recipe, opts: &FetchOptions) -> Result<Fetched> {
    let unpinned = recipe.unpinned();
    if !unpinned.is_empty() && !opts.allow_unpinned {
        anyhow::bail!(
            "recipe `{}` has unpinned inputs: {}; run `cargo xtask lock {}` to write their pins \
             into {}, or pass `--allow-unpinned` to fetch them as they are now",
            recipe.name,
            describe_unpinned(recipe).join(", "),
            recipe.name,
            crate::shared::diag::display_path(&recipe.path).display()
        );
    }
    let reporter = &ws.reporter;
    let cache = Cache::new(&ws.cache_dir);
    let _lock = cache.lock(reporter)?;
    if opts.offline {
        let missing = missing_offline(&cache, recipe);
        if !missing.is_empty() {
            anyhow::bail!(
                "--offline: {} input(s) of `{}` are not in the cache {}:\n{}\nrun `cargo xtask fetch {}` \
                 once with network access to fill the cache",
                missing.len(),
                recipe.name,
                cache.root().display(),
                missing
                    .iter()
                    .map(|m| format!("  - {m}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                recipe.name
            );
        }
    }
    let mut net = Net::new(opts.offline, &ws.settings);
    net.full_fetch_cap = git::full_fetch_cap(opts.allow_full_fetch, ws.settings.git_max_bytes);
    let mut tally = FetchTally::default();
    let source = fetch_source(&cache, &mut net, reporter, recipe, &mut tally)?;
    let mut patches = Vec::new();
    for patch in &recipe.patches {
        let (path, sha256) = fetch_patch(&cache, &mut net, reporter, patch, &mut tally)?;
        patches.push(FetchedPatch {
            name: patch.name.clone(),
            path,
            sha256,
        });
    }
    if !tally.taken.is_empty() {
        record_taken(&cache, recipe, &tally.taken, reporter)?;
    }
    reporter.step(format!(
        "fetched {}: {} input(s), {} cached, {} downloaded ({}), {} local",
        recipe.name,
        1 + recipe.patches.len(),
        tally.cached,
        tally.downloaded,
        human_size(tally.bytes),
        tally.local
    ));
    Ok(Fetched { source, patches })
}

fn describe_unpinned(recipe: &Recipe) -> Vec<String> {
    let mut out = Vec::new();
    match &recipe.source {
        Source::Git {
            url, commit: None, ..
        } => out.push(format!("source (git {url} has no `commit`)")),
        Source::Tarball {
            url, sha256: None, ..
        } => out.push(format!("source (tarball {url} has no `sha256`)")),
        _ => {}
    }
    for patch in &recipe.patches {
        match &patch.origin {
            _ if patch.pin.is_pinned() => {}
            PatchOrigin::Url { url, sha256: None } => {
                out.push(format!("patch {} (url {url} has no `sha256`)", patch.name))
            }
            PatchOrigin::Git {
                url,
                commit,
                sha256: None,
            } => out.push(format!(
                "patch {} (git {url} commit {commit} has no `diff_sha256` or `produces`)",
                patch.name
            )),
            _ => {}
        }
    }
    out
}

/// Every input that an offline run could not produce from the cache.
fn missing_offline(cache: &Cache, recipe: &Recipe) -> Vec<String> {
    let mut missing = Vec::new();
    match &recipe.source {
        Source::Git { url, commit, .. } => match commit {
            Some(c) if git::has_commit(cache, url, c) => {}
            Some(c) => missing.push(format!("source: git {url} commit {c}")),
            None => missing.push(format!("source: git {url} (no pinned commit)")),
        },
        Source::Tarball { url, sha256, .. } => match sha256 {
            Some(s) if cache.blob(s).is_some() => {}
            Some(s) => missing.push(format!("source: {url} (sha256 {s})")),
            None => missing.push(format!("source: {url} (no pinned sha256)")),
        },
        Source::Local { .. } => {}
        Source::Deb(deb) => {
            if cache.blob(&deb.sha256).is_none() && deb.local.is_none() {
                missing.push(format!(
                    "source: {} (sha256 {})",
                    deb.file_name(),
                    deb.sha256
                ));
            }
        }
    }
    for patch in &recipe.patches {
        let name = &patch.name;
        if let Some(key) = fix_key(patch) {
            if !super::patch_url::is_cached(cache, &key, &patch.pin) {
                missing.push(match &patch.origin {
                    PatchOrigin::Git { url, commit, .. } => {
                        format!("patch {name}: git {url} commit {commit}")
                    }
                    other => format!("patch {name}: {}", origin_text(other)),
                });
            }
            continue;
        }
        match &patch.origin {
            PatchOrigin::File { .. } => {}
            PatchOrigin::Url { url, sha256 } => match sha256 {
                Some(s) if cache.blob(s).is_some() => {}
                Some(s) => missing.push(format!("patch {name}: {url} (sha256 {s})")),
                None => missing.push(format!("patch {name}: {url} (no pinned sha256)")),
            },
            PatchOrigin::Git {
                url,
                commit,
                sha256,
            } => {
                let blob = sha256.as_deref().and_then(|s| cache.blob(s));
                if blob.is_none() && !git::has_commit(cache, url, commit) {
                    missing.push(format!("patch {name}: git {url} commit {commit}"));
                }
            }
        }
    }
    missing
}

fn fetch_source(
    cache: &Cache,
    net: &mut Net,
    reporter: &Reporter,
    recipe: &Recipe,
    tally: &mut FetchTally,
) -> Result<FetchedSource> {
    match &recipe.source {
        Source::Git {
            url,
            commit,
            reference,
            ..
        } => {
            let commit_pinned = commit.is_some();
            let (commit, got) = net.git_source(
                cache,
                url,
                commit.as_deref(),
                reference.as_deref(),
                false,
                reporter,
            )?;
            if !commit_pinned {
                tally
                    .taken
                    .push(("source".into(), "commit".into(), commit.clone()));
            }
            if let (true, Some(reference)) = (got.fetched, reference) {
                match git::find_ref(&got.advertised, reference) {
                    Some(now) if now != commit => reporter.warn(format!(
                        "`ref = \"{reference}\"` of {url} now points at {now}, not at the pinned \
                         commit {commit}; using the pin (run `cargo xtask lock {}` to move it)",
                        recipe.name
                    )),
                    _ => {}
                }
            }
            let did = if got.fetched {
                tally.downloaded += 1;
                "fetched"
            } else {
                tally.cached += 1;
                "cached"
            };
            reporter.step(format!("source: git {url} @ {commit}: {did}"));
            Ok(FetchedSource::Git {
                repo: got.repo,
                commit,
            })
        }
        Source::Tarball { url, sha256, .. } => {
            let (path, sha) = blob(cache, net, reporter, "source", url, sha256, tally)
                .map_err(|e| pin_mismatch(e, recipe))?;
            Ok(FetchedSource::Archive { path, sha256: sha })
        }
        Source::Deb(deb) => super::deb::fetch(cache, net, reporter, recipe, deb, tally),
        Source::Local { path, sha256, .. } => {
            let fetched = local_source(cache, reporter, path, sha256.as_deref())?;
            tally.local += 1;
            Ok(fetched)
        }
    }
}

/// A local folder or archive, checked against its pin (or hashed).
fn local_source(
    cache: &Cache,
    reporter: &Reporter,
    path: &Path,
    sha256: Option<&str>,
) -> Result<FetchedSource> {
    let checked = local::check(path, sha256, Some(&cache.root().join("local-sha256")))?;
    let shown = crate::shared::diag::display_path(path);
    if path.is_dir() {
        let how = if sha256.is_some() {
            "verified"
        } else {
            "tree hashed"
        };
        reporter.step(format!("source: folder {}: {how}", shown.display()));
        return Ok(FetchedSource::Dir {
            path: path.to_path_buf(),
        });
    }
    let how = if checked.remembered {
        "unchanged since hashed (its bytes are checked again when extracted)"
    } else if sha256.is_some() {
        "verified"
    } else {
        "hashed"
    };
    reporter.step(format!("source: archive {}: {how}", shown.display()));
    Ok(FetchedSource::Archive {
        path: path.to_path_buf(),
        sha256: checked.sha256,
    })
}

/// A blob pinned by sha256 (or unpinned, with `--allow-unpinned`), from the
/// cache or downloaded.
fn blob(
    cache: &Cache,
    net: &mut Net,
    reporter: &Reporter,
    input: &str,
    url: &str,
    sha256: &Option<String>,
    tally: &mut FetchTally,
) -> Result<(PathBuf, String)> {
    let cached = match sha256.as_deref() {
        Some(s) => cache.verified_blob(s, reporter)?,
        None => None,
    };
    if let Some(path) = cached {
        tally.cached += 1;
        reporter.step(format!("{input}: {url}: cached, verified"));
        return Ok((path, sha256.clone().expect("checked above")));
    }
    let got = net
        .http()?
        .download(cache, url, sha256.as_deref(), reporter)?;
    tally.downloaded += 1;
    tally.bytes += got.bytes;
    let how = if sha256.is_some() {
        "verified"
    } else {
        "unpinned"
    };
    reporter.step(format!(
        "{input}: {url}: downloaded {}, {how}",
        human_size(got.bytes)
    ));
    if sha256.is_none() {
        tally
            .taken
            .push((input.to_owned(), "sha256".into(), got.sha256.clone()));
    }
    Ok((got.path, got.sha256))
}

fn fetch_patch(
    cache: &Cache,
    net: &mut Net,
    reporter: &Reporter,
    patch: &Patch,
    tally: &mut FetchTally,
) -> Result<(PathBuf, String)> {
    let (name, origin) = (&patch.name, &patch.origin);
    if fix_key(patch).is_some() {
        let got = pinned_fix(cache, net, reporter, patch)?;
        if !patch.pin.is_pinned() {
            tally.taken.push((
                format!("patch {name}"),
                "diff_sha256".into(),
                got.sha256.clone(),
            ));
        }
        if got.fetched {
            tally.downloaded += 1;
            tally.bytes += got.bytes;
        } else {
            tally.cached += 1;
        }
        reporter.step(format!(
            "patch {name}: {}: {}",
            origin_text(origin),
            got.how
        ));
        return Ok((got.path, got.sha256));
    }
    let input = format!("patch {name}");
    match origin {
        PatchOrigin::File { path } => {
            let sha = sha256_file(path).with_context(|| format!("hashing patch {name}"))?;
            tally.local += 1;
            reporter.step(format!("{input}: curated file: hashed"));
            Ok((path.clone(), sha))
        }
        PatchOrigin::Url { url, sha256 } => blob(cache, net, reporter, &input, url, sha256, tally),
        PatchOrigin::Git {
            url,
            commit,
            sha256,
        } => {
            let cached = match sha256.as_deref() {
                Some(s) => cache.verified_blob(s, reporter)?,
                None => None,
            };
            if let Some(path) = cached {
                tally.cached += 1;
                reporter.step(format!("{input}: git {url} @ {commit}: cached"));
                return Ok((path, sha256.clone().expect("checked above")));
            }
            let (path, actual, fetched) =
                commit_patch(cache, net, reporter, url, commit, sha256.as_deref())?;
            if fetched {
                tally.downloaded += 1;
            } else {
                tally.cached += 1;
            }
            let how = if sha256.is_some() {
                "verified"
            } else {
                "unpinned"
            };
            reporter.step(format!("{input}: git {url} @ {commit}: diff made, {how}"));
            if sha256.is_none() {
                tally.taken.push((input, "sha256".into(), actual.clone()));
            }
            Ok((path, actual))
        }
    }
}

/// The diff of an upstream commit, checked against `expected` and stored in
/// the cache: `(path, sha256, whether git objects were fetched)`.
pub(crate) fn commit_patch(
    cache: &Cache,
    net: &mut Net,
    reporter: &Reporter,
    url: &str,
    commit: &str,
    expected: Option<&str>,
) -> Result<(PathBuf, String, bool)> {
    if !git::has_commit(cache, url, commit) {
        net.git()?;
    }
    let got = git::ensure_commit(cache, url, commit, 2, net.full_fetch_cap, reporter)?;
    let bytes = git::commit_patch(&got.repo, commit)?;
    let actual = sha256_hex(&bytes);
    if let Some(expected) = expected.filter(|e| *e != actual) {
        anyhow::bail!(
            "the diff of git {url} commit {commit}: sha256 mismatch: expected {expected}, got \
             {actual}; nothing was cached. Check that the commit is the intended one; if it is, \
             remove the old `sha256` from the recipe and run `cargo xtask lock <recipe>`"
        );
    }
    let path = match cache.blob(&actual) {
        Some(path) => path,
        None => cache.admit_bytes(&bytes, &actual)?,
    };
    Ok((path, actual, got.fetched))
}

/// Writes the pins taken by `--allow-unpinned` to
/// `<cache>/taken-pins/<recipe>.toml` and warns about each.
fn record_taken(
    cache: &Cache,
    recipe: &Recipe,
    taken: &[(String, String, String)],
    reporter: &Reporter,
) -> Result<()> {
    let path = cache.taken_pins(&recipe.name);
    let mut text = format!(
        "# Pins taken by `cargo xtask fetch {0} --allow-unpinned`.\n\
         # Run `cargo xtask lock {0}` to write pins into {1}.\n",
        recipe.name,
        crate::shared::diag::display_path(&recipe.path).display()
    );
    for (input, key, value) in taken {
        reporter.warn(format!(
            "{input} is unpinned; fetched it at {key} = \"{value}\" (recorded in {})",
            path.display()
        ));
        text.push_str(&format!(
            "\n[[pin]]\ninput = \"{input}\"\n{key} = \"{value}\"\n"
        ));
    }
    let dir = path.parent().expect("taken-pins has a parent");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    tmp.persist(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The key a fix is kept under in the cache as its normalised diff: an
/// upstream commit's id (pinned by `diff_sha256`/`produces`, or unpinned),
/// or `url-<sha256 of the URL>` for a url patch pinned by what it is;
/// `None` for a curated file, an unpinned url patch and a patch pinned by
/// the bytes of one rendering (`sha256`).
fn fix_key(patch: &Patch) -> Option<String> {
    match &patch.origin {
        // An upstream commit, pinned by what it is or not at all (then it
        // is taken as `diff_sha256` by `--allow-unpinned`).
        PatchOrigin::Git {
            commit,
            sha256: None,
            ..
        } => Some(commit.clone()),
        PatchOrigin::Url { url, sha256: None } if patch.pin.is_pinned() => {
            Some(format!("url-{}", sha256_hex(url.as_bytes())))
        }
        _ => None,
    }
}

fn origin_text(origin: &PatchOrigin) -> String {
    match origin {
        PatchOrigin::File { path } => format!("file {}", path.display()),
        PatchOrigin::Url { url, .. } => format!("url {url}"),
        PatchOrigin::Git { url, commit, .. } => format!("git {url} @ {commit}"),
    }
}

/// A fix fetched by [`fixed`].
pub(crate) struct Fix {
    pub(crate) path: PathBuf,
    /// sha256 of the normalised diff (what the cache holds).
    pub(crate) sha256: String,
    pub(crate) fetched: bool,
    pub(crate) bytes: u64,
    pub(crate) how: String,
}

fn pinned_fix(cache: &Cache, net: &mut Net, reporter: &Reporter, patch: &Patch) -> Result<Fix> {
    let key = fix_key(patch).expect("called for fixes with a key");
    if let Some((path, sha256)) = super::patch_url::cached(cache, &key, &patch.pin, reporter)? {
        return Ok(Fix {
            path,
            sha256,
            fetched: false,
            bytes: 0,
            how: "cached, verified".into(),
        });
    }
    fixed(cache, net, reporter, patch, &key)
}

/// The normalised diff of a url or git patch, fetched and checked against
/// `patch.pin` (empty for `lock`): from its patch URLs over HTTP first, then,
/// for a git patch, by git (one commit by id; every branch and tag only
/// below the cap). Nothing that fails a pin is cached.
pub(crate) fn fixed(
    cache: &Cache,
    net: &mut Net,
    reporter: &Reporter,
    patch: &Patch,
    key: &str,
) -> Result<Fix> {
    let pin = &patch.pin;
    let (commit, urls, git_url) = match &patch.origin {
        PatchOrigin::Git { url, commit, .. } => {
            let mut urls = pin.urls.clone();
            for u in super::patch_url::derived_urls(url, commit) {
                if !urls.contains(&u) {
                    urls.push(u);
                }
            }
            (Some(commit.as_str()), urls, Some(url.as_str()))
        }
        PatchOrigin::Url { url, .. } => (None, vec![url.clone()], None),
        PatchOrigin::File { .. } => anyhow::bail!("patch {} is a curated file", patch.name),
    };
    let mut reasons = Vec::new();
    if !urls.is_empty() {
        let http = net.http()?;
        match super::patch_url::fetch(cache, http, &urls, key, commit, pin, &patch.place, reporter)
        {
            Ok(got) => {
                return Ok(Fix {
                    how: format!(
                        "{} from {}, normalised, {}",
                        human_size(got.bytes),
                        got.url,
                        pinned_word(pin)
                    ),
                    path: got.path,
                    sha256: got.sha256,
                    fetched: true,
                    bytes: got.bytes,
                })
            }
            Err(tried) if tried.mismatch && pin.is_pinned() => {
                return Err(not_the_pinned_fix(patch, &tried.reasons))
            }
            Err(tried) => reasons = tried.reasons,
        }
    }
    let (Some(commit), Some(git_url)) = (commit, git_url) else {
        anyhow::bail!("patch {}: {}", patch.name, reasons.join("; "));
    };
    fix_from_git(
        cache,
        net,
        reporter,
        patch,
        key,
        (git_url, commit),
        &reasons,
    )
}

/// The fix of `patch` as the diff git makes of `commit` of `git_url`,
/// normalised and checked against its pins: where its patch URLs failed
/// (for `reasons`) or it has none.
fn fix_from_git(
    cache: &Cache,
    net: &mut Net,
    reporter: &Reporter,
    patch: &Patch,
    key: &str,
    (git_url, commit): (&str, &str),
    reasons: &[String],
) -> Result<Fix> {
    let got = net
        .ensure_commit(cache, git_url, commit, 2, reporter)
        .with_context(|| {
            if reasons.is_empty() {
                format!("patch {}", patch.name)
            } else {
                format!(
                    "patch {} (its patch URLs failed too: {})",
                    patch.name,
                    reasons.join("; ")
                )
            }
        })?;
    let raw = git::commit_patch(&got.repo, commit)?;
    let normalised = super::patch_url::normalise(&raw)
        .with_context(|| format!("the diff of git {git_url} commit {commit}"))?;
    super::patch_url::check(&raw, &normalised, Some(commit), &patch.pin, &patch.place)
        .map_err(|why| not_the_pinned_fix(patch, &[format!("git {git_url} @ {commit}: {why}")]))?;
    let (path, sha256) = super::patch_url::admit(cache, key, &normalised)?;
    Ok(Fix {
        path,
        sha256,
        fetched: got.fetched,
        bytes: 0,
        how: format!("diff made by git, normalised, {}", pinned_word(&patch.pin)),
    })
}

fn pinned_word(pin: &crate::input::recipe::PatchPin) -> &'static str {
    if pin.is_pinned() {
        "verified"
    } else {
        "unpinned"
    }
}

/// What was served for a pinned fix is not it, for `reasons`.
fn not_the_pinned_fix(patch: &Patch, reasons: &[String]) -> anyhow::Error {
    let pin = &patch.pin;
    let records = if pin.pinned_from.is_empty() {
        "no `pinned_from` record is named in the recipe".to_owned()
    } else {
        format!("the pins came from: {}", pin.pinned_from.join("; "))
    };
    anyhow::anyhow!(
        "patch {}: what was served is not the pinned fix:\n{}\n{records}. `cargo xtask lock` \
         leaves a pinned fix as it is; check the commit and the URLs, and only if upstream's \
         fix itself changed remove `diff_sha256`/`produces` from the recipe and run `cargo \
         xtask lock <recipe>` to pin what is served now",
        patch.name,
        reasons
            .iter()
            .map(|r| format!("  - {r}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// A source pin that does not match, told with the records it came from
/// (`source.pinned_from`) and what `lock` would do about it.
fn pin_mismatch(err: anyhow::Error, recipe: &Recipe) -> anyhow::Error {
    if !format!("{err:#}").contains("sha256 mismatch") {
        return err;
    }
    let records = if recipe.source_pinned_from.is_empty() {
        "the recipe names no record for it (`source.pinned_from`)".to_owned()
    } else {
        format!("it came from {}", recipe.source_pinned_from.join("; "))
    };
    err.context(format!(
        "the pinned `source.sha256` of {} does not match what was served: {records}. \
         `cargo xtask lock {}` keeps a pin that is set; only if those records now hold another \
         sha256 remove `source.sha256` and run `cargo xtask lock {}`, which pins what is served",
        crate::shared::diag::display_path(&recipe.path).display(),
        recipe.name,
        recipe.name
    ))
}
