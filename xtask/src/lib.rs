//! rocm-patchkit: fetch pinned upstream sources, apply curated patch series,
//! verify the result and package it. Each module is one stage of the line
//! `recipe -> plan -> fetch -> apply -> verify -> render -> package -> dist`;
//! `ARCHITECTURE.md` is the map.

pub mod apply;
pub mod cli;
pub mod doctor;
pub mod fetch;
pub mod formats;
pub mod gpu;
pub mod input;
pub mod line;
pub mod release;
pub mod shared;
