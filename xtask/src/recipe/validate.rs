//! Turns a [`RawRecipe`] into a [`Recipe`], checking presence, grammar and
//! the patch folder, and collecting every problem with its location.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use toml::Spanned;

use super::raw::{self, RawPatch, RawRecipe, RawSource, Str, StrList};
use super::{Format, KernelRange, Kind, Package, Patch, PatchOrigin, Recipe, Source, Target};
use crate::diag::{Diag, InvalidInput};

pub(super) struct Checker<'a> {
    file: &'a Path,
    text: &'a str,
    diags: Vec<Diag>,
    /// Keys already reported as unknown or mistyped: not reported missing too.
    refused: Vec<String>,
}

impl Checker<'_> {
    pub(super) fn err(&mut self, offset: usize, message: impl Into<String>) {
        self.diags
            .push(Diag::at(self.file, self.text, offset, message));
    }

    /// A required string key; reports it missing at the table's position.
    pub(super) fn required(&mut self, value: &Str, table_at: usize, key: &str) -> String {
        match value {
            Some(v) if !v.get_ref().trim().is_empty() => v.get_ref().clone(),
            Some(v) => {
                self.err(v.span().start, format!("`{key}` must not be empty"));
                String::new()
            }
            None => {
                if !self.refused.iter().any(|r| r == key) {
                    self.err(table_at, format!("missing key `{key}`"));
                }
                String::new()
            }
        }
    }

    /// An optional key that must match `check`; returns it when it does.
    pub(super) fn checked(
        &mut self,
        value: &Str,
        key: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Option<String> {
        let v = value.as_ref()?;
        match check(v.get_ref()) {
            Ok(()) => Some(v.get_ref().clone()),
            Err(why) => {
                self.err(v.span().start, format!("`{key}`: {why}"));
                None
            }
        }
    }

    /// Keys that make no sense for the chosen kind of source or patch.
    fn reject(&mut self, present: &[(&str, Option<usize>)], kind: &str) {
        for (key, at) in present {
            if let Some(at) = at {
                self.err(
                    *at,
                    format!("`{key}` does not apply to a {kind}; remove it"),
                );
            }
        }
    }
}

fn at<T>(value: &Option<Spanned<T>>) -> Option<usize> {
    value.as_ref().map(|v| v.span().start)
}

fn strings(list: &StrList) -> Vec<Spanned<String>> {
    list.as_ref()
        .map(|l| l.get_ref().clone())
        .unwrap_or_default()
}

pub fn check_commit(value: &str) -> Result<(), String> {
    if value.len() == 40
        && value
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a full commit id: write all 40 lower-case hex digits, or set `ref` and run `cargo xtask lock`"
        ))
    }
}

pub fn check_sha256(value: &str) -> Result<(), String> {
    if value.len() == 64
        && value
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a sha256: write 64 lower-case hex digits, or remove it and run `cargo xtask lock`"
        ))
    }
}

fn check_http_url(value: &str) -> Result<(), String> {
    match url::Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        Ok(u) => Err(format!(
            "`{value}` uses `{}`: only http and https URLs are fetched",
            u.scheme()
        )),
        Err(e) => Err(format!("`{value}` is not a URL ({e})")),
    }
}

fn check_git_url(value: &str) -> Result<(), String> {
    if Path::new(value).is_absolute() {
        return Ok(());
    }
    match url::Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https" | "git" | "file" | "ssh") => Ok(()),
        Ok(u) => Err(format!(
            "`{value}` uses `{}`: use https, http, git, ssh, file or an absolute path",
            u.scheme()
        )),
        Err(e) => Err(format!(
            "`{value}` is neither a URL nor an absolute path ({e})"
        )),
    }
}

/// A path inside the extracted tree: relative, no `..`.
pub(super) fn check_tree_path(value: &str) -> Result<(), String> {
    let path = Path::new(value);
    if value.is_empty()
        || path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        Err(format!(
            "`{value}` must be a relative path inside the source tree, without `..`"
        ))
    } else {
        Ok(())
    }
}

/// Debian's package-name grammar, which is also valid for RPM and Arch.
fn check_package_name(value: &str) -> Result<(), String> {
    let ok = value.len() >= 2
        && value
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` is not a package name: use lower-case letters, digits, `+`, `-` and `.`, starting with a letter or digit"))
    }
}

/// A version every target accepts: starts with a digit; letters, digits, `.`, `+`, `~`.
fn check_version(value: &str) -> Result<(), String> {
    let ok = value.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+.~".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` is not a version: start with a digit and use letters, digits, `.`, `+` and `~` (no `-`, no spaces)"))
    }
}

