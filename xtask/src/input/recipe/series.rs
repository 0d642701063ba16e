//! The patch series of a recipe: its `[[patch]]` entries, and the
//! `patches/<recipe>/series` file that must list exactly the folder's patch
//! files in the recipe's order.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Spanned;

use super::checker::{at, Checker};
use super::grammar::check_tree_path;
use super::grammar::{check_commit, check_git_url, check_http_url, check_patch_name, check_sha256};
use super::raw::RawPatch;
use super::{Patch, PatchOrigin, PatchPin};
use crate::shared::diag::Diag;

pub(super) fn patches(c: &mut Checker, raw: &[Spanned<RawPatch>], dir: &Path) -> Vec<Patch> {
    let mut patches = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut folder = Folder {
        dir,
        files_in_recipe: Vec::new(),
    };
    for (i, entry) in raw.iter().enumerate() {
        let p = entry.get_ref();
        let table_at = entry.span().start;
        let key = |k: &str| format!("patch[{i}].{k}");
        let at = Entry {
            index: i,
            table_at,
            key: &key,
        };
        let Some((name, origin)) = origin(c, p, &at, &mut folder) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        if let Some(first) = seen.get(&name) {
            c.err(table_at, format!("duplicate patch name `{name}` (first used by patch[{first}]): every patch needs its own name"));
            continue;
        }
        seen.insert(name.clone(), i);
        let fuzz = fuzz(c, p, &key);
        let place = placement(c, p, &key);
        let pin = if matches!(origin, PatchOrigin::File { .. }) {
            PatchPin::default()
        } else {
            pin(c, p, &key)
        };
        patches.push(Patch {
            name,
            origin,
            fuzz,
            place,
            pin,
        });
    }
    series(c, dir, &folder.files_in_recipe);
    patches
}

/// The recipe's `patches/<recipe>/` folder, and the curated files its
/// entries name, each with its offset.
struct Folder<'d> {
    dir: &'d Path,
    files_in_recipe: Vec<(String, usize)>,
}

/// Where a `[[patch]]` entry is: its index, its table's offset, and its
/// keys as messages name them (`patch[0].file`).
struct Entry<'k> {
    index: usize,
    table_at: usize,
    key: &'k dyn Fn(&str) -> String,
}

/// The entry's name and origin: exactly one of `file`, `url` or `git`,
/// with the keys that apply to it.
fn origin(
    c: &mut Checker,
    p: &RawPatch,
    e: &Entry,
    folder: &mut Folder,
) -> Option<(String, PatchOrigin)> {
    let (i, table_at, key) = (e.index, e.table_at, e.key);
    let kinds: Vec<_> = [("file", &p.file), ("url", &p.url), ("git", &p.git)]
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k)
        .collect();
    match kinds.as_slice() {
        ["file"] => file_origin(c, p, e, folder),
        ["url"] => {
            c.reject(
                &[("commit", at(&p.commit)), ("urls", at(&p.urls))],
                "url patch",
            );
            let url = c.checked(&p.url, &key("url"), check_http_url);
            let sha256 = c.checked(&p.sha256, &key("sha256"), check_sha256);
            let name = c.required(&p.name, table_at, &key("name"));
            c.checked(&p.name, &key("name"), check_patch_name);
            url.map(|url| (name, PatchOrigin::Url { url, sha256 }))
        }
        ["git"] => git_origin(c, p, e),
        [] => {
            c.err(
                table_at,
                format!("`patch[{i}]` needs one of `file`, `url` or `git`"),
            );
            None
        }
        several => {
            c.err(
                table_at,
                format!(
                    "`patch[{i}]` takes exactly one of `file`, `url` or `git`, found {}",
                    several.join(" and ")
                ),
            );
            None
        }
    }
}

/// A curated file of `patches/<recipe>/`: there, and not empty.
fn file_origin(
    c: &mut Checker,
    p: &RawPatch,
    e: &Entry,
    folder: &mut Folder,
) -> Option<(String, PatchOrigin)> {
    let (key, dir) = (e.key, folder.dir);
    c.reject(
        &[
            ("name", at(&p.name)),
            ("commit", at(&p.commit)),
            ("sha256", at(&p.sha256)),
            ("diff_sha256", at(&p.diff_sha256)),
            ("produces", at(&p.produces)),
            ("urls", at(&p.urls)),
            ("pinned_from", at(&p.pinned_from)),
            ("why_unpinned", at(&p.why_unpinned)),
        ],
        "file patch (its name is the file name; its hash is computed)",
    );
    let f = c.checked(&p.file, &key("file"), check_patch_name)?;
    let at = at(&p.file).unwrap_or(e.table_at);
    folder.files_in_recipe.push((f.clone(), at));
    let full = dir.join(&f);
    if !full.is_file() {
        c.err(
            at,
            format!(
                "`{}`: patch file {} is missing (curated patches live in \
                 `patches/<recipe>/` below the project root {}; a recipe outside \
                 a `recipes/` folder uses the root of PATCHKIT_ROOT or of this \
                 checkout)",
                key("file"),
                crate::shared::diag::display_path(&full).display(),
                dir.parent()
                    .and_then(Path::parent)
                    .map(|r| r.display().to_string())
                    .unwrap_or_default()
            ),
        );
    } else if std::fs::metadata(&full).is_ok_and(|m| m.len() == 0) {
        c.err(
            at,
            format!(
                "`{}`: patch file {} is empty: write the patch into it, or remove \
                 the entry and its line in the series",
                key("file"),
                crate::shared::diag::display_path(&full).display()
            ),
        );
    }
    Some((f.clone(), PatchOrigin::File { path: full }))
}

