//! Debian control paragraphs (deb822: a `.deb`'s `control`, a `.dsc`,
//! `debian/control`), read field by field and written back unchanged: a
//! field keeps its value's exact text, continuation lines included.

use anyhow::{bail, Result};

/// One paragraph: its fields in order, each with the text after its colon
/// (the leading space and every continuation line kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Paragraph {
    fields: Vec<(String, String)>,
}

impl Paragraph {
    /// The value of `name` (case-insensitive), trimmed: the whole text of a
    /// multi-line field.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }

    /// The value of `name`, or an error naming the field and `what` holds it.
    pub(crate) fn need(&self, name: &str, what: &str) -> Result<&str> {
        match self.get(name) {
            Some(value) if !value.is_empty() => Ok(value),
            _ => bail!("{what} has no `{name}` field"),
        }
    }

    /// The lines of a multi-line field after its first (`Files:`,
    /// `Checksums-Sha256:`), trimmed, empty ones left out.
    pub(crate) fn lines_of(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| {
                v.lines()
                    .skip(1)
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Adds a field at the end (`value` is the text after `Name:`, without
    /// the space).
    pub(crate) fn push(&mut self, name: &str, value: &str) {
        self.fields.push((name.to_owned(), format!(" {value}")));
    }

    /// The paragraph with `extra` inserted before the field named `before`
    /// (at the end when it has none).
    pub(crate) fn with_before(&self, before: &str, extra: &Paragraph) -> Paragraph {
        let at = self
            .fields
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case(before))
            .unwrap_or(self.fields.len());
        let mut fields = self.fields[..at].to_vec();
        fields.extend(extra.fields.iter().cloned());
        fields.extend(self.fields[at..].iter().cloned());
        Paragraph { fields }
    }

    /// The paragraph as text, each field `Name:value`, newline-terminated.
    pub(crate) fn text(&self) -> String {
        self.fields
            .iter()
            .map(|(name, value)| format!("{name}:{value}\n"))
            .collect()
    }
}

/// Every paragraph of `text`; `what` names it in errors (`path:line`).
pub(crate) fn parse(text: &str, what: &str) -> Result<Vec<Paragraph>> {
    let mut paragraphs = Vec::new();
    let mut current = Paragraph::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            if !current.fields.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            let Some((_, value)) = current.fields.last_mut() else {
                bail!(
                    "{what}:{}: a continuation line with no field before it",
                    i + 1
                );
            };
            value.push('\n');
            value.push_str(line);
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            bail!("{what}:{}: not a `Field: value` line", i + 1);
        };
        if name.is_empty() || name.contains(char::is_whitespace) {
            bail!("{what}:{}: `{name}` is not a field name", i + 1);
        }
        current.fields.push((name.to_owned(), value.to_owned()));
    }
    if !current.fields.is_empty() {
        paragraphs.push(current);
    }
    Ok(paragraphs)
}

/// The one paragraph of `text` (a `.deb`'s `control`, a `.dsc`).
pub(crate) fn parse_one(text: &str, what: &str) -> Result<Paragraph> {
    let mut all = parse(text, what)?;
    match all.len() {
        1 => Ok(all.remove(0)),
        n => bail!("{what}: {n} paragraphs where one was expected"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTROL: &str =
        "Package: x\nVersion: 1.0-1\nDescription: one line\n more\n .\n end\nHomepage: https://h\n";

    #[test]
    fn fields_round_trip_and_insert_before_a_field() {
        let p = parse_one(CONTROL, "control").unwrap();
        assert_eq!(p.text(), CONTROL);
        assert_eq!(p.get("version"), Some("1.0-1"));
        assert_eq!(p.get("Description"), Some("one line\n more\n .\n end"));
        let mut extra = Paragraph::default();
        extra.push("Size", "3");
        let q = p.with_before("Description", &extra);
        assert!(q
            .text()
            .contains("Version: 1.0-1\nSize: 3\nDescription: one line\n"));
    }

    #[test]
    fn multi_line_fields_give_their_lines_and_bad_lines_their_number() {
        let p = parse_one("Files:\n a 1 x\n\n", "dsc").unwrap();
        assert_eq!(p.lines_of("files"), vec!["a 1 x"]);
        let err = parse("A: b\n c\nbroken\n", "f.dsc").unwrap_err();
        assert!(err.to_string().starts_with("f.dsc:3:"), "{err}");
    }
}
