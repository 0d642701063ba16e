//! One file per `cargo xtask` command, each with its clap `Args` and one `run`.

pub mod apply;
pub mod bench;
pub mod build_config;
pub mod build_dkms;
pub mod build_hipblaslt;
pub mod doctor;
pub mod drift;
pub mod fetch;
pub mod list;
pub mod lock;
pub mod plan;
pub mod verify;

/// The flags of every command that applies or checks a recipe's series:
/// where the inputs may come from, and how far a hunk may stray.
#[derive(Debug, clap::Args)]
pub struct SeriesArgs {
    /// Use only inputs already in the cache (no network)
    #[arg(long)]
    pub offline: bool,
    /// Accepted and changes nothing: a hunk whose whole context matches at
    /// one other line lands there by default (reported, and recorded by apply)
    #[arg(long)]
    pub offset: bool,
    /// Also let a hunk ignore up to N context lines at each end (opt-in, as
    /// a patch's `fuzz = N` in the recipe; reported, and recorded hunk by
    /// hunk by apply). Better: refresh the patch against the tree
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub fuzz: usize,
}

impl SeriesArgs {
    pub fn tolerance(&self) -> crate::patch::Tolerance {
        crate::patch::Tolerance::fuzz(self.fuzz)
    }
}
