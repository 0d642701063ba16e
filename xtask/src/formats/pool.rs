//! The worker threads of the chunked compressor: chunks go in on one
//! queue, each comes back as its piece (from the chunk cache or
//! compressed) on its own reply, so the writer joins them in order.

use std::io;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::chunk_cache::ChunkCache;
use super::compress::{Compression, Piece};

/// Worker threads for `compression` (output never depends on them),
/// bounded by memory: a build holds the chunk being filled and one per
/// worker, plus each worker's encoder: zstd with a 2^27 window ~90 MiB on
/// a 96 MiB chunk (one worker: zstd alone does ~80 MB/s at -12 on this
/// payload), xz -6 ~94 MiB (two).
pub(super) fn threads(compression: Compression) -> usize {
    let cores = crate::shared::par::cores().clamp(1, 8);
    match compression {
        Compression::Zstd(_) => 1,
        Compression::Xz(_) => cores.min(2),
        Compression::Gzip(_) | Compression::None => cores.min(4),
    }
}

pub(super) type Reply = Receiver<io::Result<Piece>>;

/// One chunk buffer a worker is done with, filled again by the writer
/// rather than allocated and page-faulted anew (the memory stays that of
/// the chunk being filled and those being compressed).
pub(super) type Spare = Arc<Mutex<Option<Vec<u8>>>>;

struct Job {
    data: Vec<u8>,
    last: bool,
    reply: SyncSender<io::Result<Piece>>,
}

/// Worker threads taking chunks from one queue.
pub(super) struct Pool {
    jobs: Option<SyncSender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    pub(super) fn new(
        threads: usize,
        codec: Compression,
        cache: Option<ChunkCache>,
        spare: Spare,
    ) -> Pool {
        let (tx, rx) = mpsc::sync_channel::<Job>(0);
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..threads)
            .map(|_| {
                let rx = Arc::clone(&rx);
                let cache = cache.clone();
                let spare = Arc::clone(&spare);
                std::thread::spawn(move || loop {
                    let job = match rx.lock() {
                        Ok(guard) => guard.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    let piece = piece(codec, cache.as_ref(), &job.data, job.last);
                    // The chunk's memory is free before the piece waits its
                    // turn: kept for the next chunk, or given back.
                    if let Ok(mut slot) = spare.lock() {
                        if slot.is_none() {
                            *slot = Some(job.data);
                        }
                    }
                    let _ = job.reply.send(piece);
                })
            })
            .collect();
        Pool {
            jobs: Some(tx),
            workers,
        }
    }
}

impl Pool {
    /// Hands a chunk to a worker; its piece comes on the reply.
    pub(super) fn submit(&self, data: Vec<u8>, last: bool) -> io::Result<Reply> {
        let (reply, result) = mpsc::sync_channel(1);
        let jobs = self.jobs.as_ref().ok_or_else(broken)?;
        jobs.send(Job { data, last, reply }).map_err(|_| broken())?;
        Ok(result)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// A chunk's piece, from the cache when it holds a verified one.
fn piece(
    codec: Compression,
    cache: Option<&ChunkCache>,
    data: &[u8],
    last: bool,
) -> io::Result<Piece> {
    match cache {
        Some(cache) => cache.get_or_compress(codec, data, last),
        None => codec.compress_chunk(data, last),
    }
}

pub(super) fn broken() -> io::Error {
    io::Error::other("a compression worker thread stopped")
}
