//! One file per `cargo xtask` command, each with its clap `Args` and one `run`.

pub mod list;
pub mod plan;
