//! The recipe file as serde sees it: every key optional and spanned, unknown
//! keys rejected. Presence and meaning are checked by `validate`, so that
//! one run reports every problem with its place.

use serde::Deserialize;
use toml::Spanned;

pub(crate) type Str = Option<Spanned<String>>;
pub(crate) type StrList = Option<Spanned<Vec<Spanned<String>>>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRecipe {
    pub(crate) package: Option<Spanned<RawPackage>>,
    pub(crate) source: Option<Spanned<RawSource>>,
    #[serde(default)]
    pub(crate) patch: Vec<Spanned<RawPatch>>,
    pub(crate) target: Option<Spanned<RawTarget>>,
    pub(crate) dkms: Option<Spanned<RawDkms>>,
    pub(crate) config: Option<Spanned<RawConfig>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPackage {
    pub(crate) name: Str,
    pub(crate) version: Str,
    pub(crate) release: Str,
    pub(crate) summary: Str,
    pub(crate) description: Str,
    pub(crate) license: Str,
    pub(crate) homepage: Str,
    pub(crate) maintainer: Str,
    pub(crate) compression: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSource {
    pub(crate) git: Str,
    pub(crate) tarball: Str,
    pub(crate) local: Str,
    pub(crate) commit: Str,
    #[serde(rename = "ref")]
    pub(crate) reference: Str,
    pub(crate) paths: StrList,
    pub(crate) sha256: Str,
    pub(crate) strip: Option<Spanned<i64>>,
    pub(crate) include: StrList,
    /// The public records the pin was checked against (named in messages
    /// when the pin does not match).
    pub(crate) pinned_from: StrList,
    /// Why a shipped recipe's source carries no pin (shown by `list`).
    pub(crate) why_unpinned: Str,
    /// A binary package by name (`deb = "libhipblaslt1"`), with `version`,
    /// `arch`, `sha256`, and optionally `url` or `local` where apt is not.
    pub(crate) deb: Str,
    pub(crate) version: Str,
    pub(crate) arch: Str,
    pub(crate) url: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPatch {
    pub(crate) file: Str,
    pub(crate) name: Str,
    pub(crate) url: Str,
    pub(crate) git: Str,
    pub(crate) commit: Str,
    pub(crate) sha256: Str,
    pub(crate) fuzz: Option<Spanned<i64>>,
    /// Leading path components to drop from every path of the patch (after
    /// `a/` / `b/`), as `patch -p` counts them beyond the first.
    pub(crate) strip: Option<Spanned<i64>>,
    /// The folder of the tree the patch applies under (`git am --directory`).
    pub(crate) directory: Str,
    /// sha256 of the normalised diff (file headers and hunks only).
    pub(crate) diff_sha256: Str,
    /// Tree path -> git blob id of the file the patch must leave.
    pub(crate) produces: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    /// Patch URLs of a git patch's commit, tried before git.
    pub(crate) urls: StrList,
    /// The public records the pins were checked against.
    pub(crate) pinned_from: StrList,
    /// Why the patch carries no pin (shown by `list`).
    pub(crate) why_unpinned: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTarget {
    pub(crate) kind: Str,
    pub(crate) kernel: Str,
    pub(crate) kernel_regex: Str,
    pub(crate) formats: StrList,
    /// hipblaslt: the gfx12 expert-scheduling verdict the built kernels must show.
    pub(crate) expert_sched: Str,
}

/// A key serde refused (unknown, or of the wrong type), blanked before the
/// next try.
pub(crate) struct Problem {
    pub(crate) offset: usize,
    pub(crate) message: String,
    pub(crate) key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDkms {
    pub(crate) tree: Str,
    pub(crate) make: Str,
    pub(crate) clean: Str,
    #[serde(default)]
    pub(crate) module: Vec<Spanned<RawModule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModule {
    pub(crate) name: Str,
    pub(crate) location: Str,
    pub(crate) dest: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub(crate) files: Vec<Spanned<RawConfigFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfigFile {
    pub(crate) source: Str,
    pub(crate) dest: Str,
}

/// Deserializes `text`, collecting every unknown key and wrongly typed value.
///
/// serde stops at the first error; each time it does, the offending entry
/// is blanked out with spaces (so every byte offset stays valid for the
/// original text) and deserialization runs again.
pub(crate) fn deserialize_all(text: &str) -> (Option<RawRecipe>, Vec<Problem>) {
    let mut text = text.to_owned();
    let mut problems = Vec::new();
    for _ in 0..256 {
        let err = match toml::from_str::<RawRecipe>(&text) {
            Ok(raw) => return (Some(raw), problems),
            Err(err) => err,
        };
        let span = err.span().unwrap_or(0..0);
        let message = err.message().trim().to_owned();
        match toml_edit::Document::parse(text.as_str())
            .ok()
            .and_then(|doc| find_entry(&doc, &span))
        {
            Some(entry) => {
                problems.push(Problem {
                    offset: span.start,
                    message: format!("`{}`: {message}", entry.path),
                    key: Some(entry.path),
                });
                for range in entry.ranges {
                    blank(&mut text, range);
                }
            }
            None => {
                problems.push(Problem {
                    offset: span.start,
                    message,
                    key: None,
                });
                return (None, problems);
            }
        }
    }
    (None, problems)
}

fn blank(text: &mut String, range: std::ops::Range<usize>) {
    let blanked: String = text[range.clone()]
        .chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect();
    text.replace_range(range, &blanked);
}

struct Entry {
    path: String,
    ranges: Vec<std::ops::Range<usize>>,
}

/// The innermost `key = value` entry (or table) that holds `span`.
fn find_entry(doc: &toml_edit::Document<&str>, span: &std::ops::Range<usize>) -> Option<Entry> {
    find_in_table(doc.as_table(), "", span)
}

fn find_in_table(
    table: &toml_edit::Table,
    prefix: &str,
    span: &std::ops::Range<usize>,
) -> Option<Entry> {
    let contains =
        |r: &std::ops::Range<usize>| r.start <= span.start && span.end <= r.end.max(r.start + 1);
    for (key, item) in table.iter() {
        let path = if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        };
        let key_span = table.key(key).and_then(|k| k.span());
        match item {
            toml_edit::Item::Table(sub) => {
                if let Some(found) = find_in_table(sub, &path, span) {
                    return Some(found);
                }
                let header = sub.span();
                if key_span.as_ref().is_some_and(contains) || header.as_ref().is_some_and(contains)
                {
                    return Some(Entry {
                        ranges: table_ranges(sub),
                        path,
                    });
                }
            }
            toml_edit::Item::ArrayOfTables(array) => {
                for (i, sub) in array.iter().enumerate() {
                    let element = format!("{path}[{i}]");
                    if let Some(found) = find_in_table(sub, &element, span) {
                        return Some(found);
                    }
                    if sub.span().as_ref().is_some_and(contains) {
                        return Some(Entry {
                            ranges: table_ranges(sub),
                            path: element,
                        });
                    }
                }
            }
            toml_edit::Item::Value(value) => {
                let whole = match (key_span.clone(), value.span()) {
                    (Some(k), Some(v)) => k.start..v.end,
                    _ => continue,
                };
                if contains(&whole) {
                    return Some(Entry {
                        ranges: vec![whole],
                        path,
                    });
                }
            }
            toml_edit::Item::None => {}
        }
    }
    None
}

/// Byte ranges covering a `[table]` section: its header and every entry.
fn table_ranges(table: &toml_edit::Table) -> Vec<std::ops::Range<usize>> {
    let mut ranges: Vec<_> = table.span().into_iter().collect();
    for (key, item) in table.iter() {
        let key_span = table.key(key).and_then(|k| k.span());
        match item {
            toml_edit::Item::Value(value) => {
                if let (Some(k), Some(v)) = (key_span, value.span()) {
                    ranges.push(k.start..v.end);
                }
            }
            toml_edit::Item::Table(sub) => ranges.extend(table_ranges(sub)),
            toml_edit::Item::ArrayOfTables(array) => {
                array.iter().for_each(|t| ranges.extend(table_ranges(t)))
            }
            toml_edit::Item::None => {}
        }
    }
    ranges
}
