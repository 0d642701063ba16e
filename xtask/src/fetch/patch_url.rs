//! An upstream fix fetched in kilobytes: the commit's patch over HTTP (the
//! recipe's `urls`, then cgit's `patch/?id=` or GitHub's `/commit/<id>.patch`
//! derived from its `git` URL), normalised to file headers and hunks, and
//! checked against the recipe's rendering-independent pins (`diff_sha256`,
//! the `index` post-image ids against `produces`) before the normalised diff
//! enters the cache. `produces` itself is checked after the patch lands
//! (`patch::apply::check_produces`).

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::http::Http;
use crate::fetch::cache::Cache;
use crate::fetch::diff::{self, FilePatch};
use crate::input::placement::Placement;
use crate::input::recipe::PatchPin;
use crate::shared::hash::sha256_hex;
use crate::shared::report::Reporter;

/// The diff with everything a server renders its own way taken out: mail
/// headers, message, diffstat, `index` lines, hunk section headings and
/// signature. What is left, per file in patch order: the `diff --git` line,
/// mode, rename and copy lines, `---`/`+++`, and each hunk as
/// `@@ -a,b +c,d @@` with its lines. Two renderings of one commit (cgit,
/// GitHub, `git format-patch` with any `--abbrev`) normalise to the same
/// bytes; the result is itself a patch the engine applies.
pub(crate) fn normalise(bytes: &[u8]) -> Result<Vec<u8>> {
    let files = diff::parse(bytes)?;
    anyhow::ensure!(
        !files.is_empty(),
        "no file changes found: this is not a patch (an error page, or a commit without a diff?)"
    );
    let mut out = Vec::new();
    for fp in &files {
        write_file(&mut out, fp);
    }
    Ok(out)
}

/// Refuses bytes that are not a patch `apply` reads: an HTML page (a login
/// or error page served where a patch was asked for) or text without a diff.
pub(crate) fn check_is_patch(bytes: &[u8]) -> Result<()> {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let head = String::from_utf8_lossy(&bytes[start..bytes.len().min(start + 64)]).to_lowercase();
    if ["<!doctype html", "<html", "<?xml", "<head", "<body"]
        .iter()
        .any(|tag| head.starts_with(tag))
    {
        anyhow::bail!("it is an HTML page, not a patch");
    }
    diff::parse(bytes).map(|_| ())
}

fn write_file(out: &mut Vec<u8>, fp: &FilePatch) {
    let old = fp.old.as_deref().or(fp.new.as_deref()).unwrap_or("?");
    let new = fp.new.as_deref().or(fp.old.as_deref()).unwrap_or("?");
    let _ = writeln!(out, "diff --git a/{old} b/{new}");
    match (&fp.old, &fp.new) {
        (None, _) => {
            let _ = writeln!(out, "new file mode {:o}", fp.new_mode.unwrap_or(0o100644));
        }
        (_, None) => {
            let _ = writeln!(
                out,
                "deleted file mode {:o}",
                fp.old_mode.unwrap_or(0o100644)
            );
        }
        (Some(o), Some(n)) => {
            if let (Some(a), Some(b)) = (fp.old_mode, fp.new_mode) {
                if a != b {
                    let _ = writeln!(out, "old mode {a:o}\nnew mode {b:o}");
                }
            }
            if o != n {
                let how = if fp.copy { "copy" } else { "rename" };
                let _ = writeln!(out, "{how} from {o}\n{how} to {n}");
            }
        }
    }
    if fp.hunks.is_empty() {
        return;
    }
    let side = |prefix: &str, path: &Option<String>| match path {
        Some(p) => format!("{prefix}/{p}"),
        None => "/dev/null".to_owned(),
    };
    let _ = writeln!(
        out,
        "--- {}\n+++ {}",
        side("a", &fp.old),
        side("b", &fp.new)
    );
    for h in &fp.hunks {
        let _ = writeln!(
            out,
            "@@ -{},{} +{},{} @@",
            h.old_start, h.old_len, h.new_start, h.new_len
        );
        for line in &h.lines {
            out.push(line.kind);
            out.extend_from_slice(&line.text);
            out.push(b'\n');
            if !line.newline {
                out.extend_from_slice(b"\\ No newline at end of file\n");
            }
        }
    }
}

/// The patch URLs a commit of `git_url` has on hosts whose form is known:
/// GitHub's `/commit/<id>.patch` and cgit's `/patch/?id=<id>` (git.kernel.org).
pub(crate) fn derived_urls(git_url: &str, commit: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(git_url) else {
        return Vec::new();
    };
    let path = url.path().trim_end_matches('/');
    match url.host_str() {
        Some("github.com") => {
            let repo = path.trim_end_matches(".git");
            vec![format!("https://github.com{repo}/commit/{commit}.patch")]
        }
        Some("git.kernel.org") => {
            vec![format!("https://git.kernel.org{path}/patch/?id={commit}")]
        }
        _ => Vec::new(),
    }
}

