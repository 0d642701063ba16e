//! The apply stage: extraction into a staging tree, the patch
//! engine, the state record, verdicts on trees and on newer upstreams.
//! See `ARCHITECTURE.md` here.

pub(crate) mod drift;
pub mod extract;
pub mod patch;
pub mod state;
pub(crate) mod verify;
