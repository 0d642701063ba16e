//! Parallel gzip, pigz's scheme: the input is cut into fixed 1 MiB
//! chunks, each deflated on a worker thread with the 32 KiB before it as
//! its dictionary and ended with a sync flush, and the pieces are written
//! in order between one gzip header and trailer. The bytes depend on the
//! level and the chunk size only, never on the number of threads; any
//! gzip reader reads them as one member.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use flate2::{Compress, Crc, FlushCompress, Status};

/// Input per chunk: small enough for every core to get work on a
/// package-sized stream, large enough that the chunk boundaries cost
/// almost nothing (a few bytes each).
const CHUNK: usize = 1 << 20;
/// deflate's window: what a chunk may refer back to.
const WINDOW: usize = 32 * 1024;

struct Job {
    dict: Arc<[u8]>,
    data: Vec<u8>,
    last: bool,
    reply: SyncSender<io::Result<Vec<u8>>>,
}

/// Worker threads taking chunks from one queue; started on the first
/// full chunk, so small inputs never start a thread.
struct Pool {
    jobs: Option<SyncSender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    fn new(threads: usize, level: u32) -> Pool {
        let (tx, rx) = mpsc::sync_channel::<Job>(threads);
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..threads)
            .map(|_| {
                let rx = Arc::clone(&rx);
                std::thread::spawn(move || loop {
                    let job = match rx.lock() {
                        Ok(guard) => guard.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    let out = deflate_chunk(level, &job.dict, &job.data, job.last);
                    let _ = job.reply.send(out);
                })
            })
            .collect();
        Pool {
            jobs: Some(tx),
            workers,
        }
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

/// A gzip writer (`gzip -n -<level>` header: no name, mtime 0, Unix)
/// compressing on `threads` workers; call [`ParGz::finish`].
pub struct ParGz<W: Write> {
    inner: W,
    level: u32,
    threads: usize,
    header: bool,
    chunk: Vec<u8>,
    dict: Arc<[u8]>,
    crc: Crc,
    pool: Option<Pool>,
    pending: VecDeque<Receiver<io::Result<Vec<u8>>>>,
}

impl<W: Write> ParGz<W> {
    pub fn new(inner: W, level: u32, threads: usize) -> ParGz<W> {
        ParGz {
            inner,
            level: level.min(9),
            threads: threads.max(1),
            header: false,
            chunk: Vec::with_capacity(CHUNK),
            dict: Arc::from(Vec::new()),
            crc: Crc::new(),
            pool: None,
            pending: VecDeque::new(),
        }
    }

    /// Compresses what is left, writes the trailer and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.submit(true)?;
        while !self.pending.is_empty() {
            self.write_oldest()?;
        }
        let mut trailer = [0u8; 8];
        trailer[..4].copy_from_slice(&self.crc.sum().to_le_bytes());
        trailer[4..].copy_from_slice(&self.crc.amount().to_le_bytes());
        self.inner.write_all(&trailer)?;
        self.pool = None;
        Ok(self.inner)
    }

    fn write_header(&mut self) -> io::Result<()> {
        if !self.header {
            // XFL as gzip sets it: 2 for -9, 4 for -1.
            let xfl = match self.level {
                9 => 2,
                1 => 4,
                _ => 0,
            };
            self.inner
                .write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 3])?;
            self.header = true;
        }
        Ok(())
    }

    /// Hands the current chunk to a worker (or compresses it here when it
    /// is the whole input).
    fn submit(&mut self, last: bool) -> io::Result<()> {
        self.write_header()?;
        let data = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK));
        let dict = std::mem::replace(
            &mut self.dict,
            Arc::from(&data[data.len().saturating_sub(WINDOW)..]),
        );
        if last && self.pool.is_none() {
            let out = deflate_chunk(self.level, &dict, &data, true)?;
            return self.inner.write_all(&out);
        }
        let (threads, level) = (self.threads, self.level);
        let pool = self.pool.get_or_insert_with(|| Pool::new(threads, level));
        let (reply, result) = mpsc::sync_channel(1);
        let jobs = pool.jobs.as_ref().ok_or_else(broken)?;
        jobs.send(Job {
            dict,
            data,
            last,
            reply,
        })
        .map_err(|_| broken())?;
        self.pending.push_back(result);
        // Bound the memory: at most two chunks in flight per worker.
        while self.pending.len() > 2 * self.threads {
            self.write_oldest()?;
        }
        Ok(())
    }

    fn write_oldest(&mut self) -> io::Result<()> {
        if let Some(rx) = self.pending.pop_front() {
            let out = rx.recv().map_err(|_| broken())??;
            self.inner.write_all(&out)?;
        }
        Ok(())
    }
}

