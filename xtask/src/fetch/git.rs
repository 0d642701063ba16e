//! git inputs through git2: a bare mirror per URL in the cache, fetched to
//! hold exactly the pinned commit (shallow where the server allows it), ref
//! resolution for `lock`, and the diff of an upstream commit as a
//! `git format-patch` style mbox.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use git2::{Oid, Repository};

use crate::fetch::cache::Cache;
use crate::shared::report::Reporter;

/// A mirror in the cache that holds a pinned commit.
#[derive(Debug)]
pub(crate) struct GitFetched {
    pub(crate) repo: PathBuf,
    /// Whether objects were fetched (false: the commit was already cached).
    pub(crate) fetched: bool,
    /// The refs the remote advertised, `(name, commit)`, when it was contacted.
    pub(crate) advertised: Vec<(String, String)>,
}

/// Whether the cache's mirror of `url` holds `commit`; opens no socket.
pub(crate) fn has_commit(cache: &Cache, url: &str, commit: &str) -> bool {
    let path = cache.git_repo(url);
    path.is_dir()
        && Repository::open_bare(&path)
            .is_ok_and(|repo| Oid::from_str(commit).is_ok_and(|oid| repo.find_commit(oid).is_ok()))
}

/// The most a fetch of every branch and tag may receive: `cap`
/// (`PATCHKIT_GIT_MAX_BYTES`, default 256 MiB: a kernel repository is
/// gigabytes, a patch kilobytes), none with `--allow-full-fetch`.
pub(crate) fn full_fetch_cap(allow_full_fetch: bool, cap: u64) -> Option<u64> {
    (!allow_full_fetch).then_some(cap)
}

/// Makes the cache's mirror of `url` hold `commit` (and `depth - 1`
/// ancestors where a shallow fetch works). First the commit id itself is
/// fetched with `depth`; when the server refuses that (no
/// `uploadpack.allowReachableSHA1InWant`, or a transport without shallow
/// support), every branch and tag is fetched and the commit looked up, but
/// only up to `cap` bytes received (`None`: no cap): past it the fetch
/// stops, what it brought is removed, and the error says what to do.
/// A new mirror is built in `tmp/` and moved into place once it holds the
/// commit. The caller holds the cache lock.
pub(crate) fn ensure_commit(
    cache: &Cache,
    url: &str,
    commit: &str,
    depth: i32,
    cap: Option<u64>,
    reporter: &Reporter,
) -> Result<GitFetched> {
    let oid = Oid::from_str(commit).with_context(|| format!("`{commit}` is not a commit id"))?;
    let dest = cache.git_repo(url);
    if has_commit(cache, url, commit) {
        return Ok(GitFetched {
            repo: dest,
            fetched: false,
            advertised: Vec::new(),
        });
    }
    let (repo, staging) = open_or_stage(cache, &dest)?;
    let keep = format!("refs/patchkit/{commit}");
    let mut remote = repo
        .remote_anonymous(url)
        .with_context(|| format!("opening the git remote {url}"))?;
    let by_id = fetch(
        &mut remote,
        &[format!("+{commit}:{keep}")],
        (!is_local(url)).then_some(depth),
        None,
        url,
        reporter,
    );
    if by_id.is_err() || repo.find_commit(oid).is_err() {
        let why = by_id.err().map(|e| format!("{e:#}")).unwrap_or_default();
        reporter.step(format!(
            "  {url}: fetching {commit} by id did not work{}; fetching every branch and tag",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        ));
        fetch_every_ref(
            &repo,
            &mut remote,
            url,
            commit,
            cap,
            staging.is_none(),
            reporter,
        )?;
    }
    let advertised = remote
        .list()
        .map(|heads| {
            heads
                .iter()
                .map(|h| (h.name().to_owned(), h.oid().to_string()))
                .collect()
        })
        .unwrap_or_default();
    keep_commit(&repo, oid, &keep, url, commit)?;
    drop(remote);
    drop(repo);
    if let Some(staging) = staging {
        let path = staging.keep();
        std::fs::rename(&path, &dest).with_context(|| {
            format!(
                "moving the verified mirror {} to {}",
                path.display(),
                dest.display()
            )
        })?;
    }
    Ok(GitFetched {
        repo: dest,
        fetched: true,
        advertised,
    })
}

/// The cached mirror at `dest`, or a new bare repository in the cache's
/// `tmp/` (with the folder that holds it) to be moved there once it holds
/// the commit.
fn open_or_stage(cache: &Cache, dest: &Path) -> Result<(Repository, Option<tempfile::TempDir>)> {
    if dest.is_dir() {
        let repo = Repository::open_bare(dest)
            .with_context(|| format!("opening the cached mirror {}", dest.display()))?;
        return Ok((repo, None));
    }
    let staging = tempfile::Builder::new()
        .prefix("clone-")
        .suffix(".git")
        .tempdir_in(cache.tmp_dir())
        .with_context(|| format!("creating a folder in {}", cache.tmp_dir().display()))?;
    let repo = Repository::init_bare(staging.path())
        .with_context(|| format!("creating a bare repository in {}", staging.path().display()))?;
    Ok((repo, Some(staging)))
}

