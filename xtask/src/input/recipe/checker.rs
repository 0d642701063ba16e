//! The checker every part of recipe validation reports through: each
//! problem with its `path:line:col`, keys refused once, the shared checks
//! of required, optional and rejected keys.

use std::path::Path;

use toml::Spanned;

use super::raw::{Str, StrList};
use crate::shared::diag::Diag;

pub(super) struct Checker<'a> {
    pub(super) file: &'a Path,
    pub(super) text: &'a str,
    pub(super) diags: Vec<Diag>,
    /// Keys already reported as unknown or mistyped: not reported missing too.
    pub(super) refused: Vec<String>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(file: &'a Path, text: &'a str) -> Checker<'a> {
        Checker {
            file,
            text,
            diags: Vec::new(),
            refused: Vec::new(),
        }
    }

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

pub(super) fn strings(list: &StrList) -> Vec<Spanned<String>> {
    list.as_ref()
        .map(|l| l.get_ref().clone())
        .unwrap_or_default()
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
