//! Turns a [`RawRecipe`] into a [`Recipe`], checking presence, grammar and
//! the patch folder, and collecting every problem with its location. The
//! `[source]` table is checked in `source.rs`, the series in `series.rs`,
//! `[config]` in `config.rs`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::checker::{at, pinned_from, strings, Checker};
use super::grammar::{
    check_description, check_dest, check_http_url, check_make, check_module_name, check_one_line,
    check_package_name, check_recipe_path, check_release, check_shell_path, check_summary,
    check_version,
};
use super::raw::{self, RawRecipe};
use super::{ExpertSched, Kind, KindName, PackageInfo, Recipe, Source, Target};
use crate::formats::{Compression, Format};
use crate::input::kernel::KernelRange;
use crate::shared::diag::InvalidInput;

pub(crate) fn validate(path: &Path, root: &Path, text: &str) -> Result<Recipe> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let mut c = Checker::new(path, text);
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
        Some(s) => super::source::source(c, s.get_ref(), s.span().start, root),
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
            Targeted::fallback()
        }
    };
    let patches = super::series::patches(c, &raw.patch, &root.join("patches").join(name));
    let kind = kind(c, &raw, &target);
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
    if target.name.replaces_its_source() {
        rewrite_source(c, &raw, &package, &source);
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
        kind,
        target: target.target,
    }
}

/// The kind with its table: `[dkms]` and `[config]` where the kind takes
/// them (and refused where it does not), `target.expert_sched`.
fn kind(c: &mut Checker, raw: &RawRecipe, target: &Targeted) -> Kind {
    let table = Kind::table(target.name);
    let dkms = match (&raw.dkms, table) {
        (Some(d), Some("dkms")) => Some(dkms(c, d.get_ref(), d.span().start)),
        (Some(d), _) => {
            c.err(
                d.span().start,
                "`[dkms]` applies to `kind = \"dkms\"` recipes only; remove it",
            );
            None
        }
        (None, _) => None,
    };
    let config = match (&raw.config, table) {
        (Some(t), Some("config")) => Some(super::config::config(c, t.get_ref(), t.span().start)),
        (Some(t), _) => {
            c.err(
                t.span().start,
                "`[config]` applies to `kind = \"config\"` recipes only; remove it",
            );
            None
        }
        (None, Some("config")) => {
            c.err(
                raw.target.as_ref().map_or(0, |t| t.span().start),
                "a config recipe needs a `[config]` table with `files = [{ source = \"x.conf\", dest = \"/etc/modprobe.d/x.conf\" }]`",
            );
            None
        }
        (None, _) => None,
    };
    // A recipe with problems is refused whole: its kind is never used.
    Kind::of(target.name, dkms, config, target.expert_sched)
}

/// A rewrite recipe takes the place of a binary package: its source is
/// one, and its package's name and version are that package's.
fn rewrite_source(c: &mut Checker, raw: &RawRecipe, package: &PackageInfo, source: &Source) {
    if let (Source::Deb(deb), Some(p)) = (source, &raw.package) {
        let upstream = deb
            .version
            .rsplit_once('-')
            .map_or(deb.version.as_str(), |(v, _)| v);
        if package.name != deb.package {
            c.err(p.span().start, format!("`package.name` of a rewrite recipe is the name of the package it takes the place of: `{}`", deb.package));
        }
        if package.about.version != upstream.split_once(':').map_or(upstream, |(_, v)| v) {
            c.err(p.span().start, format!("`package.version` of a rewrite recipe is the upstream version of its source: `{upstream}` (the build's version is `{}+patchkit<release>`)", deb.version));
        }
    }
    if !matches!(source, Source::Deb(_)) {
        c.err(raw.source.as_ref().map_or(0, |s| s.span().start), "a rewrite recipe's source is a binary package: `[source] deb = \"name\"` with `version`, `arch` and `sha256`");
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
        compression: None,
    }
}