/// The pin checks a rendering can be put to before it is applied: the
/// commit it says it is (`From <id>` of a format-patch), `diff_sha256`
/// against the normalised diff, and, for `produces`, that the patch writes
/// each pinned file and that its `index` post-image ids (abbreviated) begin
/// the pinned blob ids. `Err` says what differs.
pub(crate) fn check(
    raw: &[u8],
    normalised: &[u8],
    commit: Option<&str>,
    pin: &PatchPin,
    place: &Placement,
) -> Result<(), String> {
    if let (Some(commit), Some(first)) = (commit, raw.split(|b| *b == b'\n').next()) {
        if let Some(rest) = first.strip_prefix(b"From ") {
            let id = String::from_utf8_lossy(rest.split(|b| *b == b' ').next().unwrap_or_default());
            if id.len() == 40 && id != commit {
                return Err(format!("it is the patch of commit {id}, not of {commit}"));
            }
        }
    }
    if let Some(expected) = &pin.diff_sha256 {
        let actual = sha256_hex(normalised);
        if *expected != actual {
            return Err(format!(
                "its normalised diff has sha256 {actual}, not the pinned `diff_sha256` {expected}"
            ));
        }
    }
    if pin.produces.is_empty() {
        return Ok(());
    }
    let files = diff::parse(raw).map_err(|e| format!("{e:#}"))?;
    for (path, blob) in &pin.produces {
        let fp = files
            .iter()
            .find(|fp| fp.new.as_deref().and_then(|n| place.place(n)).as_deref() == Some(path));
        let Some(fp) = fp else {
            return Err(format!(
                "it does not change `{path}`, which the recipe's `produces` pins"
            ));
        };
        if let Some((_, post)) = &fp.index {
            if !blob.starts_with(post.as_str()) {
                return Err(format!(
                    "its `index` line says it leaves `{path}` as blob {post}, not the pinned {}",
                    &blob[..12]
                ));
            }
        }
    }
    Ok(())
}

/// Where the cache keeps, per commit, the sha256 of its normalised diff
/// (for fixes pinned by `produces` alone).
fn by_commit(cache: &Cache, commit: &str) -> PathBuf {
    cache.root().join("commit-diffs").join(commit)
}

/// The cached normalised diff of `commit`, re-hashed: by `diff_sha256` when
/// pinned, else by the sha256 recorded when it was admitted.
pub(crate) fn cached(
    cache: &Cache,
    commit: &str,
    pin: &PatchPin,
    reporter: &Reporter,
) -> Result<Option<(PathBuf, String)>> {
    let sha = match &pin.diff_sha256 {
        Some(s) => s.clone(),
        None => match std::fs::read_to_string(by_commit(cache, commit)) {
            Ok(s) if s.trim().len() == 64 => s.trim().to_owned(),
            _ => return Ok(None),
        },
    };
    Ok(cache.verified_blob(&sha, reporter)?.map(|p| (p, sha)))
}

/// Whether an offline run finds the diff of `commit` in the cache.
pub(crate) fn is_cached(cache: &Cache, commit: &str, pin: &PatchPin) -> bool {
    let sha = match &pin.diff_sha256 {
        Some(s) => Some(s.clone()),
        None => std::fs::read_to_string(by_commit(cache, commit))
            .ok()
            .map(|s| s.trim().to_owned()),
    };
    sha.is_some_and(|s| cache.blob(&s).is_some())
}

/// Admits a checked normalised diff and records it under `commit` (its
/// commit id, or the key of a url patch).
pub(crate) fn admit(cache: &Cache, commit: &str, normalised: &[u8]) -> Result<(PathBuf, String)> {
    let sha = sha256_hex(normalised);
    let path = match cache.blob(&sha) {
        Some(p) => p,
        None => cache.admit_bytes(normalised, &sha)?,
    };
    let index = by_commit(cache, commit);
    let dir = index.parent().expect("commit-diffs has a parent");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    tmp.write_all(format!("{sha}\n").as_bytes())
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    tmp.persist(&index)
        .with_context(|| format!("writing {}", index.display()))?;
    Ok((path, sha))
}

/// What a patch URL gave.
pub(crate) struct Got {
    pub(crate) url: String,
    pub(crate) path: PathBuf,
    pub(crate) sha256: String,
    pub(crate) bytes: u64,
}

/// Tries each of `urls` in turn: download, normalise, [`check`], admit the
/// normalised diff. A rendering that fails a pin is never cached (the
/// download itself is removed again unless the cache held it before).
/// `Err` lists, per URL, why it was not taken; `mismatch` is set when some
/// URL served a patch that failed a pin (as opposed to a network error).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch(
    cache: &Cache,
    http: &Http,
    urls: &[String],
    key: &str,
    commit: Option<&str>,
    pin: &PatchPin,
    place: &Placement,
    reporter: &Reporter,
) -> Result<Got, Tried> {
    let mut tried = Tried::default();
    for url in urls {
        match one(cache, http, url, key, commit, pin, place, reporter) {
            Ok(got) => return Ok(got),
            Err((why, mismatch)) => {
                tried.mismatch |= mismatch;
                tried.reasons.push(format!("{url}: {why}"));
            }
        }
    }
    Err(tried)
}

