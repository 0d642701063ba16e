//! Shared infrastructure every stage stands on: located
//! diagnostics and typed errors, the exit mapping, reporting (the one
//! place that prints), settings, sha256. See `ARCHITECTURE.md` here.

pub mod diag;
pub mod error;
pub mod hash;
pub mod par;
pub mod report;
pub mod settings;
