//! rocm-patchkit: fetch pinned upstream sources, apply curated patch series,
//! verify the result and package it. Each module is one stage of the line
//! `recipe -> plan -> fetch -> apply -> verify -> render -> package -> dist`;
//! `ARCHITECTURE.md` is the map.

pub mod commands;
pub mod diag;
pub mod drift;
pub mod extract;
pub mod fetch;
pub mod patch;
pub mod plan;
pub mod recipe;
pub mod report;
pub mod state;
pub mod verify;
pub mod workspace;
