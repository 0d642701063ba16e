//! `cargo xtask build-dkms [<recipe>]`: the maintainers' main job. Fetch,
//! apply, verify, render, package and publish a DKMS recipe into
//! `dist/<recipe>/`.

use std::path::PathBuf;

use anyhow::Result;

use crate::build_dkms::{self, Options};
use crate::fetch::FetchOptions;
use crate::package::{ChunkCache, Compression, Packing};
use crate::recipe::Format;
use crate::workspace::Workspace;

/// The recipe built when none is named.
pub const DEFAULT_RECIPE: &str = "amdgpu-debian-6.12";

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
///
/// Then: `sudo dpkg -i dist/<recipe>/*.deb` (Debian, Ubuntu), `sudo rpm -i
/// dist/<recipe>/*.noarch.rpm` (Fedora, openSUSE), `sudo pacman -U
/// dist/<recipe>/*.pkg.tar.zst` (Arch), or `sudo dkms ldtarball
/// dist/<recipe>/*.dkms.tar.gz` (anything with dkms).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A recipe name (file stem in recipes/) or a path to a recipe file
    #[arg(default_value = DEFAULT_RECIPE)]
    pub recipe: String,
    /// Kernel release to build for (checked against the recipe's range)
    /// [default: the newest with headers in /lib/modules/*/build, else the running one]
    #[arg(long, value_name = "RELEASE")]
    pub kernel: Option<String>,
    /// Package formats, comma-separated [default: the recipe's `target.formats`]
    #[arg(long, value_delimiter = ',', value_parser = parse_format, value_name = "deb,rpm,arch,tar")]
    pub formats: Option<Vec<Format>>,
    /// Where to publish; DIR must be new, empty or an earlier publication
    /// (with its manifest.json), as the whole folder is replaced
    /// [default: dist/<recipe>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Open no network connection: every input must be in the cache
    #[arg(long)]
    pub offline: bool,
    /// Fetch inputs that have no pin, and record the pins taken
    #[arg(long)]
    pub allow_unpinned: bool,
    /// The .deb's compressor and level: xz[:0-6], zstd[:1-19] or gzip[:1-9]
    /// (xz:6 is dpkg-deb's own, 28% smaller and nine times slower; zstd
    /// members need dpkg >= 1.21.18, and lintian 2.116 calls them
    /// malformed) [default: the recipe's `package.compression`, else xz:2]
    #[arg(long, value_name = "CODEC[:LEVEL]")]
    pub compression: Option<Compression>,
}

fn parse_format(text: &str) -> Result<Format, String> {
    Format::ALL
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, f)| *f)
        .ok_or_else(|| format!("`{text}` is not one of deb, rpm, arch, tar"))
}

pub fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let _packing = Packing {
        deb: args.compression,
        cache: Some(ChunkCache::new(ws.work_dir.join("chunks"))),
    }
    .enter();
    let opts = Options {
        recipe: args.recipe.clone(),
        kernel: args.kernel.clone(),
        modules_dir: PathBuf::from("/lib/modules"),
        formats: args.formats.clone(),
        out: args.out.clone(),
        fetch: FetchOptions {
            offline: args.offline,
            allow_unpinned: args.allow_unpinned,
        },
    };
    build_dkms::run(ws, &opts)?.print();
    Ok(())
}
