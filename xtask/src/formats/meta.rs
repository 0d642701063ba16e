//! Package metadata shared by every format, and its validation against
//! each format's grammar (Debian policy, rpm, makepkg) so that no writer
//! ever has to escape its way out of a bad value.

use super::Format;
use anyhow::{bail, Result};

/// The rules a format's package names and releases follow, as a test and
/// its words for a message.
#[derive(Debug)]
pub struct Grammar {
    pub(crate) name_rule: &'static str,
    pub(crate) name_ok: fn(&str) -> bool,
    pub(crate) release_rule: &'static str,
    pub(crate) release_ok: fn(&str) -> bool,
}

/// What a package is, in the words every format needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageMeta {
    /// Package name, e.g. `amdgpu-patchkit-dkms`.
    pub name: String,
    /// Debian source package name when it is not `name` (`amdgpu-patchkit`
    /// for `amdgpu-patchkit-dkms`): the control file's `Source:`, the
    /// changelog's heading and the copyright's `Upstream-Name`.
    pub source: Option<String>,
    /// Its version and description, as the recipe's `[package]` gives them.
    pub about: About,
    /// Names of packages this one needs (`dkms`), without versions.
    pub depends: Vec<String>,
    /// Changes of this version, one line each (changelog entries).
    pub changes: Vec<String>,
    /// Copyright holders, one per line (`2025 The rocm-patchkit authors`).
    pub copyright: Vec<String>,
    /// What this package stands in for and what it cannot live beside.
    pub relations: Relations,
}

/// What a package says of itself beside its name: the recipe's
/// `[package]` keys, and the part of [`PackageMeta`] every format writes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct About {
    /// Upstream version, e.g. `6.12.64` (no `-`, no epoch).
    pub version: String,
    /// Packaging revision: Debian revision, rpm release, Arch pkgrel
    /// (digits, so `1` fits all three).
    pub release: String,
    /// One line, at most 80 characters.
    pub summary: String,
    /// Free text; paragraphs separated by blank lines.
    pub description: String,
    /// SPDX identifier (`GPL-2.0-only`).
    pub license: String,
    /// `https://...`, when the recipe names one.
    pub homepage: Option<String>,
    /// `Name <address>`
    pub maintainer: String,
}

/// Package relations beyond `depends`, names without versions: each format
/// writes them in its own terms (deb `Provides`/`Conflicts`/`Replaces`,
/// rpm `Provides`/`Conflicts`, Arch `provides`/`conflicts`/`replaces`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relations {
    /// Virtual names this package provides.
    pub provides: Vec<String>,
    /// Packages (real or virtual) that must not be installed beside it.
    pub conflicts: Vec<String>,
    /// Packages whose files this one may take over (deb `Replaces`; rpm and
    /// Arch leave it to the conflict).
    pub replaces: Vec<String>,
}

/// The virtual package every amdgpu DKMS package of ours provides and
/// conflicts with, so that one series at a time is installed.
pub(crate) const AMDGPU_VIRTUAL: &str = "amdgpu-patchkit-dkms";
/// AMD's own DKMS package of amdgpu, which installs the same module to the
/// same place.
pub(crate) const AMD_AMDGPU_DKMS: &str = "amdgpu-dkms";

impl Relations {
    /// The relations of a DKMS package that builds these modules: one that
    /// builds amdgpu excludes AMD's amdgpu-dkms and every other of ours.
    pub fn for_dkms_modules<'a>(modules: impl IntoIterator<Item = &'a str>) -> Relations {
        if !modules.into_iter().any(|m| m == "amdgpu") {
            return Relations::default();
        }
        Relations {
            provides: vec![AMDGPU_VIRTUAL.to_owned()],
            conflicts: vec![AMD_AMDGPU_DKMS.to_owned(), AMDGPU_VIRTUAL.to_owned()],
            replaces: vec![AMDGPU_VIRTUAL.to_owned()],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.provides.is_empty() && self.conflicts.is_empty() && self.replaces.is_empty()
    }
}

