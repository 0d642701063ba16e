//! Recipes: `recipes/<name>.toml` parsed and validated into a typed
//! [`Recipe`]. Every problem is reported at once as `path:line:col: message`;
//! nothing here touches the network or writes a file.

mod checker;
mod config;
mod grammar;
mod kind;
mod raw;
mod series;
mod source;
mod validate;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

pub use kind::{Config, ConfigFile, Dkms, ExpertSched, Kind, KindName, Module};

/// A validated recipe.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// The file stem, which names the recipe and its `patches/<name>/` folder.
    pub name: String,
    /// The recipe file.
    pub path: PathBuf,
    /// The project root: the folder that holds `recipes/` and `patches/`.
    pub(crate) root: PathBuf,
    pub package: PackageInfo,
    pub source: Source,
    pub patches: Vec<Patch>,
    /// What the recipe builds, with the table of its kind.
    pub kind: Kind,
    pub target: Target,
    /// `source.pinned_from`: the public records the source's pin was
    /// checked against.
    pub source_pinned_from: Vec<String>,
    /// `source.why_unpinned`: why the source carries no pin.
    pub(crate) source_why_unpinned: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PackageInfo {
    pub name: String,
    /// `version`, `release`, `summary`, `description`, `license`,
    /// `homepage`, `maintainer`.
    #[serde(flatten)]
    pub about: crate::formats::About,
    /// `package.compression`: the `.deb` members' compressor and level
    /// (`xz:6`, `zstd:19`, `gzip:9`); `--compression` overrides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) compression: Option<crate::formats::Compression>,
}

/// Where the pristine upstream source comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// A git repository at a full commit id; `reference` is the human name
    /// (tag or branch) that `lock` resolves. `paths` limits extraction.
    Git {
        url: String,
        commit: Option<String>,
        #[serde(rename = "ref")]
        reference: Option<String>,
        paths: Vec<String>,
    },
    /// An archive over HTTP(S), pinned by sha256.
    Tarball {
        url: String,
        sha256: Option<String>,
        strip: u32,
        include: Vec<String>,
    },
    /// A folder or an archive on this machine (`/usr/src/linux-source-6.12.tar.xz`,
    /// or a folder of this repository), optionally pinned by sha256.
    Local {
        path: PathBuf,
        sha256: Option<String>,
        strip: u32,
        include: Vec<String>,
    },
    /// An upstream binary package (`.deb`), pinned by sha256: fetched with
    /// apt by name and version, or from `url` or a `local` file.
    Deb(DebSource),
}

/// `[source] deb = "..."`: a binary package of a distribution, its data and
/// control members extracted as the pristine tree (control under `DEBIAN/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DebSource {
    /// The binary package's name (`libhipblaslt1`).
    pub(crate) package: String,
    /// Its exact version (`7.1.1+dfsg-4`).
    pub(crate) version: String,
    /// Its architecture (`amd64`).
    pub(crate) arch: String,
    /// The sha256 of the `.deb` file: the pin, whichever way it is fetched.
    pub(crate) sha256: String,
    /// Where apt is not: the `.deb` over HTTP(S).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) url: Option<String>,
    /// Or a `.deb` file on this machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) local: Option<PathBuf>,
}

impl DebSource {
    /// `libhipblaslt1_7.1.1+dfsg-4_amd64.deb`: the file name apt gives it
    /// (an epoch's `:` spelled `%3a`).
    pub(crate) fn file_name(&self) -> String {
        format!(
            "{}_{}_{}.deb",
            self.package,
            self.version.replace(':', "%3a"),
            self.arch
        )
    }
}

impl Source {
    /// The pin this source is fetched by, if it has one.
    pub fn pin(&self) -> Option<&str> {
        match self {
            Source::Git { commit, .. } => commit.as_deref(),
            Source::Tarball { sha256, .. } | Source::Local { sha256, .. } => sha256.as_deref(),
            Source::Deb(deb) => Some(&deb.sha256),
        }
    }
}

/// One patch of the ordered series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Patch {
    /// The file name the patch has in the series (`0001-foo.patch`).
    pub name: String,
    pub origin: PatchOrigin,
    /// Context lines a hunk may ignore at each end (`fuzz = N`, opt-in; 0
    /// means the whole context must match, at any offset).
    pub(crate) fuzz: usize,
    /// Where its paths land in the tree.
    pub(crate) place: crate::input::placement::Placement,
    /// What pins the fix itself, beside `sha256` of a rendering.
    pub pin: PatchPin,
}

/// The pins of a url or git patch that do not depend on how a server renders
/// it: the sha256 of the normalised diff (`fetch::patch_url::normalise`)
/// and the git blob ids of the files it must leave, checked after it lands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PatchPin {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff_sha256: Option<String>,
    /// Tree path (after `strip`/`directory`) -> 40-hex git blob id.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub produces: std::collections::BTreeMap<String, String>,
    /// Patch URLs of a git patch's commit, tried in order before the ones
    /// derived from its `git` URL and before git itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned_from: Vec<String>,
    /// Why the patch carries no pin, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) why_unpinned: Option<String>,
}