/// Every branch and tag of `url` fetched, up to `cap` bytes: for a server
/// that does not hand out `commit` by id. A stopped fetch leaves an
/// existing mirror (`existing`) with only what it had.
fn fetch_every_ref(
    repo: &Repository,
    remote: &mut git2::Remote<'_>,
    url: &str,
    commit: &str,
    cap: Option<u64>,
    existing: bool,
    reporter: &Reporter,
) -> Result<()> {
    let before = object_files(repo.path());
    let all = fetch(
        remote,
        &[
            "+refs/heads/*:refs/remotes/origin/*".to_owned(),
            "+refs/tags/*:refs/tags/*".to_owned(),
        ],
        None,
        cap,
        url,
        reporter,
    );
    if let Err(err) = all {
        if existing {
            // An existing mirror keeps only what it had: every object
            // file the stopped fetch wrote goes.
            for path in object_files(repo.path()).difference(&before) {
                let _ = std::fs::remove_file(path);
            }
        }
        if let Some(Capped { cap, received }) = err.downcast_ref::<Capped>() {
            anyhow::bail!(
                "git {url} does not hand out commit {commit} by id, and fetching every branch \
                 and tag of it stopped at the cap of {} ({} received): nothing of it was kept \
                 in the cache. Give the patch its patch URL (`urls = [\"https://<host>/<repo>/\
                 commit/{commit}.patch\"]`, or cgit's `.../patch/?id={commit}`), or run `cargo \
                 xtask fetch <recipe> --allow-full-fetch` to fetch the whole repository \
                 (PATCHKIT_GIT_MAX_BYTES moves the cap)",
                crate::shared::report::human_size(*cap),
                crate::shared::report::human_size(*received)
            );
        }
        return Err(err).with_context(|| {
            format!(
                "cannot fetch commit {commit} from {url}: check the URL and the network, then \
                 run the command again"
            )
        });
    }
    Ok(())
}

/// Pins the fetched commit under `keep` so that it stays in the mirror;
/// an error when neither the fetch by id nor any branch or tag brought it.
fn keep_commit(repo: &Repository, oid: Oid, keep: &str, url: &str, commit: &str) -> Result<()> {
    let found = repo.find_commit(oid).map_err(|_| {
        anyhow::anyhow!(
            "commit {commit} is not in {url}: it could not be fetched by id and no branch or tag \
             reaches it; check the pinned `commit` (or run `cargo xtask lock <recipe>` to pin \
             where `ref` points now)"
        )
    })?;
    repo.reference(keep, found.id(), true, "patchkit: keep the pinned commit")
        .with_context(|| format!("writing {keep} in {}", repo.path().display()))?;
    Ok(())
}

/// A fetch stopped at the size cap.
#[derive(Debug)]
struct Capped {
    cap: u64,
    received: u64,
}

impl std::fmt::Display for Capped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stopped after {} bytes (cap {})",
            self.received, self.cap
        )
    }
}

impl std::error::Error for Capped {}

/// Every file below `objects/` of a bare repository.
fn object_files(repo: &Path) -> std::collections::BTreeSet<PathBuf> {
    let mut files = std::collections::BTreeSet::new();
    let mut dirs = vec![repo.join("objects")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(entry.path()),
                Ok(t) if t.is_file() => {
                    files.insert(entry.path());
                }
                _ => {}
            }
        }
    }
    files
}

fn fetch(
    remote: &mut git2::Remote<'_>,
    refspecs: &[String],
    depth: Option<i32>,
    cap: Option<u64>,
    url: &str,
    reporter: &Reporter,
) -> Result<()> {
    let progress = RefCell::new(reporter.progress(format!("git fetch {url}"), None, false));
    let seen = RefCell::new(0usize);
    let capped = std::cell::Cell::new(None);
    let mut callbacks = git2::RemoteCallbacks::new();
    callbacks.transfer_progress(|stats| {
        if let Some(cap) = cap {
            let received = stats.received_bytes() as u64;
            if received > cap {
                capped.set(Some(Capped { cap, received }));
                return false;
            }
        }
        let mut progress = progress.borrow_mut();
        let mut seen = seen.borrow_mut();
        progress.set_total(stats.total_objects() as u64);
        let now = stats.received_objects();
        progress.inc(now.saturating_sub(*seen) as u64);
        *seen = now;
        true
    });
    let mut opts = git2::FetchOptions::new();
    opts.remote_callbacks(callbacks)
        .download_tags(git2::AutotagOption::None);
    if let Some(depth) = depth {
        opts.depth(depth);
    }
    let done = remote.fetch(refspecs, Some(&mut opts), None);
    drop(opts);
    if let Some(capped) = capped.take() {
        return Err(capped.into());
    }
    done.with_context(|| format!("git fetch from {url}"))
}

