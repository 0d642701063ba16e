//! rocm-patchkit: fetch pinned upstream sources, apply curated patch series,
//! verify the result and package it. Each module is one stage of the line
//! `recipe -> plan -> fetch -> apply -> verify -> render -> package -> dist`;
//! `ARCHITECTURE.md` is the map.

pub mod build;
pub mod cache;
pub mod codeobj;
pub mod commands;
pub mod diag;
pub mod diff;
pub mod dist;
pub mod doctor;
pub mod drift;
pub mod error;
pub mod extract;
pub mod fetch;
pub mod hash;
pub mod hipblaslt;
pub mod inplace;
pub mod invocation;
pub mod kernel;
pub mod knowledge;
pub mod lock;
pub mod manifest;
pub mod package;
pub mod packaging;
pub mod par;
pub mod patch;
pub mod placement;
pub mod plan;
pub mod publish;
pub mod range;
pub mod recipe;
pub mod render;
pub mod report;
pub mod repos;
pub mod run;
pub mod settings;
pub mod state;
pub mod target;
pub mod user;
pub mod verify;
pub mod workspace;