/// An upstream commit: its repository and full commit id.
fn git_origin(c: &mut Checker, p: &RawPatch, e: &Entry) -> Option<(String, PatchOrigin)> {
    let (table_at, key) = (e.table_at, e.key);
    let url = c.checked(&p.git, &key("git"), check_git_url);
    let commit_present = p.commit.is_some();
    let commit = c.checked(&p.commit, &key("commit"), check_commit);
    if !commit_present {
        c.err(
            table_at,
            format!(
                "missing key `{}`: an upstream commit patch needs the full commit id",
                key("commit")
            ),
        );
    }
    let sha256 = c.checked(&p.sha256, &key("sha256"), check_sha256);
    let name = c.required(&p.name, table_at, &key("name"));
    c.checked(&p.name, &key("name"), check_patch_name);
    url.zip(commit).map(|(url, commit)| {
        (
            name,
            PatchOrigin::Git {
                url,
                commit,
                sha256,
            },
        )
    })
}

/// `fuzz`: 0 to 3 context lines a hunk may ignore at each end.
fn fuzz(c: &mut Checker, p: &RawPatch, key: &dyn Fn(&str) -> String) -> usize {
    match &p.fuzz {
        Some(v) if !(0..=3).contains(v.get_ref()) => {
            c.err(
                v.span().start,
                format!(
                    "`{}` must be between 0 and 3 (context lines a hunk may ignore at each end)",
                    key("fuzz")
                ),
            );
            0
        }
        Some(v) => *v.get_ref() as usize,
        None => 0,
    }
}

/// `diff_sha256`, `produces`, `urls` and `pinned_from` of a url or git patch.
fn pin(c: &mut Checker, p: &RawPatch, key: &dyn Fn(&str) -> String) -> PatchPin {
    let diff_sha256 = c.checked(&p.diff_sha256, &key("diff_sha256"), check_sha256);
    let mut produces = BTreeMap::new();
    if let Some(table) = &p.produces {
        if table.get_ref().is_empty() {
            c.err(
                table.span().start,
                format!(
                    "`{}` is empty: name each file the patch must leave with its git blob id \
                     (`\"path/in/tree\" = \"<40 hex>\"`, `git hash-object <file>`), or remove it",
                    key("produces")
                ),
            );
        }
        for (path, blob) in table.get_ref() {
            if let Err(why) = check_tree_path(path) {
                c.err(
                    blob.span().start,
                    format!("`{}`: `{path}`: {why}", key("produces")),
                );
                continue;
            }
            let id = blob.get_ref();
            if id.len() != 40 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                c.err(
                    blob.span().start,
                    format!(
                        "`{}`: `{id}` for `{path}` is not a full git blob id: write the 40 \
                         lower-case hex digits `git hash-object` prints for the patched file",
                        key("produces")
                    ),
                );
                continue;
            }
            produces.insert(path.clone(), id.clone());
        }
    }
    let mut urls = Vec::new();
    for u in p
        .urls
        .as_ref()
        .map(|l| l.get_ref().as_slice())
        .unwrap_or_default()
    {
        match check_http_url(u.get_ref()) {
            Ok(()) => urls.push(u.get_ref().clone()),
            Err(why) => c.err(u.span().start, format!("`{}`: {why}", key("urls"))),
        }
    }
    let pinned_from = super::checker::pinned_from(c, p.pinned_from.as_ref(), &key("pinned_from"));
    let why_unpinned = c.checked(
        &p.why_unpinned,
        &key("why_unpinned"),
        super::grammar::check_one_line,
    );
    PatchPin {
        diff_sha256,
        produces,
        urls,
        pinned_from,
        why_unpinned,
    }
}

