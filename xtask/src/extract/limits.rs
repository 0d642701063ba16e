//! How much one extraction may write, from the environment: the guard
//! against archive bombs.

use anyhow::{Context, Result};

/// Environment variable that raises the limit of bytes one extraction writes.
pub const MAX_BYTES_ENV: &str = "PATCHKIT_EXTRACT_MAX_BYTES";
/// Environment variable that raises the limit of entries one extraction writes.
pub const MAX_FILES_ENV: &str = "PATCHKIT_EXTRACT_MAX_FILES";

/// How much one extraction may write: the whole Linux source is about
/// 1.5 GiB in 90 000 files, so the defaults (3 GiB, a million files) leave
/// room and stop a bomb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub bytes: u64,
    pub files: u64,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        bytes: 3 << 30,
        files: 1_000_000,
    };

    /// The defaults, raised (or lowered) by `PATCHKIT_EXTRACT_MAX_BYTES`
    /// (a number with an optional K, M or G suffix) and
    /// `PATCHKIT_EXTRACT_MAX_FILES`.
    pub fn from_env() -> Result<Limits> {
        let read = |var: &str, default: u64| -> Result<u64> {
            match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => parse_size(v.trim()).with_context(|| {
                    format!("{var}={v:?} is not a number (such as 4096, 512M or 16G)")
                }),
                _ => Ok(default),
            }
        };
        Ok(Limits {
            bytes: read(MAX_BYTES_ENV, Limits::DEFAULT.bytes)?,
            files: read(MAX_FILES_ENV, Limits::DEFAULT.files)?,
        })
    }
}

fn parse_size(text: &str) -> Result<u64> {
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let n: u64 = digits.parse()?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| anyhow::anyhow!("too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_sizes_and_stop_the_bomb_of_issue_15() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("16G").unwrap(), 16 << 30);
        assert!(parse_size("lots").is_err());
        // A 3 MB archive wrote 3.1 GiB; the whole Linux source is 1.5 GiB.
        const {
            assert!(Limits::DEFAULT.bytes < 3_100 << 20);
            assert!(Limits::DEFAULT.bytes > 2 * (1_486 << 20));
        }
    }
}