fn check_release(value: &str) -> Result<(), String> {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.')
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a release: use letters, digits and `.`"
        ))
    }
}

fn check_one_line(value: &str) -> Result<(), String> {
    if value.contains(['\n', '\r']) {
        Err("must be a single line".to_owned())
    } else {
        Ok(())
    }
}

fn check_patch_name(value: &str) -> Result<(), String> {
    let ok = !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        && (value.ends_with(".patch") || value.ends_with(".diff"));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` is not a patch file name: letters, digits, `.`, `_`, `+`, `-`, ending in `.patch` or `.diff`"))
    }
}

pub fn validate(path: &Path, root: &Path, text: &str) -> Result<Recipe> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let mut c = Checker {
        file: path,
        text,
        diags: Vec::new(),
        refused: Vec::new(),
    };
    let (raw, problems) = raw::deserialize_all(text);
    for problem in problems {
        c.err(problem.offset, problem.message);
        c.refused.extend(problem.key);
    }
    let Some(raw) = raw else {
        return Err(InvalidInput(c.diags).into());
    };
    let recipe = build(&mut c, raw, &name, path, root);
    if c.diags.is_empty() {
        Ok(recipe)
    } else {
        c.diags
            .sort_by(|a, b| (&a.file, a.line, a.col).cmp(&(&b.file, b.line, b.col)));
        Err(InvalidInput(c.diags).into())
    }
}

fn build(c: &mut Checker, raw: RawRecipe, name: &str, path: &Path, root: &Path) -> Recipe {
    let package = match &raw.package {
        Some(p) => package(c, p.get_ref(), p.span().start),
        None => {
            c.err(0, "missing table `[package]`");
            package(c, &empty_package(), usize::MAX)
        }
    };
    let source = match &raw.source {
        Some(s) => source(c, s.get_ref(), s.span().start, root),
        None => {
            c.err(
                0,
                "missing table `[source]`: give `git`, `tarball` or `local`",
            );
            Source::Local {
                path: PathBuf::new(),
                sha256: None,
                strip: 0,
                include: Vec::new(),
            }
        }
    };
    let target = match &raw.target {
        Some(t) => target(c, t.get_ref(), t.span().start),
        None => {
            c.err(
                0,
                "missing table `[target]`: give `kind = \"dkms\"`, `kind = \"hipblaslt\"` or `kind = \"config\"`",
            );
            Target {
                kind: Kind::Dkms,
                kernel: None,
                kernel_regex: None,
                formats: Vec::new(),
            }
        }
    };
    let patches = patches(c, &raw.patch, &root.join("patches").join(name));
    let dkms = match (&raw.dkms, target.kind) {
        (Some(d), Kind::Dkms) => Some(dkms(c, d.get_ref(), d.span().start)),
        (Some(d), _) => {
            c.err(
                d.span().start,
                "`[dkms]` applies to `kind = \"dkms\"` recipes only; remove it",
            );
            None
        }
        (None, _) => None,
    };
    let config = match (&raw.config, target.kind) {
        (Some(t), Kind::Config) => Some(super::config::config(c, t.get_ref(), t.span().start)),
        (Some(t), _) => {
            c.err(
                t.span().start,
                "`[config]` applies to `kind = \"config\"` recipes only; remove it",
            );
            None
        }
        (None, Kind::Config) => {
            c.err(
                raw.target.as_ref().map_or(0, |t| t.span().start),
                "a config recipe needs a `[config]` table with `files = [{ source = \"x.conf\", dest = \"/etc/modprobe.d/x.conf\" }]`",
            );
            None
        }
        (None, _) => None,
    };
    Recipe {
        name: name.to_owned(),
        path: path.to_owned(),
        root: root.to_owned(),
        package,
        source,
        patches,
        target,
        dkms,
        config,
    }
}

fn empty_package() -> raw::RawPackage {
    raw::RawPackage {
        name: None,
        version: None,
        release: None,
        summary: None,
        description: None,
        license: None,
        homepage: None,
        maintainer: None,
    }
}

