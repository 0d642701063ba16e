//! The applied-patch state record (`.patchkit/state.json`) and the tree
//! manifest (`.patchkit/manifest`) written beside it: what was applied, with
//! which hashes, to which files. Deterministic: no timestamps, keys sorted
//! (struct fields are declared in alphabetical order), so two applies of the
//! same series give byte-identical records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The folder inside a tree that holds the record; never part of hash checks.
pub const DIR: &str = ".patchkit";
pub(crate) const STATE_FILE: &str = "state.json";
pub(crate) const MANIFEST_FILE: &str = "manifest";
/// Version of the record's layout.
pub(crate) const FORMAT: u32 = 2;

use crate::shared::hash::sha256_hex;

/// The applied-patch state of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Wire", into = "Wire")]
pub struct State {
    pub(crate) format: u32,
    /// sha256 of `.patchkit/manifest`, the listing of every file of the tree.
    pub(crate) manifest_sha256: String,
    /// What the transform that made the tree did.
    pub(crate) record: Record,
    pub(crate) recipe: RecipeRef,
    pub(crate) source: SourcePin,
    /// The fuzz the series was applied with (0 unless asked; exact context
    /// at any offset is the rule). Per-hunk placement is in the record.
    pub(crate) tolerance: ToleranceRecord,
    pub(crate) tool: ToolRef,
}

/// What a transform of the tree recorded: one variant per transform
/// (`line::transform::Transform`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// The recipe's patches, in series order, with where their hunks landed.
    Patches(Vec<PatchRecord>),
    /// Binary rewrites of the tree (a rewrite recipe's transform), each
    /// with the files it changed.
    Rewrites(Vec<RewriteRecord>),
}

impl State {
    /// The patches the record holds, in series order; none for a rewrite.
    pub fn patches(&self) -> &[PatchRecord] {
        match &self.record {
            Record::Patches(patches) => patches,
            Record::Rewrites(_) => &[],
        }
    }

    /// The binary rewrites the record holds; none for a patched tree.
    pub(crate) fn rewrites(&self) -> &[RewriteRecord] {
        match &self.record {
            Record::Patches(_) => &[],
            Record::Rewrites(rewrites) => rewrites,
        }
    }
}

/// `state.json` as written since format 2: each transform's record a key
/// of its own (`patches`, and `rewrites` only when there are any), so the
/// bytes a tree records stay those of every earlier build.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    format: u32,
    manifest_sha256: String,
    patches: Vec<PatchRecord>,
    recipe: RecipeRef,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rewrites: Vec<RewriteRecord>,
    source: SourcePin,
    tolerance: ToleranceRecord,
    tool: ToolRef,
}

impl TryFrom<Wire> for State {
    type Error = String;

    fn try_from(w: Wire) -> Result<State, String> {
        let record = match (w.patches.is_empty(), w.rewrites.is_empty()) {
            (_, true) => Record::Patches(w.patches),
            (true, false) => Record::Rewrites(w.rewrites),
            (false, false) => {
                return Err(
                    "the record holds both patches and rewrites, which no transform \
                     writes"
                        .to_owned(),
                )
            }
        };
        Ok(State {
            format: w.format,
            manifest_sha256: w.manifest_sha256,
            record,
            recipe: w.recipe,
            source: w.source,
            tolerance: w.tolerance,
            tool: w.tool,
        })
    }
}

