//! What the binary packages of a recipe are called and what they run on:
//! the part of their metadata that names their files, asked by the plan
//! and by each kind's assemble step alike.

use crate::formats::{Architecture, PackageMeta};
use crate::input::recipe::{KindName, Recipe, Source};

/// What the version of the package built adds to the upstream one
/// (`7.1.1+dfsg-4` becomes `7.1.1+dfsg-4+patchkit1` for release 1): above
/// it for apt, below the distribution's next revision.
pub(crate) const VERSION_TAG: &str = "+patchkit";

/// What the binary packages of `recipe` are called, and their version:
/// the part of their metadata that names their files.
pub(crate) fn identity(recipe: &Recipe) -> PackageMeta {
    let p = &recipe.package;
    let mut meta = PackageMeta {
        name: p.name.clone(),
        source: None,
        about: crate::formats::About {
            description: p.about.description.trim().to_owned(),
            ..p.about.clone()
        },
        depends: Vec::new(),
        changes: Vec::new(),
        copyright: Vec::new(),
        relations: Default::default(),
    };
    super::kind_of(recipe.kind.name()).identity(recipe, &mut meta);
    meta
}

/// What a kind's packages run on (its [`super::BuildKind::machine`]):
/// compiled libraries the host's machine, everything else any.
pub(crate) fn machine(kind: KindName) -> Architecture {
    super::kind_of(kind).machine()
}

/// The package's version split as the writers join it (`version-release`):
/// the upstream version and the revision with [`VERSION_TAG`] and the
/// recipe's release (`7.1.1+dfsg`, `4+patchkit1`).
pub(crate) fn version_of(recipe: &Recipe) -> (String, String) {
    let upstream = match &recipe.source {
        Source::Deb(deb) => deb.version.clone(),
        _ => recipe.package.about.version.clone(),
    };
    let (version, revision) = match upstream.rsplit_once('-') {
        Some((v, r)) => (
            v.to_owned(),
            format!("{r}{VERSION_TAG}{}", recipe.package.about.release),
        ),
        None => (
            upstream.clone(),
            format!("0{VERSION_TAG}{}", recipe.package.about.release),
        ),
    };
    (version, revision)
}
