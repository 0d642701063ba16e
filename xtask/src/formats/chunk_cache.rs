//! The chunk cache: compressed chunks in the work directory
//! (`work/chunks/<codec tag>/<BLAKE3 of the uncompressed chunk>`), each
//! stored with the BLAKE3 of what follows it and checked on every read,
//! so a rebuild recompresses only the chunks whose content changed. It
//! changes speed, never output: a piece is used only when it verifies, and
//! anything else (missing, damaged, unreadable) is compressed afresh.
//! Bounded in size: the least recently used pieces go first.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::compress::{Compression, Piece};

/// What the cache may hold before the oldest pieces are removed: the
/// four packages of the amdgpu tree take about 150 MiB.
pub(crate) const DEFAULT_LIMIT: u64 = 512 << 20;

/// A handle to a chunk cache folder; clones share their counters.
#[derive(Debug, Clone)]
pub(crate) struct ChunkCache {
    dir: PathBuf,
    limit: u64,
    stats: Arc<Stats>,
}

#[derive(Debug, Default)]
struct Stats {
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ChunkCache {
    /// The cache in `dir` (made on first write), [`DEFAULT_LIMIT`] bytes.
    pub(crate) fn new(dir: impl Into<PathBuf>) -> ChunkCache {
        ChunkCache::with_limit(dir, DEFAULT_LIMIT)
    }

    pub(crate) fn with_limit(dir: impl Into<PathBuf>, limit: u64) -> ChunkCache {
        ChunkCache {
            dir: dir.into(),
            limit,
            stats: Arc::default(),
        }
    }

    /// Chunks taken from the cache so far, through this handle and its clones.
    pub(crate) fn hits(&self) -> u64 {
        self.stats.hits.load(Ordering::Relaxed)
    }

    /// Chunks compressed so far, through this handle and its clones.
    pub(crate) fn misses(&self) -> u64 {
        self.stats.misses.load(Ordering::Relaxed)
    }

    /// The piece of `data`: from the cache when a stored one verifies,
    /// else compressed and stored. A cache that cannot be read or written
    /// costs time only.
    pub(crate) fn get_or_compress(
        &self,
        codec: Compression,
        data: &[u8],
        last: bool,
    ) -> io::Result<Piece> {
        let path = self.dir.join(folder(codec, last)).join(key(data));
        if let Some(piece) = read_piece(&path).filter(|p| p.uncompressed == data.len() as u64) {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            // Mark it used, for the pruning order.
            let _ = fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(SystemTime::now()));
            return Ok(piece);
        }
        let piece = codec.compress_chunk(data, last)?;
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        let _ = self.store(&path, &piece);
        Ok(piece)
    }