impl From<State> for Wire {
    fn from(s: State) -> Wire {
        let (patches, rewrites) = match s.record {
            Record::Patches(patches) => (patches, Vec::new()),
            Record::Rewrites(rewrites) => (Vec::new(), rewrites),
        };
        Wire {
            format: s.format,
            manifest_sha256: s.manifest_sha256,
            patches,
            recipe: s.recipe,
            rewrites,
            source: s.source,
            tolerance: s.tolerance,
            tool: s.tool,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecipeRef {
    pub(crate) name: String,
    pub(crate) version: String,
}

/// Where the pristine tree came from and what pins it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourcePin {
    /// `archive`, `dir` or `git`.
    pub(crate) kind: String,
    /// The sha256 of the archive, the commit id, or nothing for a local folder.
    pub(crate) pin: Option<String>,
    /// The recipe's `include` globs or git `paths` that limited extraction.
    pub(crate) selected: Vec<String>,
    pub(crate) strip: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToleranceRecord {
    pub(crate) fuzz: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolRef {
    pub(crate) name: String,
    pub(crate) version: String,
}

impl ToolRef {
    pub(crate) fn current() -> ToolRef {
        ToolRef {
            name: "rocm-patchkit".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchRecord {
    /// Every file the patch created, changed, renamed or deleted.
    pub files: Vec<FileChange>,
    /// Hunks that did not land at their stated line: where they went, and
    /// with which fuzz.
    pub hunks: Vec<HunkRecord>,
    pub(crate) name: String,
    pub(crate) sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileChange {
    /// sha256 after the patch; `None` when the patch deleted the file.
    pub after: Option<String>,
    /// sha256 before the patch; `None` when the patch created the file.
    pub before: Option<String>,
    pub path: String,
}

/// One binary rewrite of the tree (`expert-sched-off`): every file it
/// changed, sorted by path. Files it read and left alone are not listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RewriteRecord {
    pub(crate) files: Vec<RewrittenFile>,
    pub(crate) transform: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RewrittenFile {
    /// sha256 of the file as rewritten.
    pub(crate) after: String,
    /// sha256 of the file as the source had it.
    pub(crate) before: String,
    pub(crate) path: String,
    /// How many sites were rewritten.
    pub(crate) sites: usize,
    pub(crate) size_after: u64,
    /// Where each rewritten value lies in the uncompressed file (bundle).
    pub(crate) value_offsets: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HunkRecord {
    pub(crate) file: String,
    pub fuzz: usize,
    /// 1-based hunk number within its file.
    pub hunk: usize,
    /// 1-based line of the file, before the patch, where the hunk landed.
    pub line: usize,
    pub offset: isize,
}

/// One entry of the manifest: git-style mode (`100644`, `100755`, `120000`),
/// sha256 (of the link target for a symlink) and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileId {
    pub mode: u32,
    pub(crate) sha256: String,
    pub size: u64,
}

/// Every file of a tree, by path relative to its root (`/`-separated).
pub type TreeListing = BTreeMap<String, FileId>;

/// `<mode> <sha256> <size> <path>` lines, sorted by path.
pub(crate) fn manifest_to_text(manifest: &TreeListing) -> String {
    let mut out = String::with_capacity(manifest.len() * 100);
    for (path, id) in manifest {
        out.push_str(&format!(
            "{:06o} {} {} {}\n",
            id.mode, id.sha256, id.size, path
        ));
    }
    out
}

pub(crate) fn manifest_from_text(text: &str) -> Result<TreeListing> {
    let mut manifest = TreeListing::new();
    for (n, line) in text.lines().enumerate() {
        let mut parts = line.splitn(4, ' ');
        let parsed = (|| {
            let mode = u32::from_str_radix(parts.next()?, 8).ok()?;
            let sha256 = parts.next()?.to_owned();
            let size = parts.next()?.parse().ok()?;
            let path = parts.next()?.to_owned();
            Some((path, FileId { mode, sha256, size }))
        })();
        let Some((path, id)) = parsed else {
            bail!("manifest line {} is malformed: `{line}`", n + 1);
        };
        manifest.insert(path, id);
    }
    Ok(manifest)
}

pub(crate) fn state_path(tree: &Path) -> PathBuf {
    tree.join(DIR).join(STATE_FILE)
}

/// Writes the record and the manifest into `tree/.patchkit/`.
pub(crate) fn write(tree: &Path, state: &State, manifest: &TreeListing) -> Result<()> {
    let dir = tree.join(DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let manifest_path = dir.join(MANIFEST_FILE);
    std::fs::write(&manifest_path, manifest_to_text(manifest))
        .with_context(|| format!("writing {}", manifest_path.display()))?;
    let mut json = serde_json::to_string_pretty(state).context("serialising the state record")?;
    json.push('\n');
    let path = dir.join(STATE_FILE);
    std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))
}

/// Reads the record and the manifest of `tree`, `None` when it has no record.
pub(crate) fn read(tree: &Path) -> Result<Option<(State, TreeListing)>> {
    let path = state_path(tree);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let state: State = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a state record this tool understands; re-create the tree with `cargo xtask apply`",
            path.display()
        )
    })?;
    if state.format != FORMAT {
        bail!(
            "{} has record format {} but this tool reads format {FORMAT}",
            path.display(),
            state.format
        );
    }
    let manifest_path = tree.join(DIR).join(MANIFEST_FILE);
    let bytes = std::fs::read(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    if sha256_hex(&bytes) != state.manifest_sha256 {
        bail!(
            "{} does not match the sha256 its state record gives; the record was edited",
            manifest_path.display()
        );
    }
    let manifest = manifest_from_text(&String::from_utf8_lossy(&bytes))
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    check_paths(&state, &manifest).with_context(|| {
        format!(
            "{} names a path outside the tree; the record was edited or damaged: re-create the \
             tree with `cargo xtask apply`",
            path.display()
        )
    })?;
    Ok(Some((state, manifest)))
}

/// Refuses a record whose paths could leave the tree or look where a check
/// of the tree never looks: absolute, with `..`, `.` or empty components,
/// inside `.patchkit/`, or below a path the manifest lists as a symlink.
fn check_paths(state: &State, manifest: &TreeListing) -> Result<()> {
    let check = |p: &str, whose: &str| -> Result<()> {
        let shown = p.escape_debug();
        if p.starts_with('/') {
            bail!("{whose} `{shown}` is an absolute path");
        }
        let parts: Vec<&str> = p.split('/').collect();
        if parts.iter().any(|c| matches!(*c, "" | "." | "..")) {
            bail!("{whose} `{shown}` has an empty, `.` or `..` component");
        }
        if parts[0] == DIR {
            bail!("{whose} `{shown}` is inside {DIR}/, which no check of the tree reads");
        }
        for end in 1..parts.len() {
            let above = parts[..end].join("/");
            if manifest.get(&above).is_some_and(|id| id.mode == 0o120000) {
                bail!(
                    "{whose} `{shown}` is below `{}`, which is a symlink",
                    above.escape_debug()
                );
            }
        }
        Ok(())
    };
    for p in manifest.keys() {
        check(p, "the manifest's path")?;
    }
    for patch in state.patches() {
        let whose = format!("patch {}'s path", patch.name.escape_debug());
        for f in &patch.files {
            check(&f.path, &whose)?;
        }
        for h in &patch.hunks {
            check(&h.file, &whose)?;
        }
    }
    for rewrite in state.rewrites() {
        let whose = format!("rewrite {}'s path", rewrite.transform.escape_debug());
        for f in &rewrite.files {
            check(&f.path, &whose)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_paths_with_spaces() {
        let mut m = TreeListing::new();
        m.insert(
            "a dir/b c.h".into(),
            FileId {
                mode: 0o100644,
                sha256: "ab".repeat(32),
                size: 3,
            },
        );
        assert_eq!(manifest_from_text(&manifest_to_text(&m)).unwrap(), m);
    }

    #[test]
    fn record_paths_that_leave_the_tree_are_refused() {
        let id = |mode| FileId {
            mode,
            sha256: "ab".repeat(32),
            size: 3,
        };
        let mut m = TreeListing::new();
        m.insert("drivers/x.c".into(), id(0o100644));
        m.insert("link".into(), id(0o120000));
        let mut state = State {
            format: FORMAT,
            manifest_sha256: String::new(),
            record: Record::Patches(vec![PatchRecord {
                files: Vec::new(),
                hunks: Vec::new(),
                name: "0001.patch".into(),
                sha256: "cd".repeat(32),
            }]),
            recipe: RecipeRef {
                name: "r".into(),
                version: "1".into(),
            },
            source: SourcePin {
                kind: "dir".into(),
                pin: None,
                selected: Vec::new(),
                strip: 0,
            },
            tolerance: ToleranceRecord { fuzz: 0 },
            tool: ToolRef::current(),
        };
        let with = |state: &mut State, path: &str| {
            let Record::Patches(patches) = &mut state.record else {
                unreachable!("the record is built with patches")
            };
            patches[0].files = vec![FileChange {
                after: Some("ef".repeat(32)),
                before: None,
                path: path.into(),
            }];
        };
        with(&mut state, "drivers/x.c");
        check_paths(&state, &m).unwrap();
        for evil in [
            "/etc/passwd",
            "../outside.c",
            "drivers/../../x.c",
            "./x.c",
            "a//b",
            ".patchkit/state.json",
            "link/x.c",
        ] {
            with(&mut state, evil);
            assert!(check_paths(&state, &m).is_err(), "{evil}");
        }
        with(&mut state, "drivers/x.c");
        m.insert("../up".into(), id(0o100644));
        assert!(check_paths(&state, &m).is_err());
    }

    /// A record as builds before the record enum wrote it reads into its
    /// transform's variant and is written back byte for byte.
    #[test]
    fn an_earlier_record_reads_and_writes_back_the_same_bytes() {
        let record = |middle: &str| {
            format!(
                "{{\n  \"format\": 2,\n  \"manifest_sha256\": \"{}\",\n{middle}  \"source\": {{\n    \"kind\": \"archive\",\n    \"pin\": \"{}\",\n    \"selected\": [],\n    \"strip\": 0\n  }},\n  \"tolerance\": {{\n    \"fuzz\": 0\n  }},\n  \"tool\": {{\n    \"name\": \"rocm-patchkit\",\n    \"version\": \"0.1.0\"\n  }}\n}}",
                "ab".repeat(32),
                "cd".repeat(32)
            )
        };
        let recipe = "  \"recipe\": {\n    \"name\": \"r\",\n    \"version\": \"1\"\n  },\n";
        let rewrites = "  \"rewrites\": [\n    {\n      \"files\": [],\n      \"transform\": \"expert-sched-off\"\n    }\n  ],\n";
        let patch = "    {\n      \"files\": [],\n      \"hunks\": [],\n      \"name\": \"0001.patch\",\n      \"sha256\": \"ef\"\n    }\n";
        let rewritten = record(&format!("  \"patches\": [],\n{recipe}{rewrites}"));
        let patched = record(&format!("  \"patches\": [\n{patch}  ],\n{recipe}"));
        for (text, rewrite) in [(&rewritten, true), (&patched, false)] {
            let state: State = serde_json::from_str(text).unwrap();
            assert_eq!(
                matches!(state.record, Record::Rewrites(_)),
                rewrite,
                "{text}"
            );
            assert_eq!(state.patches().len() + state.rewrites().len(), 1);
            assert_eq!(&serde_json::to_string_pretty(&state).unwrap(), text);
        }
        let both = record(&format!(
            "  \"patches\": [\n{patch}  ],\n{recipe}{rewrites}"
        ));
        let err = serde_json::from_str::<State>(&both)
            .unwrap_err()
            .to_string();
        assert!(err.contains("both patches and rewrites"), "{err}");
    }
}
