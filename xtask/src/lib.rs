//! rocm-patchkit: fetch pinned upstream sources, apply curated patch series,
//! verify the result and package it; read a machine and say which known
//! fault affects it. Each module is a group of one stage of the line
//! `recipe -> plan -> fetch -> apply -> verify -> render -> package -> dist`
//! (input, fetch, apply, line, formats, release), the GPU code objects,
//! doctor, the commands, or the infrastructure they share;
//! `ARCHITECTURE.md` is the map, each group folder's own its room.

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
