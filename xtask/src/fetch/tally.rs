//! What fetching one input took ([`FetchTally`]): inputs found in the cache,
//! downloaded or local, the bytes downloaded, and the pins taken by
//! `--allow-unpinned`; summed up once the whole recipe is fetched.

/// What fetching one input took.
#[derive(Default)]
pub(super) struct FetchTally {
    pub(super) cached: usize,
    pub(super) downloaded: usize,
    pub(super) bytes: u64,
    pub(super) local: usize,
    /// `(input, key, value)` of every pin taken by `--allow-unpinned`.
    pub(super) taken: Vec<(String, String, String)>,
}
