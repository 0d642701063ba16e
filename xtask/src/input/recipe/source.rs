//! The `[source]` table: a git commit, a tarball, a local folder or
//! archive, or a binary package, each with the keys that apply to it.

use std::path::Path;

use toml::Spanned;

use super::checker::{at, strings, Checker};
use super::grammar::{
    check_commit, check_git_url, check_http_url, check_package_name, check_sha256, check_tree_path,
};
use super::raw::{RawSource, Str};
use super::Source;

pub(super) fn source(c: &mut Checker, s: &RawSource, table_at: usize, root: &Path) -> Source {
    if s.deb.is_some() {
        return deb_source(c, s, table_at, root);
    }
    c.reject(
        &[
            ("version", at(&s.version)),
            ("arch", at(&s.arch)),
            ("url", at(&s.url)),
        ],
        "source other than `deb`",
    );
    let kinds = one_kind(c, s, table_at);
    let strip = match &s.strip {
        Some(v) if *v.get_ref() < 0 || *v.get_ref() > 16 => {
            c.err(v.span().start, "`source.strip` must be between 0 and 16");
            0
        }
        Some(v) => *v.get_ref() as u32,
        None => 0,
    };
    let include = strings(&s.include);
    for glob in &include {
        if let Err(e) = globset::Glob::new(glob.get_ref()) {
            c.err(
                glob.span().start,
                format!("`source.include`: `{}` is not a glob ({e})", glob.get_ref()),
            );
        }
    }
    let include: Vec<String> = include.into_iter().map(Spanned::into_inner).collect();
    let sha256 = c.checked(&s.sha256, "source.sha256", check_sha256);
    match kinds.first().map(|(k, _)| *k) {
        Some("git") | None => git_source(c, s),
        Some("tarball") => {
            c.reject(
                &[
                    ("commit", at(&s.commit)),
                    ("ref", at(&s.reference)),
                    ("paths", at(&s.paths)),
                ],
                "tarball source (use `include`)",
            );
            let url = c
                .checked(&s.tarball, "source.tarball", check_http_url)
                .unwrap_or_default();
            Source::Tarball {
                url,
                sha256,
                strip,
                include,
            }
        }
        Some(_) => {
            c.reject(
                &[
                    ("commit", at(&s.commit)),
                    ("ref", at(&s.reference)),
                    ("paths", at(&s.paths)),
                ],
                "local source (use `include`)",
            );
            let local = s
                .local
                .as_ref()
                .map(|l| l.get_ref().clone())
                .unwrap_or_default();
            Source::Local {
                path: root.join(local),
                sha256,
                strip,
                include,
            }
        }
    }
}

/// `[source] git = "..."`: a commit of a repository, `paths` limiting
/// what is extracted.
fn git_source(c: &mut Checker, s: &RawSource) -> Source {
    c.reject(
        &[
            ("sha256", at(&s.sha256)),
            ("strip", at(&s.strip)),
            ("include", at(&s.include)),
        ],
        "git source (use `paths`)",
    );
    let url = c
        .checked(&s.git, "source.git", check_git_url)
        .unwrap_or_default();
    let commit = c.checked(&s.commit, "source.commit", check_commit);
    let paths = strings(&s.paths);
    for p in &paths {
        if let Err(why) = check_tree_path(p.get_ref()) {
            c.err(p.span().start, format!("`source.paths`: {why}"));
        }
    }
    Source::Git {
        url,
        commit,
        reference: s.reference.as_ref().map(|r| r.get_ref().clone()),
        paths: paths.into_iter().map(Spanned::into_inner).collect(),
    }
}

/// Which of `git`, `tarball` and `local` the table gives: exactly one, or
/// reported.
fn one_kind<'s>(
    c: &mut Checker,
    s: &'s RawSource,
    table_at: usize,
) -> Vec<(&'static str, &'s Str)> {
    let kinds: Vec<(&str, &Str)> = [
        ("git", &s.git),
        ("tarball", &s.tarball),
        ("local", &s.local),
    ]
    .into_iter()
    .filter(|(_, v)| v.is_some())
    .collect();
    if kinds.len() != 1 {
        let what = if kinds.is_empty() {
            "`[source]` needs one of `git`, `tarball` or `local`".to_owned()
        } else {
            let names: Vec<_> = kinds.iter().map(|(k, _)| format!("`{k}`")).collect();
            format!(
                "`[source]` takes exactly one of `git`, `tarball` or `local`, found {}",
                names.join(" and ")
            )
        };
        c.err(table_at, what);
    }
    kinds
}

/// `[source] deb = "name"`: a binary package pinned by its sha256, fetched
/// with apt by name, version and architecture, or from `url` or `local`.
fn deb_source(c: &mut Checker, s: &RawSource, table_at: usize, root: &Path) -> Source {
    c.reject(
        &[
            ("git", at(&s.git)),
            ("tarball", at(&s.tarball)),
            ("commit", at(&s.commit)),
            ("ref", at(&s.reference)),
            ("paths", at(&s.paths)),
            ("strip", at(&s.strip)),
            ("include", at(&s.include)),
        ],
        "deb source (the whole package is the tree)",
    );
    if let (Some(_), Some(l)) = (&s.url, &s.local) {
        c.err(
            l.span().start,
            "`[source]` of a deb takes `url` or `local`, not both",
        );
    }
    let package = c.required(&s.deb, table_at, "source.deb");
    c.checked(&s.deb, "source.deb", check_package_name);
    let version = c.required(&s.version, table_at, "source.version");
    c.checked(&s.version, "source.version", |v| {
        let ok = !v.is_empty()
            && v.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ".+~-:".contains(ch));
        ok.then_some(())
            .ok_or_else(|| format!("`{v}` is not a Debian version (digits, letters and `.+~-:`)"))
    });
    let arch = c
        .checked(&s.arch, "source.arch", |a| {
            let ok = !a.is_empty() && a.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-');
            ok.then_some(())
                .ok_or_else(|| format!("`{a}` is not a Debian architecture such as `amd64`"))
        })
        .unwrap_or_else(|| "amd64".to_owned());
    let sha256 = c.required(&s.sha256, table_at, "source.sha256");
    c.checked(&s.sha256, "source.sha256", check_sha256);
    let url = c.checked(&s.url, "source.url", check_http_url);
    let local = s.local.as_ref().map(|l| root.join(l.get_ref()));
    Source::Deb(super::DebSource {
        package,
        version,
        arch,
        sha256,
        url,
        local,
    })
}