/// What a package's files run on, in each format's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Architecture {
    /// Architecture-independent files (sources, scripts): `all`, `noarch`, `any`.
    #[default]
    Any,
    /// Compiled for the machine this runs on: `amd64`/`x86_64`, `arm64`/`aarch64`.
    Host,
}

impl Architecture {
    /// Debian's name: `all`, `amd64`, `arm64`, ...
    pub(crate) fn deb(self) -> &'static str {
        match (self, std::env::consts::ARCH) {
            (Architecture::Any, _) => "all",
            (Architecture::Host, "x86_64") => "amd64",
            (Architecture::Host, "aarch64") => "arm64",
            (Architecture::Host, "powerpc64") => "ppc64el",
            (Architecture::Host, other) => other,
        }
    }

    /// rpm's and Arch's name: `noarch`/`any`, else the kernel's (`x86_64`).
    pub(crate) fn rpm(self) -> &'static str {
        match self {
            Architecture::Any => "noarch",
            Architecture::Host => std::env::consts::ARCH,
        }
    }

    pub(crate) fn arch(self) -> &'static str {
        match self {
            Architecture::Any => "any",
            Architecture::Host => std::env::consts::ARCH,
        }
    }

    /// Debian section and rpm group: kernel sources for architecture-free
    /// (DKMS) packages, libraries for compiled ones.
    pub(crate) fn section(self) -> (&'static str, &'static str) {
        match self {
            Architecture::Any => ("kernel", "System Environment/Kernel"),
            Architecture::Host => ("libs", "System Environment/Libraries"),
        }
    }
}

impl PackageMeta {
    /// Every problem with this metadata for `format`, all at once.
    pub(crate) fn validate(&self, format: Format) -> Result<()> {
        let fmt = format.label();
        let mut problems = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                problems.push(what);
            }
        };
        self.name_problems(format, &mut check);
        self.version_problems(format, &mut check);
        self.text_problems(&mut check);
        self.record_problems(&mut check);
        if problems.is_empty() {
            Ok(())
        } else {
            bail!(
                "invalid {fmt} package metadata:\n  - {}",
                problems.join("\n  - ")
            )
        }
    }

    /// The package's, its source's and its relations' names.
    fn name_problems(&self, format: Format, check: &mut dyn FnMut(bool, String)) {
        let fmt = format.label();
        check(
            (format.grammar().name_ok)(&self.name),
            format!(
                "package name {:?} breaks the {fmt} rules ({})",
                self.name,
                format.grammar().name_rule
            ),
        );
        if let Some(source) = &self.source {
            check(
                (format.grammar().name_ok)(source),
                format!(
                    "source package name {source:?} breaks the {fmt} rules ({})",
                    format.grammar().name_rule
                ),
            );
        }
        let relations = self
            .relations
            .provides
            .iter()
            .chain(&self.relations.conflicts)
            .chain(&self.relations.replaces);
        for dep in self.depends.iter().chain(relations) {
            check(
                (format.grammar().name_ok)(dep),
                format!(
                    "dependency {dep:?} breaks the {fmt} package-name rules ({})",
                    format.grammar().name_rule
                ),
            );
        }
    }

    /// The version and the release.
    fn version_problems(&self, format: Format, check: &mut dyn FnMut(bool, String)) {
        let fmt = format.label();
        check(
            version_ok(&self.about.version),
            format!(
                "version {:?} must start with a digit and hold only letters, digits and `.+~` (no `-` or `:`)",
                self.about.version
            ),
        );
        check(
            (format.grammar().release_ok)(&self.about.release),
            format!(
                "release {:?} breaks the {fmt} rules ({})",
                self.about.release,
                format.grammar().release_rule
            ),
        );
    }

    /// The summary, description, license, homepage and maintainer.
    fn text_problems(&self, check: &mut dyn FnMut(bool, String)) {
        check(
            one_line(&self.about.summary)
                && !self.about.summary.trim().is_empty()
                && self.about.summary.chars().count() <= 80,
            format!(
                "summary {:?} must be one non-empty line of at most 80 characters",
                self.about.summary
            ),
        );
        check(
            !self.about.description.trim().is_empty() && !has_control(&self.about.description),
            "description must be non-empty text without control characters other than newlines"
                .into(),
        );
        check(
            one_line(&self.about.license)
                && !self.about.license.trim().is_empty()
                && !self.about.license.contains(['<', '>']),
            format!(
                "license {:?} must be one SPDX expression on one line",
                self.about.license
            ),
        );
        if let Some(homepage) = &self.about.homepage {
            check(
                one_line(homepage)
                    && (homepage.starts_with("https://") || homepage.starts_with("http://"))
                    && !homepage.contains(char::is_whitespace),
                format!("homepage {homepage:?} must be an http(s) URL without spaces"),
            );
        }
        check(
            maintainer_ok(&self.about.maintainer),
            format!(
                "maintainer {:?} must read `Name <address@host>`",
                self.about.maintainer
            ),
        );
    }

    /// The changelog and copyright lines.
    fn record_problems(&self, check: &mut dyn FnMut(bool, String)) {
        for line in self.changes.iter().chain(&self.copyright) {
            check(
                one_line(line) && !line.trim().is_empty(),
                format!(
                    "changelog and copyright lines must be single non-empty lines, got {line:?}"
                ),
            );
        }
        check(
            !self.changes.is_empty(),
            "changes needs at least one line for the changelog".into(),
        );
        check(
            !self.copyright.is_empty(),
            "copyright needs at least one holder".into(),
        );
    }

    /// `version-release`, the full version of deb and Arch packages.
    pub(crate) fn full_version(&self) -> String {
        format!("{}-{}", self.about.version, self.about.release)
    }
}

