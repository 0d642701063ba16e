//! What a build leaves: the packaging files rendered from
//! templates, the atomic publication of a dist folder and its
//! manifest, a build's outcome, package repositories. See
//! `ARCHITECTURE.md` here.

pub mod dist;
pub(crate) mod manifest;
pub(crate) mod outcome;
pub mod packaging;
pub mod render;
pub mod repos;