    /// Writes a piece under its key: a temporary file, then a rename.
    fn store(&self, path: &Path, piece: &Piece) -> io::Result<()> {
        let dir = path.parent().unwrap_or(&self.dir);
        fs::create_dir_all(dir)?;
        let mut tmp = tempfile::Builder::new().prefix(".tmp.").tempfile_in(dir)?;
        let body = encode(piece);
        tmp.write_all(blake3::hash(&body).as_bytes())?;
        tmp.write_all(&body)?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Removes the least recently used pieces until the cache holds at
    /// most its limit (and left-over temporary files of killed runs).
    pub(crate) fn prune(&self) {
        let mut files = Vec::new();
        let Ok(tags) = fs::read_dir(&self.dir) else {
            return;
        };
        for tag in tags.flatten() {
            let Ok(entries) = fs::read_dir(tag.path()) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(meta) = e.metadata() else { continue };
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                let stale_tmp = e.file_name().to_string_lossy().starts_with(".tmp.")
                    && used.elapsed().is_ok_and(|age| age.as_secs() > 3600);
                if stale_tmp {
                    let _ = fs::remove_file(e.path());
                    continue;
                }
                files.push((used, meta.len(), e.path()));
            }
        }
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        if total <= self.limit {
            return;
        }
        files.sort();
        for (_, len, path) in files {
            if total <= self.limit {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// Names the cache folder: codec, level, chunk format, the codec
/// library's version and what the encoder makes of a fixed sample, so
/// that a cached piece is always what a cold compression would write,
/// even after a library update that kept its version.
pub(crate) fn tag(codec: Compression) -> String {
    let base = match codec {
        Compression::None => "none-v2".to_owned(),
        Compression::Gzip(l) => format!("gzip{l}-deflate-v2"),
        Compression::Xz(l) => format!("xz{l}-block-crc64-lzma{}-v2", xz_version()),
        Compression::Zstd(l) => format!(
            "zstd{l}-long27-frame-zstd{}-v2",
            zstd::zstd_safe::version_number()
        ),
    };
    format!("{base}-{}", fingerprint(codec))
}

/// The first 12 hex digits of the sha256 of this codec's piece of a
/// fixed 256 KiB sample, taken once per process.
fn fingerprint(codec: Compression) -> String {
    // Not a setting: a pure function of the codec and the linked
    // library, the same for every build of the process, kept so the
    // probe runs once (a cache of a tool probe, never a build's choice).
    static SEEN: OnceLock<Mutex<HashMap<Compression, String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Mutex::default);
    if let Some(fp) = seen.lock().ok().and_then(|m| m.get(&codec).cloned()) {
        return fp;
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let sample: Vec<u8> = (0..256 << 10)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            b"0123456789abcdef mmREG_\n"[(state >> 59) as usize % 24]
        })
        .collect();
    let fp = match codec.compress_chunk(&sample, false) {
        Ok(piece) => hex::encode(&Sha256::digest(&piece.bytes)[..6]),
        Err(_) => "unknown".to_owned(),
    };
    if let Ok(mut m) = seen.lock() {
        m.insert(codec, fp.clone());
    }
    fp
}

/// The cache folder of a chunk: a stream's last deflate chunk ends
/// with the final block, the others with a sync flush.
pub(crate) fn folder(codec: Compression, last: bool) -> String {
    match codec {
        Compression::Gzip(_) if last => format!("{}-end", tag(codec)),
        _ => tag(codec),
    }
}

fn xz_version() -> u32 {
    // SAFETY: a pure function of liblzma returning a constant.
    unsafe { lzma_sys::lzma_version_number() }
}

/// `unpadded`, `uncompressed` (u64 little-endian), then the bytes.
fn encode(piece: &Piece) -> Vec<u8> {
    let mut body = Vec::with_capacity(16 + piece.bytes.len());
    body.extend_from_slice(&piece.unpadded.to_le_bytes());
    body.extend_from_slice(&piece.uncompressed.to_le_bytes());
    body.extend_from_slice(&piece.bytes);
    body
}

/// A chunk's name in the cache: the BLAKE3 of its uncompressed bytes
/// (a cryptographic hash, as sha256, that runs at several GB/s on one core:
/// a rebuild names every chunk of every payload).
fn key(data: &[u8]) -> String {
    blake3::hash(data).to_hex().to_string()
}

/// A stored piece whose BLAKE3 matches; a damaged one is removed.
fn read_piece(path: &Path) -> Option<Piece> {
    let stored = fs::read(path).ok()?;
    let ok = stored.len() >= 48 && blake3::hash(&stored[32..]).as_bytes()[..] == stored[..32];
    if !ok {
        let _ = fs::remove_file(path);
        return None;
    }
    let u64_at = |at: usize| u64::from_le_bytes(stored[at..at + 8].try_into().unwrap_or([0; 8]));
    Some(Piece {
        unpadded: u64_at(32),
        uncompressed: u64_at(40),
        bytes: stored[48..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(seed: u8) -> Vec<u8> {
        (0..200_000u32).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    #[test]
    fn a_damaged_piece_is_compressed_again_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ChunkCache::new(dir.path());
        let codec = Compression::Zstd(3);
        let cold = codec.compress_chunk(&data(1), false).unwrap();
        assert_eq!(cache.get_or_compress(codec, &data(1), false).unwrap(), cold);
        let path = dir.path().join(tag(codec)).join(key(&data(1)));
        let mut stored = fs::read(&path).unwrap();
        let last = stored.len() - 1;
        stored[last] ^= 0xff;
        fs::write(&path, &stored).unwrap();
        assert_eq!(cache.get_or_compress(codec, &data(1), false).unwrap(), cold);
        assert_eq!(
            (cache.hits(), cache.misses()),
            (0, 2),
            "the damaged piece was used"
        );
        assert_eq!(cache.get_or_compress(codec, &data(1), false).unwrap(), cold);
        assert_eq!(cache.hits(), 1, "the replaced piece was not used");
    }

    #[test]
    fn pruning_keeps_the_recently_used_pieces_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let codec = Compression::Gzip(1);
        let one = codec.compress_chunk(&data(1), false).unwrap().bytes.len() as u64 + 48;
        let cache = ChunkCache::with_limit(dir.path(), 2 * one + one / 2);
        for seed in 1..=3 {
            cache.get_or_compress(codec, &data(seed), false).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        cache.get_or_compress(codec, &data(1), false).unwrap();
        cache.prune();
        let hits = cache.hits();
        cache.get_or_compress(codec, &data(1), false).unwrap();
        cache.get_or_compress(codec, &data(3), false).unwrap();
        assert_eq!(cache.hits(), hits + 2, "a recently used piece was pruned");
        cache.get_or_compress(codec, &data(2), false).unwrap();
        assert_eq!(
            cache.hits(),
            hits + 2,
            "the oldest piece was kept past the limit"
        );
    }

    #[test]
    fn cache_folders_tell_codecs_levels_and_encoders_apart() {
        let tags: Vec<String> = [
            Compression::Gzip(6),
            Compression::Gzip(9),
            Compression::Xz(2),
            Compression::Zstd(12),
        ]
        .iter()
        .map(|&c| tag(c))
        .collect();
        assert!(tags[0].starts_with("gzip6-") && tags[3].starts_with("zstd12-long27"));
        // The sample's pieces differ between levels, so the fingerprints do.
        let fp = |t: &str| t.rsplit('-').next().unwrap().to_owned();
        assert_ne!(fp(&tags[0]), fp(&tags[1]), "{tags:?}");
        assert_eq!(tag(Compression::Gzip(6)), tags[0]);
        assert_eq!(
            folder(Compression::Gzip(6), true),
            format!("{}-end", tags[0])
        );
    }
}
