//! Chunked compression: a payload is cut at entry boundaries into chunks
//! whose ends depend only on content, each chunk is compressed on its own
//! (a zstd frame, an xz block, a run of raw deflate) on a worker thread or
//! taken from the [`ChunkCache`], and the pieces are joined into one valid
//! stream. The bytes depend on the codec, its level and the payload only:
//! never on the thread count, the write sizes or what the cache holds.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Arc;

use flate2::Crc;

use super::chunk_cache::ChunkCache;
use super::compress::Compression;
use super::entry_write::EntryWrite;
use super::pool::{broken, threads, Pool, Reply, Spare};
use super::xz_blocks::{xz_footer, xz_index, XZ_HEADER};

/// Chunk sizes: a chunk ends after an entry once it holds `min` bytes and
/// the entry's hash says so (about once per `target` bytes), and always
/// after an entry once it holds `max`. An entry that would take a chunk
/// past `max` starts the next chunk instead, and one larger than `max` is
/// cut at multiples of `max` from its own start (so no chunk, and no
/// memory, grows past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub(crate) target: usize,
    pub(crate) min: usize,
    pub(crate) max: usize,
}

impl Sizes {
    pub(crate) const fn around(target: usize) -> Sizes {
        Sizes {
            target,
            min: target / 4,
            max: target + target / 2,
        }
    }
}

impl Sizes {
    /// The chunk sizes measured best for `compression` on the amdgpu tree.
    pub(crate) fn of(compression: Compression) -> Sizes {
        match compression {
            // deflate looks back 32 KiB: 1 MiB chunks cost 0.1%, 4 MiB
            // chunks nothing measurable.
            Compression::Gzip(_) | Compression::None => Sizes::around(4 << 20),
            // xz -2 looks back 2 MiB (-6: 8 MiB): 4 MiB chunks cost 4%,
            // 64 MiB ones save 0.6% and hold four times the memory.
            Compression::Xz(_) => Sizes::around(16 << 20),
            // The long-distance matches reach far (register headers repeat
            // across the tree): 8 MiB chunks cost 67%, 32 MiB 28%, 64 MiB
            // 9%, one chunk for all 0% but the whole payload in memory.
            Compression::Zstd(_) => Sizes::around(64 << 20),
        }
    }
}

/// A compressing writer that cuts its input into chunks at the entry
/// boundaries it is told of ([`Chunked::entry_end`]); call
/// [`Chunked::finish`].
pub struct Chunked<W: Write> {
    inner: W,
    codec: Compression,
    sizes: Sizes,
    cache: Option<ChunkCache>,
    threads: usize,
    buf: Vec<u8>,
    /// Where the current entry began in `buf`.
    entry_start: usize,
    header: bool,
    pieces: u64,
    crc: Crc,
    /// xz index records: (unpadded size, uncompressed size) per block.
    index: Vec<(u64, u64)>,
    pool: Option<Pool>,
    pending: VecDeque<Reply>,
    spare: Spare,
}

impl<W: Write> Chunked<W> {
    pub(crate) fn new(inner: W, codec: Compression, cache: Option<ChunkCache>) -> Chunked<W> {
        Chunked::with_sizes(inner, codec, Sizes::of(codec), cache)
    }

    pub(crate) fn with_sizes(
        inner: W,
        codec: Compression,
        sizes: Sizes,
        cache: Option<ChunkCache>,
    ) -> Chunked<W> {
        Chunked {
            inner,
            codec,
            sizes,
            cache,
            threads: threads(codec),
            buf: Vec::with_capacity(sizes.max),
            entry_start: 0,
            header: false,
            pieces: 0,
            crc: Crc::new(),
            index: Vec::new(),
            pool: None,
            pending: VecDeque::new(),
            spare: Spare::default(),
        }
    }

    /// An entry (a tar or cpio record with its content) ends here: the
    /// chunk may end with it.
    pub(crate) fn entry_end(&mut self) -> io::Result<()> {
        let len = self.buf.len();
        let entry = &self.buf[self.entry_start..];
        let cut = len >= self.sizes.max || (len >= self.sizes.min && chosen(entry, self.sizes));
        if cut {
            self.submit(false)?;
        }
        self.entry_start = self.buf.len();
        Ok(())
    }