impl<W: Write> Write for ParGz<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(CHUNK - self.chunk.len());
        self.chunk.extend_from_slice(&buf[..n]);
        self.crc.update(&buf[..n]);
        if self.chunk.len() == CHUNK {
            self.submit(false)?;
        }
        Ok(n)
    }

    /// Writes out the chunks already compressed; the current chunk stays
    /// (flushing it would change the bytes).
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn broken() -> io::Error {
    io::Error::other("a gzip worker thread stopped")
}

/// Raw deflate of `data` primed with `dict`, ending byte-aligned with a
/// sync flush, or with the final block when `last`. A fresh compressor
/// each time: zlib-rs (like zlib-ng) keeps match-finder state across
/// `reset`, so a reused one would make a chunk's bytes depend on the
/// chunks that worker compressed before, and so on the thread count.
fn deflate_chunk(level: u32, dict: &[u8], data: &[u8], last: bool) -> io::Result<Vec<u8>> {
    let c = &mut Compress::new(flate2::Compression::new(level), false);
    if !dict.is_empty() {
        c.set_dictionary(dict).map_err(io::Error::other)?;
    }
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    let mut out = Vec::with_capacity(data.len() / 4 + 1024);
    let start = c.total_in();
    loop {
        if out.capacity() - out.len() < 1024 {
            out.reserve(out.capacity());
        }
        let consumed = (c.total_in() - start) as usize;
        let status = c
            .compress_vec(&data[consumed..], &mut out, flush)
            .map_err(io::Error::other)?;
        let done_in = (c.total_in() - start) as usize == data.len();
        match status {
            Status::StreamEnd => break,
            // A sync flush is complete once it leaves output space unused.
            _ if !last && done_in && out.len() < out.capacity() => break,
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gz(data: &[u8], level: u32, threads: usize) -> Vec<u8> {
        let mut w = ParGz::new(Vec::new(), level, threads);
        for piece in data.chunks(70_001) {
            w.write_all(piece).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn reads_back_and_ignores_the_thread_count() {
        let data: Vec<u8> = (0..600_000u32)
            .flat_map(|i| format!("{} {}\n", i % 1013, i / 7).into_bytes())
            .collect();
        assert!(data.len() > 3 * CHUNK);
        let one = gz(&data, 6, 1);
        assert!(
            one == gz(&data, 6, 3),
            "bytes changed with the thread count"
        );
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&one[..])
            .read_to_end(&mut back)
            .unwrap();
        assert!(back == data);
        assert_eq!(&one[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
    }

    /// Text of a small alphabet from a fixed generator: long hash chains
    /// everywhere, and different in every chunk.
    fn small_alphabet(bytes: usize) -> Vec<u8> {
        let mut state = 1u64;
        (0..bytes)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                b"abcd ef\n"[(state >> 61) as usize]
            })
            .collect()
    }

    #[test]
    fn chunks_never_depend_on_what_a_worker_compressed_before() {
        let data = small_alphabet(8 * CHUNK);
        let one = gz(&data, 6, 1);
        assert!(one == gz(&data, 6, 2), "1 and 2 threads differ");
        assert!(one == gz(&data, 6, 5), "1 and 5 threads differ");
    }

    #[test]
    fn small_and_empty_inputs() {
        for data in [&b""[..], b"hello"] {
            let out = gz(data, 9, 4);
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&out[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data);
            assert_eq!(out[8], 2, "XFL of -9");
        }
    }
}
