//! One file per `cargo xtask` command, each with its clap `Args` and one `run`.

pub(crate) mod apply;
pub(crate) mod build;
pub(crate) mod build_config;
pub(crate) mod build_dkms;
pub(crate) mod build_hipblaslt;
pub mod doctor;
pub(crate) mod drift;
pub(crate) mod fetch;
pub(crate) mod list;
pub(crate) mod lock;
pub(crate) mod plan;
pub(crate) mod publish_repo;
pub(crate) mod rewrite_hipblaslt;
pub(crate) mod verify;

use crate::formats::Format;
use crate::input::recipe::KindName;

/// The flags of every command that applies or checks a recipe's series:
/// where the inputs may come from, and how far a hunk may stray.
#[derive(Debug, clap::Args)]
pub(crate) struct SeriesArgs {
    /// Use only inputs already in the cache (no network)
    #[arg(long)]
    pub(crate) offline: bool,
    /// Also let a hunk ignore up to N context lines at each end (opt-in, as
    /// a patch's `fuzz = N` in the recipe; reported, and recorded hunk by
    /// hunk by apply). Better: refresh the patch against the tree
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) fuzz: usize,
}

impl SeriesArgs {
    pub(crate) fn tolerance(&self) -> crate::apply::patch::Tolerance {
        crate::apply::patch::Tolerance::fuzz(self.fuzz)
    }
}

/// The publication flags every `build*` command takes.
#[derive(Debug, clap::Args)]
pub(crate) struct PublishArgs {
    /// Where to publish; DIR must be new, empty or an earlier publication
    /// (with its manifest.json), as the whole folder is replaced
    /// [default: dist/<recipe>]
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<std::path::PathBuf>,
    /// Open no network connection: every input must be in the cache
    #[arg(long)]
    pub(crate) offline: bool,
    /// Fetch inputs that have no pin, and record the pins taken
    #[arg(long)]
    pub(crate) allow_unpinned: bool,
    /// The .deb's compressor and level: xz[:0-6], zstd[:1-19] or gzip[:1-9]
    /// (xz:6 is dpkg-deb's own, 28% smaller and nine times slower; zstd
    /// members need dpkg >= 1.21.18, and lintian 2.116 calls them
    /// malformed) [default: the recipe's `package.compression`, else xz:2]
    #[arg(long, value_name = "CODEC[:LEVEL]")]
    pub(crate) compression: Option<crate::formats::Compression>,
}

impl PublishArgs {
    /// The build of `recipe` these flags ask for, with every other option
    /// at its default (the recipe's formats, the newest kernel, ...).
    pub(crate) fn options(
        &self,
        recipe: &str,
        kind: Option<crate::input::recipe::KindName>,
    ) -> crate::line::Options {
        crate::line::Options {
            recipe: recipe.to_owned(),
            kind,
            kernel: None,
            modules_dir: std::path::PathBuf::from("/lib/modules"),
            formats: None,
            out: self.out.clone(),
            fetch: self.fetch(),
            compression: self.compression,
            hipblaslt: Default::default(),
        }
    }

    pub(crate) fn fetch(&self) -> crate::fetch::FetchOptions {
        crate::fetch::FetchOptions {
            offline: self.offline,
            allow_unpinned: self.allow_unpinned,
            ..Default::default()
        }
    }
}

/// `--formats deb,rpm`: one of the formats `kind` makes (any, without a
/// kind), as `Format::ALL` lists them.
pub fn parse_format(text: &str, kind: Option<KindName>) -> Result<Format, String> {
    let made = formats_made(kind);
    Format::from_name(text)
        .filter(|f| made.contains(f))
        .ok_or_else(|| {
            let known: Vec<_> = made.iter().map(|f| f.as_str()).collect();
            format!("`{text}` is not one of {}", known.join(", "))
        })
}

/// The `--formats` value name: `deb,rpm,arch,tar`, the formats `kind` makes.
pub fn formats_value_name(kind: Option<KindName>) -> String {
    let made: Vec<_> = formats_made(kind).iter().map(|f| f.as_str()).collect();
    made.join(",")
}

fn formats_made(kind: Option<KindName>) -> Vec<Format> {
    Format::ALL
        .iter()
        .copied()
        .filter(|f| kind.is_none_or(|kind| kind.makes(*f)))
        .collect()
}
