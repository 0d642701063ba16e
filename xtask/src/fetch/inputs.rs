//! The fetch of one recipe, input by input: pin checks, the `--offline`
//! inventory, the per-input work and the summary.

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::http::{Http, HttpConfig};
use super::{git, local, FetchOptions, Fetched, FetchedPatch, FetchedSource};
use crate::cache::Cache;
use crate::hash::{sha256_file, sha256_hex};
use crate::recipe::{PatchOrigin, Recipe, Source};
use crate::report::{human_size, Reporter};
use crate::workspace::Workspace;

/// The network, brought up on first use so that a run that finds everything
/// in the cache (and every `--offline` run) opens no socket.
pub struct Net {
    offline: bool,
    http: Option<Http>,
}

impl Net {
    pub fn new(offline: bool) -> Net {
        Net {
            offline,
            http: None,
        }
    }

    pub fn http(&mut self) -> Result<&Http> {
        anyhow::ensure!(
            !self.offline,
            "the network is needed but --offline was given"
        );
        if self.http.is_none() {
            self.http = Some(Http::new(HttpConfig::from_env())?);
        }
        Ok(self.http.as_ref().expect("built above"))
    }

    /// apt, which `fetch/deb.rs` runs as a process: refused offline and
    /// where there is none.
    pub fn apt(&self) -> Result<()> {
        anyhow::ensure!(
            !self.offline,
            "the network is needed but --offline was given"
        );
        anyhow::ensure!(
            super::deb::apt_available(),
            "apt-get is not on this machine"
        );
        Ok(())
    }

    pub fn git(&self) -> Result<()> {
        anyhow::ensure!(
            !self.offline,
            "the network is needed but --offline was given"
        );
        Ok(())
    }

    /// The commit `reference` (HEAD when none) of the git repository at
    /// `url` names now: what both `fetch --allow-unpinned` and `lock` take.
    pub fn resolve_ref(
        &self,
        url: &str,
        reference: Option<&str>,
        reporter: &Reporter,
    ) -> Result<String> {
        self.git()?;
        reporter.step(format!(
            "source: resolving `{}` of {url}",
            reference.unwrap_or("HEAD")
        ));
        git::resolve_ref(url, reference)
    }
}

/// What fetching one input took.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) cached: usize,
    pub(super) downloaded: usize,
    pub(super) bytes: u64,
    pub(super) local: usize,
    /// `(input, key, value)` of every pin taken by `--allow-unpinned`.
    taken: Vec<(String, String, String)>,
}

pub fn fetch(ws: &Workspace, recipe: &Recipe, opts: &FetchOptions) -> Result<Fetched> {
    let unpinned = recipe.unpinned();
    if !unpinned.is_empty() && !opts.allow_unpinned {
        anyhow::bail!(
            "recipe `{}` has unpinned inputs: {}; run `cargo xtask lock {}` to write their pins \
             into {}, or pass `--allow-unpinned` to fetch them as they are now",
            recipe.name,
            describe_unpinned(recipe).join(", "),
            recipe.name,
            crate::diag::display_path(&recipe.path).display()
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
    let mut net = Net::new(opts.offline);
    let mut tally = Tally::default();
    let source = fetch_source(&cache, &mut net, reporter, recipe, &mut tally)?;
    let mut patches = Vec::new();
    for patch in &recipe.patches {
        let (path, sha256) = fetch_patch(
            &cache,
            &mut net,
            reporter,
            &patch.name,
            &patch.origin,
            &mut tally,
        )?;
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
            PatchOrigin::Url { url, sha256: None } => {
                out.push(format!("patch {} (url {url} has no `sha256`)", patch.name))
            }
            PatchOrigin::Git {
                url,
                commit,
                sha256: None,
            } => out.push(format!(
                "patch {} (git {url} commit {commit} has no `sha256`)",
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
                missing.push(format!("source: {} (sha256 {})", deb.file_name(), deb.sha256));
            }
        }
    }
    for patch in &recipe.patches {
        let name = &patch.name;
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
    tally: &mut Tally,
) -> Result<FetchedSource> {
    match &recipe.source {
        Source::Git {
            url,
            commit,
            reference,
            ..
        } => {
            let commit = match commit {
                Some(c) => c.clone(),
                None => {
                    let found = net.resolve_ref(url, reference.as_deref(), reporter)?;
                    tally
                        .taken
                        .push(("source".into(), "commit".into(), found.clone()));
                    found
                }
            };
            if !git::has_commit(cache, url, &commit) {
                net.git()?;
            }
            let got = git::ensure_commit(cache, url, &commit, 1, reporter)?;
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
            let (path, sha) = blob(cache, net, reporter, "source", url, sha256, tally)?;
            Ok(FetchedSource::Archive { path, sha256: sha })
        }
        Source::Deb(deb) => super::deb::fetch(cache, net, reporter, recipe, deb, tally),
        Source::Local { path, sha256, .. } => {
            let actual = local::verify(
                path,
                sha256.as_deref(),
                Some(&cache.root().join("local-sha256")),
            )?;
            tally.local += 1;
            let shown = crate::diag::display_path(path);
            if path.is_dir() {
                let how = if sha256.is_some() {
                    "verified"
                } else {
                    "tree hashed"
                };
                reporter.step(format!("source: folder {}: {how}", shown.display()));
                Ok(FetchedSource::Dir { path: path.clone() })
            } else {
                let how = if sha256.is_some() {
                    "verified"
                } else {
                    "hashed"
                };
                reporter.step(format!("source: archive {}: {how}", shown.display()));
                Ok(FetchedSource::Archive {
                    path: path.clone(),
                    sha256: actual,
                })
            }
        }
    }
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
    tally: &mut Tally,
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
    name: &str,
    origin: &PatchOrigin,
    tally: &mut Tally,
) -> Result<(PathBuf, String)> {
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
pub fn commit_patch(
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
    let got = git::ensure_commit(cache, url, commit, 2, reporter)?;
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
        crate::diag::display_path(&recipe.path).display()
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
