//! How much one extraction may write, the guard against archive bombs:
//! [`Limits`], read from the environment by `settings`.

pub use crate::shared::settings::{Limits, MAX_BYTES_ENV, MAX_FILES_ENV};