/// `strip` and `directory` of a patch entry: how many leading folders its
/// paths lose, and the folder they are put under.
fn placement(
    c: &mut Checker,
    p: &RawPatch,
    key: &dyn Fn(&str) -> String,
) -> crate::input::placement::Placement {
    let strip = match &p.strip {
        None => 0,
        Some(n) if (0..=16).contains(n.get_ref()) => *n.get_ref() as usize,
        Some(n) => {
            c.err(
                n.span().start,
                format!(
                    "`{}`: {} is not a number of leading folders to drop (0 to 16)",
                    key("strip"),
                    n.get_ref()
                ),
            );
            0
        }
    };
    let directory = p.directory.as_ref().and_then(|d| {
        let dir = d.get_ref().trim_end_matches('/');
        let bad = dir.is_empty()
            || dir.starts_with('/')
            || dir.split('/').any(|part| part.is_empty() || part == "." || part == "..");
        if bad {
            c.err(
                d.span().start,
                format!(
                    "`{}`: `{}` is not a folder inside the tree (relative, no `.`, `..` or empty parts, e.g. `projects/hipblaslt`)",
                    key("directory"),
                    d.get_ref()
                ),
            );
            return None;
        }
        Some(dir.to_owned())
    });
    crate::input::placement::Placement { strip, directory }
}

/// The `series` file must list exactly the patch files of the folder, in the
/// order the recipe uses them.
fn series(c: &mut Checker, dir: &Path, files_in_recipe: &[(String, usize)]) {
    let series_path = dir.join("series");
    let on_disk = patch_files(dir);
    let series_text = std::fs::read_to_string(&series_path).ok();
    let Some(series_text) = series_text else {
        if !files_in_recipe.is_empty() || !on_disk.is_empty() {
            let display = crate::shared::diag::display_path(&series_path);
            let at = files_in_recipe.first().map_or(0, |(_, at)| *at);
            c.err(
                at,
                format!(
                    "{} is missing: list the patch files of {} in it, one a line, in order",
                    display.display(),
                    crate::shared::diag::display_path(dir).display()
                ),
            );
        }
        return;
    };
    let listed = listed(c, dir, &series_path, &series_text, &on_disk);
    for name in &on_disk {
        if !listed.iter().any(|(n, _)| n == name) {
            c.diags.push(Diag::at(&series_path, &series_text, series_text.len(), format!("`{name}` is in the folder but not listed in the series: add it, or delete the file")));
        }
    }
    let listed_names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    let used: Vec<&str> = files_in_recipe.iter().map(|(n, _)| n.as_str()).collect();
    for (name, here) in &listed {
        if !used.contains(&name.as_str()) {
            c.diags.push(Diag::at(&series_path, &series_text, *here, format!("`{name}` is in the series but no `[[patch]] file = \"{name}\"` of the recipe uses it")));
        }
    }
    let in_series: Vec<&str> = used
        .iter()
        .copied()
        .filter(|n| listed_names.contains(n))
        .collect();
    let series_order: Vec<&str> = listed_names
        .iter()
        .copied()
        .filter(|n| used.contains(n))
        .collect();
    if in_series != series_order {
        let at = files_in_recipe.first().map_or(0, |(_, at)| *at);
        c.err(at, format!("the recipe lists its patch files in another order than the series ({}): make them agree", series_order.join(", ")));
    }
}

/// The `.patch` and `.diff` files of `dir`, sorted.
fn patch_files(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".patch") || n.ends_with(".diff"))
                .collect();
            names.sort();
            names
        }
        Err(_) => Vec::new(),
    }
}

/// The names the `series` file lists, each once, with its offset; every
/// option but `-p1`, every name twice and every name without its file
/// reported.
fn listed(
    c: &mut Checker,
    dir: &Path,
    series_path: &Path,
    series_text: &str,
    on_disk: &[String],
) -> Vec<(String, usize)> {
    let mut listed: Vec<(String, usize)> = Vec::new();
    let mut offset = 0;
    for line in series_text.split_inclusive('\n') {
        let entry = line.split('#').next().unwrap_or_default().trim();
        let here = offset;
        offset += line.len();
        if entry.is_empty() {
            continue;
        }
        let mut words = entry.split_whitespace();
        let name = words.next().unwrap_or_default().to_owned();
        let rest: Vec<_> = words.collect();
        let series_diag = |message: String| Diag::at(series_path, series_text, here, message);
        if !(rest.is_empty() || rest == ["-p1"]) {
            c.diags.push(series_diag(format!(
                "`{}`: only `-p1` patches are supported",
                rest.join(" ")
            )));
        }
        if listed.iter().any(|(n, _)| *n == name) {
            c.diags
                .push(series_diag(format!("`{name}` is listed twice")));
            continue;
        }
        if !on_disk.contains(&name) {
            c.diags.push(series_diag(format!(
                "`{name}` is listed but {} has no such file",
                crate::shared::diag::display_path(dir).display()
            )));
        }
        listed.push((name, here));
    }
    listed
}
