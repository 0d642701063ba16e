//! `cargo xtask build-config [<recipe>]`: a configuration-only package (the
//! `amdgpu-cwsr-off` stop-gap) as .deb, .rpm and Arch with their source
//! packages, published into `dist/<recipe>/` through the one build line
//! (`line::run`).

use anyhow::Result;

use crate::formats::Format;
use crate::input::recipe::KindName;
use crate::input::workspace::Workspace;
use crate::line::{self, Options};

/// The recipe built when none is named.
pub(crate) const DEFAULT_RECIPE: &str = "amdgpu-cwsr-off";

/// Build a configuration package (the amdgpu-cwsr-off stop-gap) into dist/<recipe>/
///
/// A `kind = "config"` recipe becomes a .deb, an .rpm and an Arch package,
/// and, as a DKMS recipe does, the pristine source
/// (source/<name>_<version>.orig.tar.gz) with its patch series, the source
/// packages build farms take (with the deb: source/*.dsc and
/// *.debian.tar.xz for sbuild, a PPA or OBS; with the rpm: *.src.rpm for
/// COPR, OBS or `rpmbuild --rebuild`; with the Arch package: *.src.tar.gz,
/// the PKGBUILD, .SRCINFO and its sources), the packaging files (debian/,
/// spec, PKGBUILD), manifest.json and SHA256SUMS.
///
/// Files installed below /etc are configuration: a Debian conffile, rpm
/// %config(noreplace), an Arch `backup` entry, so local edits survive
/// upgrades. The build is published atomically and is byte-identical for
/// the same inputs and SOURCE_DATE_EPOCH; a re-run with nothing changed does
/// nothing.
///
/// Then: `sudo dpkg -i dist/<recipe>/*.deb`, `sudo rpm -i
/// dist/<recipe>/*.noarch.rpm` or `sudo pacman -U
/// dist/<recipe>/*.pkg.tar.zst`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    #[arg(default_value = DEFAULT_RECIPE)]
    pub(crate) recipe: String,
    /// Package formats, comma-separated [default: the recipe's `target.formats`]
    #[arg(long, value_delimiter = ',', value_parser = |text: &str| super::parse_format(text, Some(KindName::Config)), value_name = super::formats_value_name(Some(KindName::Config)))]
    pub(crate) formats: Option<Vec<Format>>,
    #[command(flatten)]
    pub(crate) publish: super::PublishArgs,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let opts = Options {
        formats: args.formats.clone(),
        ..args.publish.options(&args.recipe, Some(KindName::Config))
    };
    crate::shared::report::out(&line::run(ws, &opts)?.to_text());
    Ok(())
}