fn one_line(s: &str) -> bool {
    !s.contains(['\n', '\r']) && !has_control(s)
}

fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && c != '\n')
}

fn version_ok(v: &str) -> bool {
    v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~".contains(c))
}

fn maintainer_ok(m: &str) -> bool {
    let Some((name, rest)) = m.split_once('<') else {
        return false;
    };
    let Some(addr) = rest.strip_suffix('>') else {
        return false;
    };
    let Some((local, host)) = addr.split_once('@') else {
        return false;
    };
    one_line(m)
        && !name.trim().is_empty()
        && name.ends_with(' ')
        && !local.is_empty()
        && host.contains('.')
        && !addr.contains(|c: char| c.is_whitespace() || "<>,\"'".contains(c))
}

#[cfg(test)]
/// `'text'` with embedded single quotes closed and escaped: safe as one
/// word in any POSIX shell.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> PackageMeta {
        PackageMeta {
            name: "patchkit-hello-dkms".into(),
            source: None,
            about: About {
                version: "0.1.0".into(),
                release: "1".into(),
                summary: "hello module for patchkit tests (DKMS source)".into(),
                description: "A tiny module.\n\nIt says `hello` and $(nothing) else.".into(),
                license: "GPL-2.0-only".into(),
                homepage: Some("https://example.org/patchkit".into()),
                maintainer: "Patchkit Maintainers <patchkit@example.org>".into(),
            },
            depends: vec!["dkms".into()],
            changes: vec!["Initial package.".into()],
            copyright: vec!["2025 The rocm-patchkit authors".into()],
            relations: Relations::default(),
        }
    }

    #[test]
    fn sample_is_valid_everywhere() {
        for f in Format::ALL.iter().copied() {
            sample().validate(f).unwrap();
        }
    }

    #[test]
    fn reports_every_problem() {
        let mut m = sample();
        m.name = "Bad_Name".into();
        m.about.version = "1.0-2".into();
        m.about.release = "1a".into();
        m.about.summary = "two\nlines".into();
        let err = m.validate(Format::Arch).unwrap_err().to_string();
        for needle in ["package name", "version", "release", "summary"] {
            assert!(err.contains(needle), "{needle} missing from {err}");
        }
        assert!(m.validate(Format::Deb).is_err());
    }

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote("a'b $(x)"), r"'a'\''b $(x)'");
    }
}
