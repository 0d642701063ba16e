//! What the fetch tests share: a recipe head that fetch does not look at,
//! sha256 in hex, and checks that the cache holds nothing unverified.

use std::path::Path;

use sha2::{Digest, Sha256};

/// The parts of a recipe that fetch does not look at.
pub(crate) const HEAD: &str = r#"[package]
name = "demo"
version = "1.0"
summary = "a test recipe"
description = "a test recipe"
license = "GPL-2.0-only"
maintainer = "Test <test@example.invalid>"

[target]
kind = "dkms"
kernel = ">=6.1"

[dkms]
[[dkms.module]]
name = "demo"
"#;

pub(crate) fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Nothing unverified in the cache: every blob is named by its sha256 and
/// `tmp/` is empty.
#[track_caller]
pub(crate) fn assert_cache_clean(cache: &Path) {
    if let Ok(blobs) = std::fs::read_dir(cache.join("sha256")) {
        for blob in blobs {
            let path = blob.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert_eq!(
                name,
                sha(&std::fs::read(&path).unwrap()),
                "{}",
                path.display()
            );
        }
    }
    if let Ok(tmp) = std::fs::read_dir(cache.join("tmp")) {
        let left: Vec<_> = tmp.map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "left in tmp/: {left:?}");
    }
}

pub(crate) fn blobs(cache: &Path) -> usize {
    std::fs::read_dir(cache.join("sha256")).map_or(0, |d| d.count())
}

pub(crate) fn tarball_recipe(url: &str, sha256: &str) -> String {
    format!("{HEAD}\n[source]\ntarball = \"{url}\"\nsha256 = \"{sha256}\"\n")
}