    /// Compresses what is left, ends the stream and returns the writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        // The rest ends the stream; an empty stream is still one (empty)
        // zstd frame, and one final deflate block.
        let ended = !self.buf.is_empty() || self.pieces == 0;
        if ended {
            self.submit(true)?;
        }
        while !self.pending.is_empty() {
            self.write_oldest()?;
        }
        self.write_header()?;
        match self.codec {
            Compression::Gzip(_) => {
                // The final block (an empty one when a cut at `max` ended
                // the data), then CRC32 and size mod 2^32.
                let mut end = if ended { vec![] } else { vec![0x03, 0x00] };
                end.extend_from_slice(&self.crc.sum().to_le_bytes());
                end.extend_from_slice(&self.crc.amount().to_le_bytes());
                self.inner.write_all(&end)?;
            }
            Compression::Xz(_) => {
                let index = xz_index(&self.index);
                self.inner.write_all(&index)?;
                self.inner.write_all(&xz_footer(index.len()))?;
            }
            Compression::Zstd(_) | Compression::None => {}
        }
        self.pool = None;
        if let Some(cache) = &self.cache {
            cache.prune();
        }
        Ok(self.inner)
    }

    fn write_header(&mut self) -> io::Result<()> {
        if !self.header {
            match self.codec {
                Compression::Gzip(level) => {
                    // XFL as gzip sets it: 2 for -9, 4 for -1; OS Unix.
                    let xfl = match level {
                        9 => 2,
                        1 => 4,
                        _ => 0,
                    };
                    self.inner
                        .write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 3])?;
                }
                Compression::Xz(_) => self.inner.write_all(&XZ_HEADER)?,
                Compression::Zstd(_) | Compression::None => {}
            }
            self.header = true;
        }
        Ok(())
    }

    /// Hands the current chunk to a worker.
    fn submit(&mut self, last: bool) -> io::Result<()> {
        let data = std::mem::take(&mut self.buf);
        self.entry_start = 0;
        self.pieces += 1;
        if let Compression::Gzip(_) = self.codec {
            self.crc.update(&data);
        }
        let (threads, codec, cache) = (self.threads, self.codec, self.cache.clone());
        let spare = Arc::clone(&self.spare);
        let pool = self
            .pool
            .get_or_insert_with(|| Pool::new(threads, codec, cache, spare));
        let result = pool.submit(data, last)?;
        // Taken once a worker took this chunk: by then the one before it
        // may have left its buffer.
        self.buf = self.fresh_buf();
        self.pending.push_back(result);
        // Bound the memory: a chunk being filled, one per worker, and the
        // finished pieces waiting their turn.
        while self.pending.len() > self.threads {
            self.write_oldest()?;
        }
        Ok(())
    }

    /// An empty buffer for the next chunk, never grown by copying.
    fn fresh_buf(&self) -> Vec<u8> {
        let kept = self.spare.lock().ok().and_then(|mut slot| slot.take());
        match kept {
            Some(mut buf) => {
                buf.clear();
                buf
            }
            None => Vec::with_capacity(self.sizes.max),
        }
    }

    fn write_oldest(&mut self) -> io::Result<()> {
        if let Some(rx) = self.pending.pop_front() {
            let piece = rx.recv().map_err(|_| broken())??;
            self.write_header()?;
            if let Compression::Xz(_) = self.codec {
                if piece.uncompressed == 0 {
                    return Ok(());
                }
                self.index.push((piece.unpadded, piece.uncompressed));
            }
            self.inner.write_all(&piece.bytes)?;
        }
        Ok(())
    }
}

impl<W: Write> Write for Chunked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(self.sizes.max - self.buf.len());
        self.buf.extend_from_slice(&buf[..n]);
        if self.buf.len() == self.sizes.max {
            if self.entry_start > 0 {
                // An entry that does not fit in the rest of the chunk
                // starts the next one: the chunk ends with the entry
                // before, and the cuts inside a large entry fall at the
                // same places of it whatever comes before it.
                let head = self.buf[self.entry_start..].to_vec();
                self.buf.truncate(self.entry_start);
                self.submit(false)?;
                self.buf.extend_from_slice(&head);
            } else {
                // An entry larger than a chunk: cut inside it, at `max`.
                self.submit(false)?;
            }
        }
        Ok(n)
    }

    /// Writes out the pieces already compressed; the current chunk stays
    /// (ending it here would make the bytes depend on when flush is called).
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> EntryWrite for Chunked<W> {
    fn entry_end(&mut self) -> io::Result<()> {
        Chunked::entry_end(self)
    }
}

