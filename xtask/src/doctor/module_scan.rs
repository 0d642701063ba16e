//! A kernel module's ELF read as a stream, never held whole: its header,
//! its length, whether the u32 arrays doctor knows occur (4-byte aligned
//! from the start of the ELF, as a u32 array is) and the `.modinfo` values
//! it asks for. Memory stays at one chunk and a small overlap whatever the
//! module's size; every pattern is found across chunk borders.

use memchr::memmem;

/// Bytes kept from one chunk to the next: longer than any pattern and any
/// `.modinfo` value taken.
const OVERLAP: usize = 4096;
/// A `.modinfo` value is taken up to this many bytes.
const VALUE: usize = 1024;

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Bytes in all.
    pub(crate) len: u64,
    /// The first 64 bytes (the ELF header), or fewer when there are fewer.
    pub(crate) header: Vec<u8>,
    /// For each pattern asked, whether it occurs.
    pub(crate) found: Vec<bool>,
    /// For each `.modinfo` key asked, its first value.
    pub(crate) modinfo: Vec<Option<String>>,
}

impl Scan {
    /// A 64-bit little-endian ELF whose section headers lie inside it.
    pub(crate) fn check_elf(&self) -> Result<(), String> {
        let h = &self.header;
        if h.len() < 64 || !h.starts_with(b"\x7fELF") {
            return Err("no ELF header".to_owned());
        }
        if h[4] != 2 || h[5] != 1 {
            return Err("not a 64-bit little-endian ELF".to_owned());
        }
        let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
        let u16_at = |at: usize| u16::from_le_bytes(h[at..at + 2].try_into().expect("2 bytes"));
        let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a) as u64, u16_at(0x3c) as u64);
        let end = shoff.saturating_add(shentsize.saturating_mul(shnum));
        if shnum == 0 || end > self.len {
            return Err(format!(
                "its section headers end at byte {end} of {} (truncated?)",
                self.len
            ));
        }
        Ok(())
    }
}

/// Looks for u32 arrays (as little-endian bytes, each at most [`OVERLAP`]
/// long) and `.modinfo` keys in bytes fed to it chunk by chunk.
pub(crate) struct Scanner {
    patterns: Vec<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    window: Vec<u8>,
    /// Stream offset of `window[0]`.
    start: u64,
    scan: Scan,
}

impl Scanner {
    pub(crate) fn new(patterns: &[&[u32]], keys: &[&str]) -> Scanner {
        let patterns: Vec<Vec<u8>> = patterns
            .iter()
            .map(|p| p.iter().flat_map(|w| w.to_le_bytes()).collect())
            .collect();
        Scanner {
            scan: Scan {
                found: vec![false; patterns.len()],
                modinfo: vec![None; keys.len()],
                ..Scan::default()
            },
            patterns,
            // `\0key=`: a value starts a NUL-separated string
            keys: keys
                .iter()
                .map(|k| format!("\0{k}=").into_bytes())
                .collect(),
            window: Vec::new(),
            start: 0,
        }
    }

    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        let need = 64usize.saturating_sub(self.scan.header.len());
        self.scan
            .header
            .extend_from_slice(&chunk[..need.min(chunk.len())]);
        self.scan.len += chunk.len() as u64;
        self.window.extend_from_slice(chunk);
        let end = self.window.len().saturating_sub(OVERLAP);
        if end > 0 {
            self.search(end);
            self.window.drain(..end);
            self.start += end as u64;
        }
    }

    /// What was found in all that was fed.
    pub(crate) fn finish(mut self) -> Scan {
        self.search(self.window.len());
        self.scan
    }

    /// Matches that start in `window[..end]`; the window holds at least
    /// [`OVERLAP`] bytes past `end` unless the stream ended.
    fn search(&mut self, end: usize) {
        let w = &self.window;
        for (pattern, found) in self.patterns.iter().zip(&mut self.scan.found) {
            *found = *found
                || memmem::find_iter(w, pattern)
                    .take_while(|at| *at < end)
                    .any(|at| (self.start + at as u64).is_multiple_of(4));
        }
        for (key, value) in self.keys.iter().zip(&mut self.scan.modinfo) {
            if value.is_some() {
                continue;
            }
            if let Some(at) = memmem::find(w, key).filter(|at| *at < end) {
                let rest = &w[at + key.len()..];
                let rest = &rest[..rest.len().min(VALUE)];
                let text = rest.split(|b| *b == 0).next().unwrap_or(&[]);
                *value = Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_chunks(bytes: &[u8], chunk: usize) -> Scan {
        let mut s = Scanner::new(&[&[0xb0804009, 0xb8eef81a]], &["vermagic", "srcversion"]);
        for c in bytes.chunks(chunk) {
            s.feed(c);
        }
        s.finish()
    }

    #[test]
    fn patterns_and_values_are_found_across_chunk_borders() {
        let words: Vec<u8> = [0xb0804009u32, 0xb8eef81a]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        for pad in [0usize, 4, 4092, 4096, 65_532, 65_536, 200_000] {
            let mut bytes = vec![0u8; 64 + pad];
            bytes.extend(&words);
            bytes.extend(b"\0vermagic=6.14.0 SMP\0srcversion=ABC\0");
            for chunk in [1, 7, 4096, 65_536, 1 << 20] {
                let s = scan_in_chunks(&bytes, chunk);
                assert_eq!(s.found, [true], "pad {pad} chunk {chunk}");
                assert_eq!(s.modinfo[0].as_deref(), Some("6.14.0 SMP"));
                assert_eq!(s.modinfo[1].as_deref(), Some("ABC"));
                assert_eq!(s.len, bytes.len() as u64);
                assert_eq!(s.header.len(), 64);
            }
        }
    }

    #[test]
    fn a_misaligned_pattern_does_not_count_and_the_first_value_wins() {
        let mut bytes = vec![0u8; 65];
        bytes.extend(
            [0xb0804009u32, 0xb8eef81a]
                .iter()
                .flat_map(|w| w.to_le_bytes()),
        );
        bytes.extend(b"\0srcversion=FIRST\0srcversion=SECOND\0");
        bytes.extend(std::iter::repeat_n(b'x', 3 * VALUE));
        for chunk in [3, 4096, 1 << 20] {
            let s = scan_in_chunks(&bytes, chunk);
            assert_eq!(s.found, [false]);
            assert_eq!(s.modinfo, [None, Some("FIRST".to_owned())]);
        }
        // a value that never ends is cut at its bound
        let mut bytes = b"\0vermagic=".to_vec();
        bytes.extend(std::iter::repeat_n(b'v', 3 * VALUE));
        let s = scan_in_chunks(&bytes, 100);
        assert_eq!(s.modinfo[0].as_ref().map(String::len), Some(VALUE));
    }
}