fn package(c: &mut Checker, p: &raw::RawPackage, table_at: usize) -> Package {
    let table_at = if table_at == usize::MAX { 0 } else { table_at };
    let name = c.required(&p.name, table_at, "package.name");
    let version = c.required(&p.version, table_at, "package.version");
    let summary = c.required(&p.summary, table_at, "package.summary");
    let description = c.required(&p.description, table_at, "package.description");
    let license = c.required(&p.license, table_at, "package.license");
    let maintainer = c.required(&p.maintainer, table_at, "package.maintainer");
    c.checked(&p.name, "package.name", check_package_name);
    c.checked(&p.version, "package.version", check_version);
    c.checked(&p.summary, "package.summary", check_one_line);
    c.checked(&p.license, "package.license", check_one_line);
    c.checked(&p.maintainer, "package.maintainer", |m| {
        check_one_line(m)?;
        let ok = m
            .find('<')
            .is_some_and(|lt| lt > 0 && m.trim_end().ends_with('>') && m[lt..].contains('@'));
        if ok {
            Ok(())
        } else {
            Err(format!("`{m}` must read `Full Name <email@example.org>`"))
        }
    });
    let release = c
        .checked(&p.release, "package.release", check_release)
        .unwrap_or_else(|| "1".to_owned());
    let homepage = c.checked(&p.homepage, "package.homepage", check_http_url);
    Package {
        name,
        version,
        release,
        summary,
        description,
        license,
        homepage,
        maintainer,
    }
}

fn source(c: &mut Checker, s: &RawSource, table_at: usize, root: &Path) -> Source {
    let kinds: Vec<_> = [
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
        Some("git") | None => {
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

/// A DKMS module name: what `BUILT_MODULE_NAME` and the `.ko` file accept.
fn check_module_name(value: &str) -> Result<(), String> {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a module name: letters, digits, `_` and `-`"
        ))
    }
}

/// An absolute module directory below `/lib/modules/<kernel>/`.
fn check_dest(value: &str) -> Result<(), String> {
    let ok = value.starts_with('/')
        && !value.split('/').any(|part| part == "..")
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_-.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` must be an absolute folder such as `/updates/dkms` (letters, digits, `/`, `_`, `-`, `.`)"))
    }
}

/// A make line for dkms.conf: one line; dkms.conf quotes it.
fn check_make(value: &str) -> Result<(), String> {
    check_one_line(value)?;
    if value.contains('\'') {
        return Err("must not contain `'` (dkms.conf holds it in single quotes)".to_owned());
    }
    Ok(())
}

fn dkms(c: &mut Checker, d: &raw::RawDkms, table_at: usize) -> super::Dkms {
    let tree = c
        .checked(&d.tree, "dkms.tree", |t| {
            if t == "." {
                Ok(())
            } else {
                check_tree_path(t)
            }
        })
        .unwrap_or_else(|| ".".to_owned());
    let make = c.checked(&d.make, "dkms.make", check_make);
    let clean = c.checked(&d.clean, "dkms.clean", check_make);
    if d.module.is_empty() {
        c.err(
            table_at,
            "`[dkms]` needs at least one `[[dkms.module]]` with `name` (and `location`)",
        );
    }
    let mut modules = Vec::new();
    for (i, m) in d.module.iter().enumerate() {
        let (m, at) = (m.get_ref(), m.span().start);
        let key = |k: &str| format!("dkms.module[{i}].{k}");
        let name = c.required(&m.name, at, &key("name"));
        c.checked(&m.name, &key("name"), check_module_name);
        let location = c
            .checked(&m.location, &key("location"), |l| {
                if l == "." {
                    Ok(())
                } else {
                    check_tree_path(l)
                }
            })
            .unwrap_or_else(|| ".".to_owned());
        let dest = c
            .checked(&m.dest, &key("dest"), check_dest)
            .unwrap_or_else(|| "/updates/dkms".to_owned());
        modules.push(super::Module {
            name,
            location,
            dest,
        });
    }
    super::Dkms {
        tree,
        make,
        clean,
        modules,
    }
}

