//! Turns a [`RawRecipe`] into a [`Recipe`], checking presence, grammar and
//! the patch folder, and collecting every problem with its location.

use std::path::{Path, PathBuf};

use anyhow::Result;
use toml::Spanned;

pub(super) use super::grammar::check_tree_path;
use super::grammar::{
    check_commit, check_description, check_dest, check_git_url, check_http_url, check_make,
    check_module_name, check_one_line, check_package_name, check_recipe_path, check_release,
    check_sha256, check_shell_path, check_summary, check_version,
};
use super::raw::{self, RawRecipe, RawSource, Str, StrList};
use super::{ExpertSched, Format, Kind, Package, Recipe, Source, Target};
use crate::diag::{Diag, InvalidInput};
use crate::kernel::KernelRange;
use crate::package::Compression;

pub(super) struct Checker<'a> {
    pub(super) file: &'a Path,
    pub(super) text: &'a str,
    pub(super) diags: Vec<Diag>,
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
    pub(super) fn reject(&mut self, present: &[(&str, Option<usize>)], kind: &str) {
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

pub(super) fn at<T>(value: &Option<Spanned<T>>) -> Option<usize> {
    value.as_ref().map(|v| v.span().start)
}

fn strings(list: &StrList) -> Vec<Spanned<String>> {
    list.as_ref()
        .map(|l| l.get_ref().clone())
        .unwrap_or_default()
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
    if let Err(why) = check_recipe_path(path) {
        c.err(0, why);
    }
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
                expert_sched: None,
            }
        }
    };
    let patches = super::series::patches(c, &raw.patch, &root.join("patches").join(name));
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
    let source_pinned_from = pinned_from(
        c,
        raw.source
            .as_ref()
            .and_then(|s| s.get_ref().pinned_from.as_ref()),
        "source.pinned_from",
    );
    let source_why_unpinned = raw.source.as_ref().and_then(|s| {
        c.checked(
            &s.get_ref().why_unpinned,
            "source.why_unpinned",
            super::grammar::check_one_line,
        )
    });
    if let (Kind::Rewrite, Source::Deb(deb), Some(p)) = (target.kind, &source, &raw.package) {
        let upstream = deb
            .version
            .rsplit_once('-')
            .map_or(deb.version.as_str(), |(v, _)| v);
        if package.name != deb.package {
            c.err(p.span().start, format!("`package.name` of a rewrite recipe is the name of the package it takes the place of: `{}`", deb.package));
        }
        if package.version != upstream.split_once(':').map_or(upstream, |(_, v)| v) {
            c.err(p.span().start, format!("`package.version` of a rewrite recipe is the upstream version of its source: `{upstream}` (the build's version is `{}+patchkit<release>`)", deb.version));
        }
    }
    if target.kind == Kind::Rewrite && !matches!(source, Source::Deb(_)) {
        c.err(raw.source.as_ref().map_or(0, |s| s.span().start), "a rewrite recipe's source is a binary package: `[source] deb = \"name\"` with `version`, `arch` and `sha256`");
    }
    Recipe {
        source_pinned_from,
        source_why_unpinned,
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

/// `pinned_from`: one line each, naming a public record of the pin
/// (`buildroot linux/linux.hash at 118f5eb360`).
pub(super) fn pinned_from(
    c: &mut Checker,
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    key: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for entry in list.map(|l| l.get_ref().as_slice()).unwrap_or_default() {
        let text = entry.get_ref().trim();
        if text.is_empty() || text.contains(char::is_control) {
            c.err(
                entry.span().start,
                format!("`{key}`: each entry names one public record of the pin on one line (e.g. `buildroot linux/linux.hash at 118f5eb360`)"),
            );
            continue;
        }
        out.push(text.to_owned());
    }
    out
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
        compression: None,
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
    c.checked(&p.summary, "package.summary", check_summary);
    if let Some(d) = &p.description {
        // Point at the offending line itself when the text is written
        // without escapes, else at the value.
        let at = match super::grammar::spec_directive_line(d.get_ref()) {
            Some((_, line)) => c.text[d.span()]
                .find(line)
                .map_or(d.span().start, |i| d.span().start + i),
            None => d.span().start,
        };
        if let Err(why) = check_description(d.get_ref()) {
            c.err(at, format!("`package.description`: {why}"));
        }
    }
    c.checked(&p.license, "package.license", |l| {
        check_one_line(l)?;
        if l.contains(['<', '>']) {
            return Err(format!(
                "`{l}` must be one SPDX expression such as `GPL-2.0-only`"
            ));
        }
        Ok(())
    });
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
    let homepage = c.checked(&p.homepage, "package.homepage", |h| {
        check_one_line(h)?;
        if h.contains(char::is_whitespace) {
            return Err(format!("`{h}` must be a URL without spaces"));
        }
        check_http_url(h)
    });
    let compression = c
        .checked(&p.compression, "package.compression", |text| {
            text.parse::<Compression>().map(|_| ())
        })
        .and_then(|text| text.parse().ok());
    Package {
        name,
        version,
        release,
        summary,
        description,
        license,
        homepage,
        maintainer,
        compression,
    }
}

fn source(c: &mut Checker, s: &RawSource, table_at: usize, root: &Path) -> Source {
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

fn dkms(c: &mut Checker, d: &raw::RawDkms, table_at: usize) -> super::Dkms {
    let tree = c
        .checked(&d.tree, "dkms.tree", check_shell_path)
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
            .checked(&m.location, &key("location"), check_shell_path)
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
                        "`target.kind`: `{}` is not one of `dkms`, `hipblaslt`, `config`, `rewrite`",
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
    if kind == Kind::Rewrite {
        if t.formats.is_none() {
            formats = vec![Format::Deb];
        } else if formats != [Format::Deb] {
            let at = t.formats.as_ref().map_or(table_at, |f| f.span().start);
            c.err(
                at,
                "`target.formats`: a rewrite recipe builds the `deb` that takes the place of its source package: `formats = [\"deb\"]`",
            );
        }
    }
    if kind == Kind::Config && formats.contains(&Format::Tar) {
        let at = t.formats.as_ref().map_or(table_at, |f| f.span().start);
        c.err(
            at,
            "`target.formats`: a config recipe builds `deb`, `rpm` and `arch` packages; `tar` is for DKMS sources",
        );
    }
    let expert_sched = t.expert_sched.as_ref().and_then(|v| match v.get_ref().as_str() {
        "off" => Some(ExpertSched::Off),
        "on" => Some(ExpertSched::On),
        other => {
            c.err(
                v.span().start,
                format!("`target.expert_sched`: `{other}` is not `off` or `on` (the verdict the built gfx12 kernels must show)"),
            );
            None
        }
    });
    if kind == Kind::Rewrite && expert_sched != Some(ExpertSched::Off) {
        c.err(
            at(&t.expert_sched).unwrap_or(table_at),
            "a rewrite recipe needs `target.expert_sched = \"off\"`: the rewrite writes the gfx12 kernels' expert-scheduling switch off (the only rewrite there is)",
        );
    }
    if !matches!(kind, Kind::Hipblaslt | Kind::Rewrite) {
        c.reject(
            &[("expert_sched", at(&t.expert_sched))],
            &format!("{} recipe", kind.as_str()),
        );
    }
    Target {
        kind,
        kernel,
        kernel_regex,
        formats,
        expert_sched,
    }
}
