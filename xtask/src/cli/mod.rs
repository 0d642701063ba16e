//! The command line: one file per command (`commands`), the dispatch
//! and exit mapping (`run`), the installed `rocm-patchkit` command
//! (`user`). See `ARCHITECTURE.md` here.

pub mod commands;
pub mod run;
pub mod user;