impl PatchPin {
    /// Whether the fix is pinned by what it is (its diff or its result).
    pub fn is_pinned(&self) -> bool {
        self.diff_sha256.is_some() || !self.produces.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PatchOrigin {
    /// A curated file in `patches/<recipe>/`, listed in its `series`.
    File { path: PathBuf },
    /// A patch downloaded over HTTP(S), pinned by sha256.
    Url { url: String, sha256: Option<String> },
    /// An upstream commit: its diff against its parent, pinned by the commit
    /// id and by the sha256 of that diff.
    Git {
        url: String,
        commit: String,
        sha256: Option<String>,
    },
}

/// For which kernels and in which formats.
#[derive(Debug, Clone)]
pub struct Target {
    pub kernel: Option<crate::input::kernel::KernelRange>,
    pub(crate) kernel_regex: Option<String>,
    pub(crate) formats: Vec<crate::formats::Format>,
}

impl Recipe {
    /// Loads a recipe named by its file stem in `<root>/recipes/` or by a path.
    pub fn load(root: &Path, name_or_path: &str) -> Result<Recipe> {
        let path = resolve(root, name_or_path)?;
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading recipe {}", path.display()))?;
        let root = project_root_of(&path).unwrap_or_else(|| root.to_path_buf());
        validate::validate(&path, &root, &text)
    }

    /// Whether every input (source and patches) carries its pin.
    pub fn unpinned(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if self.source.pin().is_none() && !matches!(self.source, Source::Local { .. }) {
            missing.push("source".to_owned());
        }
        for patch in &self.patches {
            let pinned = match &patch.origin {
                PatchOrigin::File { .. } => true,
                PatchOrigin::Url { sha256, .. } | PatchOrigin::Git { sha256, .. } => {
                    sha256.is_some() || patch.pin.is_pinned()
                }
            };
            if !pinned {
                missing.push(format!("patch {}", patch.name));
            }
        }
        missing
    }

    /// Every unpinned input with the recipe's reason for it, if it gives one
    /// (`why_unpinned`).
    pub fn unpinned_reasons(&self) -> Vec<(String, Option<String>)> {
        self.unpinned()
            .into_iter()
            .map(|input| {
                let why = match input.strip_prefix("patch ") {
                    Some(name) => self
                        .patches
                        .iter()
                        .find(|p| p.name == name)
                        .and_then(|p| p.pin.why_unpinned.clone()),
                    None => self.source_why_unpinned.clone(),
                };
                (input, why)
            })
            .collect()
    }

    /// The recipe key and value that name the source, and the recipe file:
    /// `` `source.tarball` = https://... of recipes/x.toml ``, for messages
    /// about what was fetched from there.
    pub(crate) fn source_origin(&self) -> String {
        let (key, value) = match &self.source {
            Source::Git { url, commit, .. } => (
                "source.git",
                format!(
                    "{url} at {}",
                    commit.as_deref().unwrap_or("an unpinned commit")
                ),
            ),
            Source::Tarball { url, .. } => ("source.tarball", url.clone()),
            Source::Local { path, .. } => (
                "source.local",
                crate::shared::diag::display_path(path)
                    .display()
                    .to_string(),
            ),
            Source::Deb(deb) => (
                "source.deb",
                format!(
                    "{} {} ({}) sha256 {}",
                    deb.package, deb.version, deb.arch, deb.sha256
                ),
            ),
        };
        format!(
            "`{key}` = {value} of {}",
            crate::shared::diag::display_path(&self.path).display()
        )
    }
}

/// Every recipe in `<root>/recipes/`, by name, sorted.
pub fn list(root: &Path) -> Result<Vec<String>> {
    let dir = root.join("recipes");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                names.push(stem.to_owned());
            }
        }
    }
    names.sort();
    Ok(names)
}

fn resolve(root: &Path, name_or_path: &str) -> Result<PathBuf> {
    let as_path = Path::new(name_or_path);
    if name_or_path.ends_with(".toml") || name_or_path.contains('/') {
        let path = std::path::absolute(as_path)?;
        anyhow::ensure!(
            path.is_file(),
            "recipe file {} does not exist",
            as_path.display()
        );
        return Ok(path);
    }
    let path = root.join("recipes").join(format!("{name_or_path}.toml"));
    if !path.is_file() {
        let known = list(root).unwrap_or_default();
        anyhow::bail!(
            "no recipe named `{name_or_path}` in {}; known recipes: {} (or pass a path to a .toml file)",
            root.join("recipes").display(),
            if known.is_empty() { "none".to_owned() } else { known.join(", ") }
        );
    }
    Ok(path)
}

/// The folder holding the `recipes/` folder a recipe file sits in.
fn project_root_of(recipe: &Path) -> Option<PathBuf> {
    let dir = recipe.parent()?;
    (dir.file_name()? == "recipes")
        .then(|| dir.parent().map(Path::to_path_buf))
        .flatten()
}
