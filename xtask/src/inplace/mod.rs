//! Rewrites an installed hipBLASLt in place: every gfx12 kernel file that
//! switches expert scheduling on is replaced by the engine's rewrite with
//! the mode written 0, atomically, the original kept and the change
//! recorded ([`record`]); comgr's cache entries that could serve the old
//! code go ([`comgr`]).

pub mod comgr;
pub mod record;