/// Where `reference` (a branch, a tag or a full ref name; `HEAD` when
/// `None`) points on the remote `url` now.
pub(crate) fn resolve_ref(url: &str, reference: Option<&str>) -> Result<String> {
    let mut remote = git2::Remote::create_detached(url)
        .with_context(|| format!("opening the git remote {url}"))?;
    remote
        .connect(git2::Direction::Fetch)
        .with_context(|| format!("connecting to {url}"))?;
    let heads: Vec<(String, String)> = remote
        .list()
        .with_context(|| format!("listing the refs of {url}"))?
        .iter()
        .map(|h| (h.name().to_owned(), h.oid().to_string()))
        .collect();
    let name = reference.unwrap_or("HEAD");
    find_ref(&heads, name).ok_or_else(|| {
        anyhow::anyhow!(
            "{url} has no branch or tag `{name}`; fix `ref` in the recipe (refs seen: {})",
            heads
                .iter()
                .map(|(n, _)| n.as_str())
                .filter(|n| !n.ends_with("^{}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The commit `name` points at among advertised refs: a peeled tag first,
/// then the tag, the branch, or the exact ref name.
pub(crate) fn find_ref(heads: &[(String, String)], name: &str) -> Option<String> {
    let candidates = [
        format!("refs/tags/{name}^{{}}"),
        format!("refs/tags/{name}"),
        format!("refs/heads/{name}"),
        format!("{name}^{{}}"),
        name.to_owned(),
    ];
    candidates.iter().find_map(|want| {
        heads
            .iter()
            .find(|(n, _)| n == want)
            .map(|(_, oid)| oid.clone())
    })
}

/// The diff of `commit` against its parent as a `git format-patch` style
/// mbox: `From`/`Date`/`Subject` headers from the commit, the message, a
/// diffstat and the patch. Deterministic for a given commit.
pub(crate) fn commit_patch(repo: &Path, commit: &str) -> Result<Vec<u8>> {
    let repo = Repository::open_bare(repo)
        .with_context(|| format!("opening the cached mirror {}", repo.display()))?;
    let oid = Oid::from_str(commit)?;
    let found = repo
        .find_commit(oid)
        .with_context(|| format!("finding commit {commit} in {}", repo.path().display()))?;
    anyhow::ensure!(
        found.parent_count() <= 1,
        "commit {commit} is a merge: pin a single-parent commit as a patch"
    );
    let email = git2::Email::from_commit(&found, &mut git2::EmailCreateOptions::new())
        .with_context(|| format!("formatting commit {commit} as a patch"))?;
    Ok(without_signature(email.as_slice()).to_vec())
}

/// The mbox without libgit2's `--\nlibgit2 <version>` signature, so that the
/// bytes (and their pinned sha256) do not change with the library version.
fn without_signature(mbox: &[u8]) -> &[u8] {
    let marker = b"\n--\nlibgit2 ";
    match mbox.windows(marker.len()).rposition(|w| w == marker) {
        Some(at) => &mbox[..=at],
        None => mbox,
    }
}

/// Whether git reaches `url` through the local transport, which cannot
/// fetch shallow.
fn is_local(url: &str) -> bool {
    Path::new(url).is_absolute() || url.starts_with("file://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_ref_prefers_the_peeled_tag() {
        let heads = vec![
            ("HEAD".to_owned(), "a".to_owned()),
            ("refs/heads/main".to_owned(), "a".to_owned()),
            ("refs/tags/v1".to_owned(), "tagobj".to_owned()),
            ("refs/tags/v1^{}".to_owned(), "b".to_owned()),
        ];
        assert_eq!(find_ref(&heads, "v1").as_deref(), Some("b"));
        assert_eq!(find_ref(&heads, "main").as_deref(), Some("a"));
        assert_eq!(find_ref(&heads, "HEAD").as_deref(), Some("a"));
        assert_eq!(find_ref(&heads, "refs/heads/main").as_deref(), Some("a"));
        assert_eq!(find_ref(&heads, "nope"), None);
    }

    #[test]
    fn the_libgit2_signature_is_dropped() {
        let mbox = b"Subject: x\n\n+a\n--\nlibgit2 1.9.7\n\n";
        assert_eq!(without_signature(mbox), b"Subject: x\n\n+a\n");
        assert_eq!(without_signature(b"+a\n"), b"+a\n");
    }
}