/// Whether a chunk ends after this entry: with probability about
/// `len / target`, decided by the CRC32 of the entry's first bytes (its
/// header, with the entry's name and size, and the start of its content),
/// so the same entry decides the same way wherever it is, and a payload is
/// not read twice to decide.
fn chosen(entry: &[u8], sizes: Sizes) -> bool {
    let mut crc = Crc::new();
    crc.update(&entry[..entry.len().min(4096)]);
    (crc.sum() as u128) * (sizes.target as u128) < (entry.len() as u128) << 32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Entries of varied sizes and contents from a fixed generator.
    fn entries(count: usize) -> Vec<Vec<u8>> {
        let mut state = 7u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        (0..count)
            .map(|i| {
                let len = (next() % 40_000) as usize + if i % 17 == 0 { 300_000 } else { 0 };
                let words = [&b"reg "[..], b"mmCP_", b"0x1f ", b"SHIFT\n", b"MASK "];
                let mut e = Vec::with_capacity(len);
                while e.len() < len {
                    e.extend_from_slice(words[(next() % 5) as usize]);
                }
                e
            })
            .collect()
    }

    const SMALL: Sizes = Sizes {
        target: 256 << 10,
        min: 64 << 10,
        max: 512 << 10,
    };

    fn pack(
        codec: Compression,
        entries: &[Vec<u8>],
        cache: Option<ChunkCache>,
        step: usize,
    ) -> Vec<u8> {
        let mut w = Chunked::with_sizes(Vec::new(), codec, SMALL, cache);
        for e in entries {
            for piece in e.chunks(step) {
                w.write_all(piece).unwrap();
            }
            w.entry_end().unwrap();
        }
        w.finish().unwrap()
    }

    fn unpack(codec: Compression, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match codec {
            Compression::None => out = bytes.to_vec(),
            Compression::Gzip(_) => {
                flate2::read::GzDecoder::new(bytes)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Compression::Xz(_) => {
                xz2::read::XzDecoder::new(bytes)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Compression::Zstd(_) => {
                zstd::stream::read::Decoder::new(bytes)
                    .unwrap()
                    .read_to_end(&mut out)
                    .unwrap();
            }
        }
        out
    }

    #[test]
    fn cold_warm_and_changed_builds_write_what_a_cold_build_writes() {
        let mut data = entries(60);
        let dir = tempfile::tempdir().unwrap();
        let cache = ChunkCache::new(dir.path().join("chunks"));
        for codec in [
            Compression::Gzip(6),
            Compression::Xz(1),
            Compression::Zstd(3),
        ] {
            let cold = pack(codec, &data, None, 65_536);
            let whole: Vec<u8> = data.concat();
            assert!(
                unpack(codec, &cold) == whole,
                "{codec:?} does not read back"
            );
            assert!(
                cold == pack(codec, &data, None, 7_777),
                "{codec:?} depends on write sizes"
            );
            let filling = pack(codec, &data, Some(cache.clone()), 65_536);
            assert!(
                filling == cold,
                "{codec:?}: a build filling the cache wrote other bytes"
            );
            let hits_before = cache.hits();
            let warm = pack(codec, &data, Some(cache.clone()), 65_536);
            assert!(warm == cold, "{codec:?}: a warm build wrote other bytes");
            assert!(
                cache.hits() > hits_before,
                "{codec:?}: the warm build hit nothing"
            );

            // One entry changes: the result is the cold result of the new input.
            data[30].extend_from_slice(b"one more line\n");
            let hits_before = cache.hits();
            let changed = pack(codec, &data, Some(cache.clone()), 65_536);
            assert!(
                changed == pack(codec, &data, None, 65_536),
                "{codec:?}: changed input, other bytes than cold"
            );
            assert!(
                cache.hits() - hits_before >= 2,
                "{codec:?}: one changed entry recompressed more than its chunk"
            );
        }
    }

    /// Where each zstd frame's content begins in the uncompressed stream.
    fn cuts(stream: &[u8]) -> Vec<usize> {
        let (mut at, mut rest, mut out) = (0, stream, Vec::new());
        while !rest.is_empty() {
            let n = zstd::zstd_safe::find_frame_compressed_size(rest).unwrap();
            let len = zstd::zstd_safe::get_frame_content_size(&rest[..n])
                .unwrap()
                .unwrap();
            out.push(at);
            at += len as usize;
            rest = &rest[n..];
        }
        out
    }

    #[test]
    fn one_changed_entry_moves_no_other_chunk_boundary() {
        let data = entries(120);
        let before = cuts(&pack(Compression::Zstd(1), &data, None, 65_536));
        assert!(before.len() > 5, "too few chunks to tell: {before:?}");
        let mut changed = data.clone();
        changed[50].extend_from_slice(b"x");
        let after = cuts(&pack(Compression::Zstd(1), &changed, None, 65_536));
        let at50: usize = data[..50].iter().map(Vec::len).sum();
        let end50 = at50 + data[50].len();
        let early = |v: &[usize]| v.iter().copied().filter(|&c| c <= at50).collect::<Vec<_>>();
        assert_eq!(
            early(&before),
            early(&after),
            "a cut before the change moved"
        );
        // After the chunk holding entry 50, every cut is where it was,
        // one byte later.
        let next = *before.iter().find(|&&c| c > end50 + SMALL.max).unwrap();
        let late = |v: &[usize], shift: usize| {
            v.iter()
                .copied()
                .filter(|&c| c >= next + shift)
                .map(|c| c - shift)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            late(&before, 0),
            late(&after, 1),
            "a cut after the change moved"
        );
    }

    #[test]
    fn the_thread_count_changes_no_byte() {
        let data = entries(40);
        for codec in [
            Compression::Gzip(6),
            Compression::Xz(0),
            Compression::Zstd(3),
        ] {
            let run = |threads: usize| {
                let mut w = Chunked::with_sizes(Vec::new(), codec, SMALL, None);
                w.threads = threads;
                for e in &data {
                    w.write_all(e).unwrap();
                    w.entry_end().unwrap();
                }
                w.finish().unwrap()
            };
            let one = run(1);
            assert!(
                one == run(2) && one == run(5),
                "{codec:?} changed with the thread count"
            );
        }
    }

    #[test]
    fn empty_streams_read_back() {
        for codec in [
            Compression::Gzip(9),
            Compression::Xz(6),
            Compression::Zstd(12),
        ] {
            let out = pack(codec, &[], None, 1);
            assert!(unpack(codec, &out).is_empty(), "{codec:?}");
        }
    }

    /// The compressed frames of a zstd stream.
    fn frames(stream: &[u8]) -> Vec<&[u8]> {
        let (mut rest, mut out) = (stream, Vec::new());
        while !rest.is_empty() {
            let n = zstd::zstd_safe::find_frame_compressed_size(rest).unwrap();
            out.push(&rest[..n]);
            rest = &rest[n..];
        }
        out
    }

    #[test]
    fn a_large_entry_is_compressed_the_same_whatever_comes_before_it() {
        let big = entries(40).concat();
        assert!(big.len() > 3 * SMALL.max);
        let codec = Compression::Zstd(3);
        let one = pack(codec, &[vec![b'a'; 1000], big.clone()], None, 65_536);
        let other = pack(codec, &[vec![b'b'; 1234], big.clone()], None, 65_536);
        let (one, other) = (frames(&one), frames(&other));
        assert_eq!(
            one.len(),
            1 + big.len().div_ceil(SMALL.max),
            "cuts: {:?}",
            one.len()
        );
        assert!(
            one[1..] == other[1..],
            "a change before a large entry changed the chunks holding it"
        );
    }

    #[test]
    fn a_large_entry_is_cut_at_max() {
        let big = vec![entries(40).concat()];
        assert!(big[0].len() > 3 * SMALL.max);
        let out = pack(Compression::Zstd(3), &big, None, 100_000);
        let starts = cuts(&out);
        assert_eq!(starts.len(), big[0].len().div_ceil(SMALL.max));
        assert!(starts.iter().all(|c| c % SMALL.max == 0), "{starts:?}");
        assert!(unpack(Compression::Zstd(3), &out) == big[0]);
    }
}