/// Why no patch URL was taken.
#[derive(Debug, Default)]
pub(crate) struct Tried {
    pub(crate) reasons: Vec<String>,
    /// Some URL served a patch that failed a pin.
    pub(crate) mismatch: bool,
}

#[allow(clippy::too_many_arguments)]
fn one(
    cache: &Cache,
    http: &Http,
    url: &str,
    key: &str,
    commit: Option<&str>,
    pin: &PatchPin,
    place: &Placement,
    reporter: &Reporter,
) -> Result<Got, (String, bool)> {
    let net = |e: anyhow::Error| (format!("{e:#}"), false);
    // The rendering is only a carrier: `Http::download` stores it under its
    // own hash; it leaves the cache again here, and only the checked
    // normalised diff is admitted below.
    let got = http.download(cache, url, None, reporter).map_err(net)?;
    let raw = std::fs::read(&got.path).map_err(|e| net(e.into()));
    let _ = std::fs::remove_file(&got.path);
    let raw = raw?;
    let normalised = normalise(&raw).map_err(|e| (format!("{e:#}"), true))?;
    check(&raw, &normalised, commit, pin, place).map_err(|why| (why, true))?;
    let (path, sha256) = admit(cache, key, &normalised).map_err(net)?;
    Ok(Got {
        url: url.to_owned(),
        path,
        sha256,
        bytes: got.bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CGIT: &str = "From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\n\
From: A <a@example.org>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nSubject: [PATCH] fix\n\n\
msg\n---\n a/x.c | 2 +-\n 1 file changed\n\n\
diff --git a/a/x.c b/a/x.c\nindex 0123456..89abcde 100644\n--- a/a/x.c\n+++ b/a/x.c\n\
@@ -1,3 +1,3 @@ int main(void)\n one\n-two\n+TWO\n three\n-- \n2.43.0\n";

    const GITHUB: &str = "From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\n\
From: A <a@example.org>\nSubject: [PATCH v2] fix\nX-Other: y\n\nanother message\n---\n\
diff --git a/a/x.c b/a/x.c\nindex 0123456789ab..89abcdef0123 100644\n--- a/a/x.c\n+++ b/a/x.c\n\
@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";

    #[test]
    fn two_renderings_normalise_alike() {
        let a = normalise(CGIT.as_bytes()).unwrap();
        let b = normalise(GITHUB.as_bytes()).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            String::from_utf8(a).unwrap(),
            "diff --git a/a/x.c b/a/x.c\n--- a/a/x.c\n+++ b/a/x.c\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
        );
        let changed = GITHUB.replace("+TWO", "+TW0");
        assert_ne!(normalise(changed.as_bytes()).unwrap(), b);
    }

    #[test]
    fn urls_are_derived_for_known_hosts() {
        let c = "b7851f8c66191cd23a0a08bd484465ad74bbbb7d";
        assert_eq!(
            derived_urls(
                "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git",
                c
            ),
            [format!(
                "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/patch/?id={c}"
            )]
        );
        assert_eq!(
            derived_urls("https://github.com/ROCm/rocm-libraries.git", c),
            [format!(
                "https://github.com/ROCm/rocm-libraries/commit/{c}.patch"
            )]
        );
        assert!(derived_urls("http://127.0.0.1:9/x.git", c).is_empty());
    }

    #[test]
    fn the_checks_name_what_differs() {
        let raw = GITHUB.as_bytes();
        let norm = normalise(raw).unwrap();
        let commit = "1111111111111111111111111111111111111111";
        let mut pin = PatchPin::default();
        pin.produces
            .insert("a/x.c".into(), format!("89abcdef0123{}", "0".repeat(28)));
        assert_eq!(
            check(raw, &norm, Some(commit), &pin, &Placement::default()),
            Ok(())
        );
        let other = "2222222222222222222222222222222222222222";
        assert!(check(raw, &norm, Some(other), &pin, &Placement::default())
            .unwrap_err()
            .contains("not of 2222"));
        pin.produces
            .insert("a/x.c".into(), format!("89abcdef0124{}", "0".repeat(28)));
        assert!(check(raw, &norm, Some(commit), &pin, &Placement::default())
            .unwrap_err()
            .contains("`a/x.c` as blob 89abcdef0123"));
        pin.produces.clear();
        pin.diff_sha256 = Some("0".repeat(64));
        assert!(check(raw, &norm, Some(commit), &pin, &Placement::default())
            .unwrap_err()
            .contains("not the pinned `diff_sha256`"));
    }
}
