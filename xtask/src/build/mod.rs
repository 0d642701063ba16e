//! The one build line. [`plan`] resolves a build up front: the kernel or
//! ROCm target, the formats, `SOURCE_DATE_EPOCH`, every output file and the
//! ordered steps; [`exec`] runs those steps for any kind; [`transform`] is
//! the apply stage of every kind (the patches, or a binary rewrite); each
//! kind ([`dkms`], [`config`], [`hipblaslt`], [`rewrite`]) contributes its
//! assemble step (and dkms and config their render step) and nothing else.
//! `build-dkms`, `build-config`, `build-hipblaslt` and `build` are thin
//! entries over [`run`].

pub mod config;
pub mod dkms;
pub mod exec;
pub mod hipblaslt;
pub mod identity;
pub mod plan;
pub mod rewrite;
pub mod source;
mod source_packages;
pub mod transform;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::diag::UsageError;
use crate::fetch::FetchOptions;
use crate::package::{Architecture, FileTree, Format, PackageMeta, Scripts};
use crate::recipe::{Kind, KindName, Recipe};
use crate::workspace::Workspace;

pub use crate::publish::Outcome;

/// What to build, as the commands' flags say it.
#[derive(Debug, Clone)]
pub struct Options {
    /// A recipe name or path.
    pub recipe: String,
    /// The kind the command builds (`build-dkms` builds dkms recipes); none
    /// for `build`, which builds any.
    pub kind: Option<KindName>,
    /// `--kernel` (dkms); the newest headers under `modules_dir` otherwise.
    pub kernel: Option<String>,
    pub modules_dir: PathBuf,
    /// `--formats`; the recipe's otherwise.
    pub formats: Option<Vec<Format>>,
    /// `--out`; `dist/<recipe>` otherwise.
    pub out: Option<PathBuf>,
    pub fetch: FetchOptions,
    /// `--compression`: the .deb's compressor; the recipe's
    /// `package.compression` otherwise, else the default.
    pub compression: Option<crate::package::Compression>,
    /// The hipBLASLt flags (toolchain, GPU targets, build mode, jobs).
    pub hipblaslt: hipblaslt::Settings,
}

/// What the assemble step made: one set of files packaged in every format.
#[derive(Debug)]
pub struct Assembled {
    pub meta: PackageMeta,
    pub machine: Architecture,
    pub tree: FileTree,
    /// The maintainer scripts of each format (none when absent).
    pub scripts: BTreeMap<Format, Scripts>,
    /// Arch: the PKGBUILD shipped beside the package.
    pub pkgbuild: Option<Vec<u8>>,
    /// Entries the manifest's `build` table gains from the build itself.
    pub params: BTreeMap<String, String>,
    /// A rewrite's upstream control members, which its .deb carries (see
    /// `package::deb_carried`); none for the kinds whose packages we describe.
    pub carried: Option<crate::package::deb_carried::Carried>,
}

/// What a recipe's kind brings to the line, resolved before anything is
/// fetched.
pub enum Part<'r> {
    Dkms(dkms::Part<'r>),
    Config(config::Part<'r>),
    Hipblaslt(hipblaslt::Part),
    Rewrite(rewrite::Part),
}

impl Options {
    /// `--formats`, else the recipe's `target.formats`.
    pub fn formats_of(&self, recipe: &Recipe) -> Vec<Format> {
        self.formats
            .clone()
            .unwrap_or_else(|| recipe.target.formats.clone())
    }
}

/// Loads the recipe and builds it: plan, then execute.
pub fn run(ws: &Workspace, opts: &Options) -> Result<Outcome> {
    let recipe = Recipe::load(&ws.root, &opts.recipe)?;
    if let Some(kind) = opts.kind {
        require_kind(&recipe, kind)?;
    }
    let part = match &recipe.kind {
        Kind::Dkms(Some(table)) => Part::Dkms(dkms::Part::new(&recipe, table, opts)?),
        Kind::Dkms(None) => bail!(UsageError(format!(
            "{}: build-dkms needs a `[dkms]` table with at least one `[[dkms.module]]` (see recipes/README.md)",
            recipe.path.display()
        ))),
        Kind::Config(table) => Part::Config(config::Part::new(&recipe, table, opts)?),
        Kind::Hipblaslt { .. } => Part::Hipblaslt(hipblaslt::Part::new(ws, &recipe, opts)?),
        Kind::Rewrite { .. } => Part::Rewrite(rewrite::Part::new(&recipe, opts)?),
    };
    exec::execute(ws, &recipe, &part, opts)
}

/// Refuses a recipe of another kind, naming the command that builds it.
pub fn require_kind(recipe: &Recipe, kind: KindName) -> Result<()> {
    let is = recipe.kind.name();
    if is != kind {
        bail!(UsageError(format!(
            "recipe {} is `kind = \"{}\"`: build it with `cargo xtask {}`",
            recipe.name,
            is.as_str(),
            is.build_command()
        )));
    }
    Ok(())
}

impl Part<'_> {
    /// The formats this build packages.
    pub fn formats(&self) -> &[Format] {
        match self {
            Part::Dkms(p) => &p.formats,
            Part::Config(p) => &p.formats,
            Part::Hipblaslt(p) => &p.formats,
            Part::Rewrite(p) => &p.formats,
        }
    }

    /// The manifest's `build` table as known before the build.
    pub fn params(&self) -> BTreeMap<String, String> {
        match self {
            Part::Dkms(p) => p.params(),
            Part::Config(p) => p.params(),
            Part::Hipblaslt(p) => p.params(),
            Part::Rewrite(p) => p.params(),
        }
    }

    /// Whether the templates are inputs of this build.
    pub fn uses_templates(&self) -> bool {
        matches!(self, Part::Dkms(_) | Part::Config(_))
    }
}

/// The manifest's `formats` entry: `deb,rpm`.
pub fn formats_line(formats: &[Format]) -> String {
    formats
        .iter()
        .map(|f| f.as_str())
        .collect::<Vec<_>>()
        .join(",")
}
