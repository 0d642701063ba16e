//! One file per `cargo xtask` command, each with its clap `Args` and one `run`.

pub mod apply;
pub mod bench;
pub mod bench_package;
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