fn target(c: &mut Checker, t: &raw::RawTarget, table_at: usize) -> Target {
    let kind = match &t.kind {
        Some(k) => Kind::ALL
            .iter()
            .find(|(s, _)| s == k.get_ref())
            .map(|(_, k)| *k)
            .unwrap_or_else(|| {
                c.err(
                    k.span().start,
                    format!(
                        "`target.kind`: `{}` is not one of `dkms`, `hipblaslt`, `config`",
                        k.get_ref()
                    ),
                );
                Kind::Dkms
            }),
        None => {
            c.err(
                table_at,
                "missing key `target.kind` (`dkms`, `hipblaslt` or `config`)",
            );
            Kind::Dkms
        }
    };
    let kernel = t
        .kernel
        .as_ref()
        .and_then(|k| match KernelRange::parse(k.get_ref()) {
            Ok(range) => Some(range),
            Err(why) => {
                c.err(k.span().start, format!("`target.kernel`: {why}"));
                None
            }
        });
    let kernel_regex = t.kernel_regex.as_ref().map(|r| r.get_ref().clone());
    if kind == Kind::Dkms && t.kernel.is_none() && t.kernel_regex.is_none() {
        c.err(table_at, "a dkms recipe needs `target.kernel` (e.g. `>=6.11, <6.12.64`) or `target.kernel_regex`");
    }
    if kind != Kind::Dkms {
        c.reject(
            &[
                ("kernel", at(&t.kernel)),
                ("kernel_regex", at(&t.kernel_regex)),
            ],
            &format!("{} recipe", kind.as_str()),
        );
    }
    let mut formats = Vec::new();
    for f in strings(&t.formats) {
        match Format::ALL.iter().find(|(s, _)| s == f.get_ref()) {
            Some((_, format)) if formats.contains(format) => c.err(
                f.span().start,
                format!("`target.formats`: `{}` is listed twice", f.get_ref()),
            ),
            Some((_, format)) => formats.push(*format),
            None => c.err(
                f.span().start,
                format!(
                    "`target.formats`: `{}` is not one of `deb`, `rpm`, `arch`, `tar`",
                    f.get_ref()
                ),
            ),
        }
    }
    if t.formats.is_none() {
        formats = Format::ALL.iter().map(|(_, f)| *f).collect();
        if kind == Kind::Config {
            formats.retain(|f| *f != Format::Tar);
        }
    }
    if kind == Kind::Config && formats.contains(&Format::Tar) {
        let at = t.formats.as_ref().map_or(table_at, |f| f.span().start);
        c.err(
            at,
            "`target.formats`: a config recipe builds `deb`, `rpm` and `arch` packages; `tar` is for DKMS sources",
        );
    }
    Target {
        kind,
        kernel,
        kernel_regex,
        formats,
    }
}

fn patches(c: &mut Checker, raw: &[Spanned<RawPatch>], dir: &Path) -> Vec<Patch> {
    let mut patches = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut files_in_recipe = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let p = entry.get_ref();
        let table_at = entry.span().start;
        let key = |k: &str| format!("patch[{i}].{k}");
        let kinds: Vec<_> = [("file", &p.file), ("url", &p.url), ("git", &p.git)]
            .into_iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k)
            .collect();
        let origin = match kinds.as_slice() {
            ["file"] => {
                c.reject(
                    &[
                        ("name", at(&p.name)),
                        ("commit", at(&p.commit)),
                        ("sha256", at(&p.sha256)),
                    ],
                    "file patch (its name is the file name; its hash is computed)",
                );
                let file = c.checked(&p.file, &key("file"), check_patch_name);
                file.map(|f| {
                    let at = at(&p.file).unwrap_or(table_at);
                    files_in_recipe.push((f.clone(), at));
                    if !dir.join(&f).is_file() {
                        c.err(
                            at,
                            format!(
                                "`{}`: patch file {} is missing",
                                key("file"),
                                crate::diag::display_path(&dir.join(&f)).display()
                            ),
                        );
                    }
                    (f.clone(), PatchOrigin::File { path: dir.join(&f) })
                })
            }
            ["url"] => {
                c.reject(&[("commit", at(&p.commit))], "url patch");
                let url = c.checked(&p.url, &key("url"), check_http_url);
                let sha256 = c.checked(&p.sha256, &key("sha256"), check_sha256);
                let name = c.required(&p.name, table_at, &key("name"));
                c.checked(&p.name, &key("name"), check_patch_name);
                url.map(|url| (name, PatchOrigin::Url { url, sha256 }))
            }
            ["git"] => {
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
        };
        let Some((name, origin)) = origin else {
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
        patches.push(Patch { name, origin });
    }
    series(c, dir, &files_in_recipe);
    patches
}

/// The `series` file must list exactly the patch files of the folder, in the
/// order the recipe uses them.
fn series(c: &mut Checker, dir: &Path, files_in_recipe: &[(String, usize)]) {
    let series_path = dir.join("series");
    let on_disk: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".patch") || n.ends_with(".diff"))
                .collect();
            names.sort();
            names
        }
        Err(_) => Vec::new(),
    };
    let series_text = std::fs::read_to_string(&series_path).ok();
    let Some(series_text) = series_text else {
        if !files_in_recipe.is_empty() || !on_disk.is_empty() {
            let display = crate::diag::display_path(&series_path);
            let at = files_in_recipe.first().map_or(0, |(_, at)| *at);
            c.err(
                at,
                format!(
                    "{} is missing: list the patch files of {} in it, one a line, in order",
                    display.display(),
                    crate::diag::display_path(dir).display()
                ),
            );
        }
        return;
    };
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
        let series_diag = |message: String| Diag::at(&series_path, &series_text, here, message);
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
                crate::diag::display_path(dir).display()
            )));
        }
        listed.push((name, here));
    }
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
