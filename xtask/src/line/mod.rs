//! The one build line. [`plan`] resolves a build up front: the kernel or
//! ROCm target, the formats, `SOURCE_DATE_EPOCH`, every output file and the
//! ordered steps; [`exec`] runs those steps for any kind; [`transform`] is
//! the apply stage of every kind (the patches, or a binary rewrite); each
//! kind ([`dkms`], [`config`], [`hipblaslt`], [`rewrite`]) is one file
//! implementing [`BuildKind`] (its transform, identity, sources, render
//! and assemble steps), handed a recipe by [`kind_of`], the one `match`
//! over kinds.
//! `build-dkms`, `build-config`, `build-hipblaslt` and `build` are thin
//! entries over [`run`].

pub(crate) mod config;
pub mod dkms;
pub mod exec;
pub(crate) mod hipblaslt;
pub(crate) mod identity;
pub mod plan;
pub(crate) mod rewrite;
pub(crate) mod source;
mod source_packages;
pub(crate) mod transform;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::apply::patch::Tolerance;
use crate::fetch::FetchOptions;
use crate::formats::{Architecture, FileTree, Format, PackageMeta, Scripts};
use crate::input::recipe::{KindName, Recipe};
use crate::input::workspace::Workspace;
use crate::release::render::Rendered;
use crate::shared::diag::UsageError;
use exec::Cx;
use transform::Transform;

pub(crate) use crate::release::outcome::Outcome;

/// What to build, as the commands' flags say it.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// A recipe name or path.
    pub(crate) recipe: String,
    /// The kind the command builds (`build-dkms` builds dkms recipes); none
    /// for `build`, which builds any.
    pub(crate) kind: Option<KindName>,
    /// `--kernel` (dkms); the newest headers under `modules_dir` otherwise.
    pub(crate) kernel: Option<String>,
    pub(crate) modules_dir: PathBuf,
    /// `--formats`; the recipe's otherwise.
    pub(crate) formats: Option<Vec<Format>>,
    /// `--out`; `dist/<recipe>` otherwise.
    pub(crate) out: Option<PathBuf>,
    pub(crate) fetch: FetchOptions,
    /// `--compression`: the .deb's compressor; the recipe's
    /// `package.compression` otherwise, else the default.
    pub(crate) compression: Option<crate::formats::Compression>,
    /// The hipBLASLt flags (toolchain, GPU targets, build mode, jobs).
    pub(crate) hipblaslt: hipblaslt::Settings,
}

/// What the assemble step made: one set of files packaged in every format.
#[derive(Debug)]
pub(crate) struct Assembled {
    pub(crate) meta: PackageMeta,
    pub(crate) machine: Architecture,
    pub(crate) tree: FileTree,
    /// The maintainer scripts of each format (none when absent).
    pub(crate) scripts: BTreeMap<Format, Scripts>,
    /// Arch: the PKGBUILD shipped beside the package.
    pub(crate) pkgbuild: Option<Vec<u8>>,
    /// Entries the manifest's `build` table gains from the build itself.
    pub(crate) params: BTreeMap<String, String>,
    /// A rewrite's upstream control members, which its .deb carries (see
    /// `formats::deb_carried`); none for the kinds whose packages we describe.
    pub(crate) carried: Option<crate::formats::deb_carried::Carried>,
}

/// What a recipe's kind brings to the build line, implemented once in the
/// kind's own file (`dkms.rs`, `config.rs`, `hipblaslt.rs`, `rewrite.rs`);
/// [`kind_of`] is the one `match` over kinds that hands a recipe to it.
pub(crate) trait BuildKind: Sync {
    /// The apply stage's transform: the recipe's patches unless the kind
    /// says otherwise.
    fn transform(&self, tol: Tolerance) -> Transform {
        Transform::Patches(tol)
    }

    /// What the kind's binary packages run on.
    fn machine(&self) -> Architecture {
        Architecture::Any
    }

    /// The kind's changes to its packages' identity (their name, source
    /// and version), on top of the recipe's `[package]`.
    fn identity(&self, _recipe: &Recipe, _meta: &mut PackageMeta) {}

    /// Whether a build publishes `source/`: the orig tarball, the patches
    /// and `series`.
    fn publishes_source(&self) -> bool {
        true
    }

    /// Whether the patched tree is published beside the orig tarball.
    fn publishes_patched(&self) -> bool {
        false
    }

    /// Whether the kind's packaging files (`debian/`, spec, PKGBUILD) are
    /// rendered from `templates/` (the render step) and its builds write
    /// source packages from them.
    fn renders(&self) -> bool {
        false
    }

    /// Files beside the orig tarball and the patches that the source
    /// packages' spec and PKGBUILD name.
    fn extra_sources(&self, _cx: &Cx) -> Result<Vec<(String, PathBuf)>> {
        Ok(Vec::new())
    }

    /// The build's settings, resolved before anything is fetched.
    fn part<'r>(
        &self,
        ws: &Workspace,
        recipe: &'r Recipe,
        opts: &Options,
    ) -> Result<Box<dyn Part + 'r>>;
}

/// The one `match` over kinds: the [`BuildKind`] of a recipe's kind.
pub(crate) fn kind_of(kind: KindName) -> &'static dyn BuildKind {
    match kind {
        KindName::Dkms => &dkms::DkmsKind,
        KindName::Config => &config::ConfigKind,
        KindName::Hipblaslt => &hipblaslt::HipblasltKind,
        KindName::Rewrite => &rewrite::RewriteKind,
    }
}

/// What a recipe's kind brings to one build, resolved before anything is
/// fetched: the formats, the manifest's `build` table, and the render and
/// assemble steps.
pub(crate) trait Part {
    /// The formats this build packages.
    fn formats(&self) -> &[Format];

    /// The manifest's `build` table as known before the build.
    fn params(&self) -> BTreeMap<String, String>;

    /// The render step: the packaging files, for a kind that
    /// [`BuildKind::renders`].
    fn render(&self, cx: &Cx) -> Result<Rendered> {
        bail!(
            "a {} recipe has no templates to render",
            cx.recipe.kind.name().as_str()
        )
    }

    /// The assemble step: one set of files packaged in every format.
    fn assemble(&self, cx: &Cx) -> Result<Assembled>;
}

impl Options {
    /// `--formats`, else the recipe's `target.formats`.
    pub(crate) fn formats_of(&self, recipe: &Recipe) -> Vec<Format> {
        self.formats
            .clone()
            .unwrap_or_else(|| recipe.target.formats.clone())
    }
}

/// Loads the recipe and builds it: plan, then execute.
pub(crate) fn run(ws: &Workspace, opts: &Options) -> Result<Outcome> {
    let recipe = Recipe::load(&ws.root, &opts.recipe)?;
    if let Some(kind) = opts.kind {
        require_kind(&recipe, kind)?;
    }
    let part = kind_of(recipe.kind.name()).part(ws, &recipe, opts)?;
    exec::execute(ws, &recipe, part.as_ref(), opts)
}

/// Refuses a recipe of another kind, naming the command that builds it.
pub(crate) fn require_kind(recipe: &Recipe, kind: KindName) -> Result<()> {
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

/// The manifest's `formats` entry: `deb,rpm`.
pub(crate) fn formats_line(formats: &[Format]) -> String {
    formats
        .iter()
        .map(|f| f.as_str())
        .collect::<Vec<_>>()
        .join(",")
}
