//! `cargo xtask build-dkms [<recipe>]`: the maintainers' main job. Fetch,
//! apply, verify, render, package and publish a DKMS recipe into
//! `dist/<recipe>/`, through the one build line (`line::run`).

use anyhow::Result;

use crate::formats::Format;
use crate::input::recipe::KindName;
use crate::input::workspace::Workspace;
use crate::line::{self, Options};

/// The recipe built when none is named.
pub(crate) const DEFAULT_RECIPE: &str = "amdgpu-debian-6.12";

/// Build a DKMS recipe into dist/<recipe>/ (the main job)
///
/// Publishes the .deb, .rpm, Arch package and DKMS tarball, the pristine
/// source with its patch series, the source packages build farms take (with
/// the deb: source/*.dsc and *.debian.tar.xz for sbuild, a PPA or OBS; with
/// the rpm: *.src.rpm for COPR, OBS or `rpmbuild --rebuild`; with the Arch
/// package: *.src.tar.gz, the PKGBUILD, .SRCINFO and its sources), the
/// packaging files (debian/, spec, PKGBUILD, dkms.conf), manifest.json and
/// SHA256SUMS.
///
/// The build is published atomically: a failed or killed run leaves the
/// previous dist/<recipe>/ as it was. Same inputs and SOURCE_DATE_EPOCH give
/// byte-identical files (SOURCE_DATE_EPOCH defaults to the commit time of the
/// project's HEAD). A re-run with nothing changed says so and does nothing.
/// `cargo xtask plan <recipe>` lists the steps it runs.
///
/// Then: `sudo dpkg -i dist/<recipe>/*.deb` (Debian, Ubuntu), `sudo rpm -i
/// dist/<recipe>/*.noarch.rpm` (Fedora, openSUSE), `sudo pacman -U
/// dist/<recipe>/*.pkg.tar.zst` (Arch), or `sudo dkms ldtarball
/// dist/<recipe>/*.dkms.tar.gz` (anything with dkms).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    #[arg(default_value = DEFAULT_RECIPE)]
    pub(crate) recipe: String,
    /// Kernel release to build for (checked against the recipe's range)
    /// [default: the newest with headers in /lib/modules/*/build, else the running one]
    #[arg(long, value_name = "RELEASE")]
    pub(crate) kernel: Option<String>,
    /// Package formats, comma-separated [default: the recipe's `target.formats`]
    #[arg(long, value_delimiter = ',', value_parser = |text: &str| super::parse_format(text, Some(KindName::Dkms)), value_name = super::formats_value_name(Some(KindName::Dkms)))]
    pub(crate) formats: Option<Vec<Format>>,
    #[command(flatten)]
    pub(crate) publish: super::PublishArgs,
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let opts = Options {
        kernel: args.kernel.clone(),
        formats: args.formats.clone(),
        ..args.publish.options(&args.recipe, Some(KindName::Dkms))
    };
    crate::shared::report::out(&line::run(ws, &opts)?.to_text());
    Ok(())
}