fn package(c: &mut Checker, p: &raw::RawPackage, table_at: usize) -> PackageInfo {
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
    PackageInfo {
        name,
        about: crate::formats::About {
            version,
            release,
            summary,
            description,
            license,
            homepage,
            maintainer,
        },
        compression,
    }
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

/// What `[target]` says: the table, the kind's name (dkms when it names
/// none it knows, after reporting so) and its `expert_sched`.
struct Targeted {
    target: Target,
    name: KindName,
    expert_sched: Option<ExpertSched>,
}

impl Targeted {
    fn fallback() -> Targeted {
        Targeted {
            target: Target {
                kernel: None,
                kernel_regex: None,
                formats: Vec::new(),
            },
            name: KindName::Dkms,
            expert_sched: None,
        }
    }
}

fn target(c: &mut Checker, t: &raw::RawTarget, table_at: usize) -> Targeted {
    let kind = kind_name(c, t, table_at);
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
    if kind.needs_kernel() && t.kernel.is_none() && t.kernel_regex.is_none() {
        c.err(table_at, "a dkms recipe needs `target.kernel` (e.g. `>=6.11, <6.12.64`) or `target.kernel_regex`");
    }
    if !kind.needs_kernel() {
        c.reject(
            &[
                ("kernel", at(&t.kernel)),
                ("kernel_regex", at(&t.kernel_regex)),
            ],
            &format!("{} recipe", kind.as_str()),
        );
    }
    let formats = formats(c, t, kind);
    let expert_sched = expert_sched(c, t, kind, table_at);
    Targeted {
        target: Target {
            kernel,
            kernel_regex,
            formats,
        },
        name: kind,
        expert_sched,
    }
}

/// `target.kind`; dkms when it names no kind, after reporting so.
fn kind_name(c: &mut Checker, t: &raw::RawTarget, table_at: usize) -> KindName {
    let Some(k) = &t.kind else {
        c.err(
            table_at,
            format!("missing key `target.kind` (one of {})", known_kinds()),
        );
        return KindName::Dkms;
    };
    match KindName::ALL.iter().find(|(s, _)| s == k.get_ref()) {
        Some((_, kind)) => *kind,
        None => {
            c.err(
                k.span().start,
                format!(
                    "`target.kind`: `{}` is not one of {}",
                    k.get_ref(),
                    known_kinds()
                ),
            );
            KindName::Dkms
        }
    }
}

/// The kinds' words, quoted, for an error that lists them.
fn known_kinds() -> String {
    let known: Vec<_> = KindName::ALL
        .iter()
        .map(|(s, _)| format!("`{s}`"))
        .collect();
    known.join(", ")
}

/// `target.formats`, each known and listed once; the kind's own when
/// absent; refused when the kind cannot make them.
fn formats(c: &mut Checker, t: &raw::RawTarget, kind: KindName) -> Vec<Format> {
    let mut formats = Vec::new();
    for f in strings(&t.formats) {
        match Format::from_name(f.get_ref()) {
            Some(format) if formats.contains(&format) => c.err(
                f.span().start,
                format!("`target.formats`: `{}` is listed twice", f.get_ref()),
            ),
            Some(format) => formats.push(format),
            None => {
                let known: Vec<_> = Format::ALL
                    .iter()
                    .map(|f| format!("`{}`", f.as_str()))
                    .collect();
                c.err(
                    f.span().start,
                    format!(
                        "`target.formats`: `{}` is not one of {}",
                        f.get_ref(),
                        known.join(", ")
                    ),
                )
            }
        }
    }
    let Some(given) = &t.formats else {
        return kind.default_formats();
    };
    if !kind.accepts(&formats) {
        c.err(given.span().start, kind.formats_refused());
    }
    formats
}

/// `target.expert_sched`: `off` or `on`, of a hipblaslt recipe, and `off`
/// (required) of a rewrite recipe.
fn expert_sched(
    c: &mut Checker,
    t: &raw::RawTarget,
    kind: KindName,
    table_at: usize,
) -> Option<ExpertSched> {
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
    let (required, allowed) = kind.expert_sched_rule();
    if required.is_some() && expert_sched != required {
        c.err(
            at(&t.expert_sched).unwrap_or(table_at),
            "a rewrite recipe needs `target.expert_sched = \"off\"`: the rewrite writes the gfx12 kernels' expert-scheduling switch off (the only rewrite there is)",
        );
    }
    if !allowed {
        c.reject(
            &[("expert_sched", at(&t.expert_sched))],
            &format!("{} recipe", kind.as_str()),
        );
    }
    expert_sched
}
