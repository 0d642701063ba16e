//! Render: fills the handlebars templates of `templates/` from validated
//! values. Strict mode (a missing value is an error, never an empty string),
//! no HTML escaping, and helpers that quote for the file's own grammar:
//! `sh` for anything a shell sources or runs, `rpm` for spec text, `deb_desc`
//! for a Debian extended description. Reads the templates; writes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use handlebars::{
    Handlebars, Helper, HelperDef, HelperResult, Output, RenderContext, RenderErrorReason,
};

/// The templates of one folder, registered by their path without `.hbs`
/// (`debian/control`, `dkms.conf`).
pub struct Renderer {
    registry: Handlebars<'static>,
    dir: PathBuf,
}

impl Renderer {
    pub fn new(dir: &Path) -> Result<Renderer> {
        let mut registry = Handlebars::new();
        registry.set_strict_mode(true);
        registry.register_escape_fn(handlebars::no_escape);
        for quote in [
            Quote {
                name: "sh",
                quote: sh_quote,
            },
            Quote {
                name: "rpm",
                quote: rpm_escape,
            },
            Quote {
                name: "deb_desc",
                quote: deb_description,
            },
        ] {
            registry.register_helper(quote.name, Box::new(quote));
        }
        for rel in template_files(dir)? {
            let path = dir.join(&rel);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading template {}", path.display()))?;
            let name = rel.trim_end_matches(".hbs").to_owned();
            registry
                .register_template_string(&name, text)
                .with_context(|| format!("template {} does not parse", path.display()))?;
        }
        Ok(Renderer {
            registry,
            dir: dir.to_path_buf(),
        })
    }

    /// Renders template `name` (e.g. `debian/control`) with `values`.
    pub fn render(&self, name: &str, values: &serde_json::Value) -> Result<String> {
        anyhow::ensure!(
            self.registry.has_template(name),
            "no template {}/{name}.hbs: restore it from git or fix the name",
            self.dir.display()
        );
        self.registry
            .render(name, values)
            .with_context(|| format!("rendering template {}/{name}.hbs", self.dir.display()))
    }

    /// The names of the templates below `prefix` (`debian/`), sorted.
    pub(crate) fn names_under(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .registry
            .get_templates()
            .keys()
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect();
        names.sort();
        names
    }
}

/// Every `*.hbs` below `dir`, as relative paths with `/`, sorted.
pub fn template_files(dir: &Path) -> Result<Vec<String>> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) -> Result<()> {
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("listing templates in {}", dir.display()))?;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if entry.file_type()?.is_dir() {
                walk(&entry.path(), &child, out)?;
            } else if name.ends_with(".hbs") {
                out.push(child);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out)?;
    out.sort();
    Ok(out)
}

/// A word for POSIX sh, always single-quoted: nothing inside single quotes
/// is expanded, so `$(...)`, backticks, `"` and newlines stay literal. Always
/// quoting also keeps dkms.conf in the form dh_dkms recognises as a
/// configuration (`PACKAGE_NAME='x'`; a bare word is taken for a file name).
pub(crate) fn sh_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}

/// Text for an RPM spec: `%` starts a macro, so it is doubled; and rpm reads
/// a line that begins with `%pre`, `%check`, `%pretrans` ... as a new section
/// *after* expanding `%%` to `%`, so a line whose first visible character is
/// `%` is indented by one space, which no section header can carry.
pub(crate) fn rpm_escape(value: &str) -> String {
    value
        .split('\n')
        .map(|line| {
            let escaped = line.replace('%', "%%");
            if line.trim_start().starts_with('%') && !line.starts_with([' ', '\t']) {
                format!(" {escaped}")
            } else {
                escaped
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A Debian extended description: every line indented by one space, empty
/// lines written as ` .` (Debian policy 5.6.13).
pub(crate) fn deb_description(value: &str) -> String {
    value
        .trim_end()
        .lines()
        .map(|line| {
            if line.trim().is_empty() {
                " .".to_owned()
            } else {
                format!(" {}", line.trim_end())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A helper that writes its one string argument through a quoting
/// function: `{{sh value}}`, `{{rpm value}}`, `{{deb_desc value}}`.
struct Quote {
    name: &'static str,
    quote: fn(&str) -> String,
}

impl HelperDef for Quote {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        _: &'rc handlebars::Context,
        _: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let value = h.param(0).and_then(|p| p.value().as_str()).ok_or_else(|| {
            RenderErrorReason::Other(format!("`{}` needs one string argument", self.name))
        })?;
        out.write(&(self.quote)(value))?;
        Ok(())
    }
}

/// Files rendered for one target, by their path in the output.
pub type Rendered = BTreeMap<String, String>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sh_quote_keeps_everything_literal() {
        assert_eq!(sh_quote("patchkit-hello"), "'patchkit-hello'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(
            sh_quote("it's $(rm -rf /) `x`"),
            "'it'\\''s $(rm -rf /) `x`'"
        );
    }

    #[test]
    fn deb_description_marks_blank_lines() {
        assert_eq!(deb_description("one\n\ntwo  \n"), " one\n .\n two");
    }

    #[test]
    fn rpm_escape_doubles_percent() {
        assert_eq!(rpm_escape("100% %{_bindir}"), "100%% %%{_bindir}");
        assert_eq!(
            rpm_escape("text\n%pre\n  %check\nend"),
            "text\n %%pre\n  %%check\nend"
        );
    }
}
