//! The amdgpu module `modprobe` would load for a kernel, read for what it
//! carries: found as modules.dep resolves it (else updates/ before extra/
//! before kernel/), decompressed (`.ko`, `.ko.xz`, `.ko.zst`, `.ko.gz`) and
//! scanned as a stream ([`super::module_scan`]: any size, bounded memory,
//! the decoders' own memory capped), and judged by its gfx12 CWSR trap
//! handler, the u32 array the module holds. Reads only, through
//! [`super::fsread`] (inside the root, bounded); a module that cannot be
//! read is a verdict with its reason, never a panic.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fsread::{self, Kind, Root, Unread};
pub(crate) use super::module_scan::Scan;
use super::module_scan::Scanner;

/// What the gfx12 CWSR trap handler of a module says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrapHandler {
    /// Saves and restores SCHED_MODE (the expert-scheduling fix).
    Fixed,
    /// The gfx12 handler from before the fix.
    Unfixed,
    /// No gfx12 trap handler at all: RDNA4 compute is unsupported.
    NoGfx12,
    /// The module could not be read, or holds a gfx12 handler doctor does
    /// not know; `why` says which.
    CannotTell,
}

/// The module file and what doctor read in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleFile {
    /// Its path from `/` (`/lib/modules/<kver>/updates/dkms/amdgpu.ko.xz`).
    pub(crate) path: String,
    /// sha256 of the file as it is on disk (compressed or not).
    pub sha256: Option<String>,
    pub trap_handler: TrapHandler,
    pub why: String,
    /// The module's own `srcversion`, to compare with the loaded one.
    pub(crate) srcversion: Option<String>,
}

/// The fixed gfx12 handler's first words: `s_getreg_b32` of hwreg 26
/// (SCHED_MODE) is the save the fix adds.
pub const FIXED: [u32; 4] = [0xbfa00001, 0xbfa002b2, 0xb0804009, 0xb8eef81a];
/// The unfixed gfx12 handler's words at the same place.
pub const UNFIXED: [u32; 3] = [0xbfa002a2, 0xb0804009, 0xb8f8f804];

/// The largest decompressed module doctor reads: amdgpu is ~40 MB
/// stripped and 655 MB built with debug info (6.18.3, Debian's config);
/// the bound keeps a bomb's time to a few seconds (memory is bounded by
/// the streaming whatever the size).
pub(crate) const MAX_SIZE: u64 = 1 << 30;
/// Folders below `updates/`, `extra/` and `kernel/` searched at most.
const SEARCH_DEPTH: usize = 16;

/// The amdgpu module file modprobe would load for `kernel`, below `root`
/// (a path from `root`, such as `lib/modules/<kver>/kernel/...`). Every path
/// stays inside the root: an absolute or `..` path of `modules.dep` is taken
/// below it, as modprobe in a chroot would. What stands in the way (a
/// `modules.dep` entry that is no file, a FIFO named like the module, a
/// symlink loop) goes to `unread`.
pub(crate) fn find(root: &Path, kernel: &str, unread: &mut Vec<Unread>) -> Option<PathBuf> {
    let fs = Root::new(root);
    let dir = Path::new("lib/modules").join(kernel);
    let dep = dir.join("modules.dep");
    match fs.read_text(&dep, fsread::LIST) {
        Ok(text) => {
            let from_dep = text.lines().find_map(|line| {
                let file = line.split(':').next()?.trim();
                let name = Path::new(file).file_name()?.to_str()?;
                is_amdgpu(name).then(|| dir.join(file))
            });
            if let Some(rel) = from_dep {
                match fs.meta(&rel) {
                    Ok(meta) if meta.kind == Kind::File => return Some(relative(&rel)),
                    Ok(meta) => unread.push(Unread {
                        path: fsread::shown(&rel),
                        why: format!(
                            "named by modules.dep, is {}, not a module file",
                            meta.kind.describe()
                        ),
                    }),
                    Err(u) => unread.push(Unread {
                        why: format!("named by modules.dep: {}", u.why),
                        ..u
                    }),
                }
            }
        }
        Err(u) if u.why == "does not exist" => {}
        Err(u) => unread.push(u),
    }
    let mut problems = Vec::new();
    for top in ["updates", "extra", "kernel"] {
        let walk = fs.walk(&dir.join(top), SEARCH_DEPTH, is_amdgpu);
        for entry in walk.found {
            match fs.meta(&entry.path) {
                Ok(meta) if meta.kind == Kind::File => return Some(relative(&entry.path)),
                Ok(meta) => problems.push(Unread {
                    path: fsread::shown(&entry.path),
                    why: format!("is {}, not a module file: not read", meta.kind.describe()),
                }),
                Err(u) => problems.push(u),
            }
        }
        problems.extend(
            walk.unread.into_iter().filter(|u| {
                !(u.why == "does not exist" && u.path == fsread::shown(&dir.join(top)))
            }),
        );
    }
    unread.extend(problems);
    None
}

/// A machine path without its leading `/`.
fn relative(path: &Path) -> PathBuf {
    path.strip_prefix("/").unwrap_or(path).to_path_buf()
}

fn is_amdgpu(name: &str) -> bool {
    matches!(
        name,
        "amdgpu.ko" | "amdgpu.ko.xz" | "amdgpu.ko.zst" | "amdgpu.ko.gz"
    )
}

/// Reads and judges the module at `rel` below `root`, as a stream: the
/// file hashed as it is read, decompressed and scanned chunk by chunk,
/// never held whole.
pub fn read(root: &Path, rel: &Path) -> ModuleFile {
    let path = format!("/{}", rel.display());
    let cannot = |why: String, sha256: Option<String>| ModuleFile {
        path: path.clone(),
        sha256,
        trap_handler: TrapHandler::CannotTell,
        why,
        srcversion: None,
    };
    let file = match Root::new(root).open(rel, fsread::MODULE) {
        Ok((file, _)) => file,
        Err(u) => return cannot(format!("cannot read {path}: {}", u.why), None),
    };
    let mut input = std::io::BufReader::with_capacity(
        1 << 16,
        Hashing {
            inner: file.take(fsread::MODULE),
            hasher: crate::shared::hash::Hasher::new(),
        },
    );
    let scanned = scan_from(&mut input, &path, MAX_SIZE);
    let rest = std::io::copy(&mut input, &mut std::io::sink());
    let sha256 = rest.ok().map(|_| input.into_inner().hasher.hex());
    let scan = match scanned {
        Ok(scan) => scan,
        Err(why) => return cannot(why, sha256),
    };
    if let Err(why) = scan.check_elf() {
        return cannot(
            format!("{path} is not a whole kernel module: {why}"),
            sha256,
        );
    }
    let (trap_handler, why) = judge_scan(&scan);
    ModuleFile {
        path: path.clone(),
        sha256,
        trap_handler,
        why: format!("{path}: {why}"),
        srcversion: scan.modinfo[1].clone(),
    }
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: crate::shared::hash::Hasher,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// The memory a decoder may take: xz's dictionary (the kernel compresses
/// modules with 1 MiB, `xz -9` takes 64 MiB) and zstd's window (its
/// default limit, 2^27).
const DECODER_MEMORY: u64 = 128 << 20;

/// The compression a module's file name promises: `xz`, `zstd`, `gzip` or
/// `none`.
fn codec_named(path: &str) -> &'static str {
    if path.ends_with(".xz") {
        "xz"
    } else if path.ends_with(".zst") {
        "zstd"
    } else if path.ends_with(".gz") {
        "gzip"
    } else {
        "none"
    }
}

/// The decompressed stream of a module file, its codec told by its magic;
/// the name's extension must agree with it.
pub(crate) fn decoder<'a>(
    input: &'a mut impl std::io::BufRead,
    path: &str,
) -> Result<Box<dyn Read + 'a>, String> {
    const XZ: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0];
    const ZSTD: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
    const GZIP: &[u8] = &[0x1f, 0x8b];
    let named = codec_named(path);
    let raw = input
        .fill_buf()
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    let found = if raw.starts_with(XZ) {
        "xz"
    } else if raw.starts_with(ZSTD) {
        "zstd"
    } else if raw.starts_with(GZIP) {
        "gzip"
    } else {
        "none"
    };
    if named != found {
        return Err(format!(
            "{path} is named for {named} compression but its bytes are {}",
            if found == "none" {
                "not compressed"
            } else {
                found
            }
        ));
    }
    Ok(match found {
        "xz" => {
            let stream = xz2::stream::Stream::new_stream_decoder(DECODER_MEMORY, 0)
                .map_err(|e| format!("{path}: cannot start an xz decoder: {e}"))?;
            Box::new(xz2::bufread::XzDecoder::new_stream(input, stream))
        }
        "zstd" => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(input)
                .map_err(|e| format!("{path} does not decompress as zstd: {e}"))?;
            decoder
                .window_log_max(DECODER_MEMORY.ilog2())
                .map_err(|e| format!("{path}: cannot start a zstd decoder: {e}"))?;
            Box::new(decoder)
        }
        "gzip" => Box::new(flate2::bufread::GzDecoder::new(input)),
        _ => Box::new(input),
    })
}

#[cfg(test)]
/// The module of `raw` (its file named `path`) decompressed and scanned.
pub(crate) fn scan(raw: &[u8], path: &str) -> Result<Scan, String> {
    scan_from(&mut &raw[..], path, MAX_SIZE)
}

/// [`scan`] reading from `input`, at most `cap` bytes decompressed.
fn scan_from(input: &mut impl std::io::BufRead, path: &str, cap: u64) -> Result<Scan, String> {
    let codec = codec_named(path);
    let mut decoded = decoder(input, path)?.take(cap + 1);
    let mut scanner = Scanner::new(&[&FIXED, &UNFIXED], &["vermagic", "srcversion"]);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = match decoded.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{path} does not decompress as {codec}: {e}")),
        };
        scanner.feed(&chunk[..n]);
    }
    let scan = scanner.finish();
    if scan.len > cap {
        return Err(format!(
            "{path} decompresses to more than {}, more than any kernel module: not read",
            crate::shared::report::human_size(cap)
        ));
    }
    Ok(scan)
}

#[cfg(test)]
/// The verdict on an ELF module's gfx12 CWSR trap handler.
pub(crate) fn judge(elf: &[u8]) -> (TrapHandler, String) {
    match scan(elf, "amdgpu.ko") {
        Ok(scan) => judge_scan(&scan),
        Err(why) => (TrapHandler::CannotTell, why),
    }
}

/// The verdict on what a scan of a module found.
fn judge_scan(scan: &Scan) -> (TrapHandler, String) {
    let (fixed, unfixed) = (scan.found[0], scan.found[1]);
    let release = scan.modinfo[0]
        .as_deref()
        .and_then(|v| v.split_whitespace().next())
        .map(str::to_owned);
    match (fixed, unfixed) {
        (true, false) => (
            TrapHandler::Fixed,
            "its gfx12 CWSR trap handler saves and restores SCHED_MODE (expert scheduling): the fix is in".to_owned(),
        ),
        (false, true) => (
            TrapHandler::Unfixed,
            "its gfx12 CWSR trap handler does not save SCHED_MODE (expert scheduling): the fix is not in".to_owned(),
        ),
        (true, true) => (
            TrapHandler::CannotTell,
            "it holds both the fixed and the unfixed gfx12 trap handler".to_owned(),
        ),
        (false, false) => {
            let before_gfx12 = release
                .as_deref()
                .and_then(crate::input::kernel::KernelVersion::from_release)
                .is_some_and(|kv| kv < crate::input::kernel::KernelVersion(6, 11, 0));
            match (before_gfx12, &release) {
                (true, Some(r)) => (
                    TrapHandler::NoGfx12,
                    format!("built for {r}, it has no gfx12 CWSR trap handler: RDNA4 compute is unsupported there"),
                ),
                (_, Some(r)) => (
                    TrapHandler::CannotTell,
                    format!("built for {r}, it holds no gfx12 CWSR trap handler doctor knows"),
                ),
                (_, None) => (
                    TrapHandler::CannotTell,
                    "it has no vermagic and no gfx12 CWSR trap handler doctor knows".to_owned(),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf_with(words: &[u32], vermagic: &str) -> Vec<u8> {
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        for w in words {
            elf.extend(w.to_le_bytes());
        }
        elf.extend(format!("\0vermagic={vermagic} SMP mod_unload \0").as_bytes());
        while !elf.len().is_multiple_of(8) {
            elf.push(0);
        }
        let shoff = elf.len() as u64;
        elf[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&1u16.to_le_bytes());
        elf.extend([0u8; 64]);
        elf
    }

    #[test]
    fn the_signatures_decide() {
        let fixed = elf_with(&FIXED, "6.14.0-36-generic");
        assert_eq!(judge(&fixed).0, TrapHandler::Fixed);
        let mut words = vec![0xbfa00001];
        words.extend(UNFIXED);
        assert_eq!(judge(&elf_with(&words, "6.14.0")).0, TrapHandler::Unfixed);
        assert_eq!(
            judge(&elf_with(&[1, 2], "6.1.0-56-amd64")).0,
            TrapHandler::NoGfx12
        );
        let (verdict, why) = judge(&elf_with(&[1, 2], "6.19.0"));
        assert_eq!(verdict, TrapHandler::CannotTell);
        assert!(why.contains("6.19.0"), "{why}");
    }

    #[test]
    fn misaligned_words_do_not_count() {
        let mut elf = elf_with(&[], "6.14.0");
        let mut words = vec![0u8];
        words.extend(FIXED.iter().flat_map(|w| w.to_le_bytes()));
        elf.splice(64..64, words);
        assert_ne!(judge(&elf).0, TrapHandler::Fixed);
    }

    #[test]
    fn truncation_and_wrong_compression_are_reasons() {
        let elf = elf_with(&FIXED, "6.14.0");
        let check = |bytes: &[u8]| scan(bytes, "amdgpu.ko").unwrap().check_elf();
        assert!(check(&elf).is_ok());
        let err = check(&elf[..elf.len() - 10]).unwrap_err();
        assert!(err.contains("truncated"), "{err}");
        assert!(check(b"not an elf at all, just text that is long enough to look at").is_err());
        let err = scan(&elf, "/x/amdgpu.ko.xz").unwrap_err();
        assert!(
            err.contains("named for xz") && err.contains("not compressed"),
            "{err}"
        );
        let mut bad = vec![0xfd, b'7', b'z', b'X', b'Z', 0];
        bad.extend([0x55; 40]);
        let err = scan(&bad, "/x/amdgpu.ko.xz").unwrap_err();
        assert!(err.contains("does not decompress as xz"), "{err}");
    }

    #[test]
    fn decompression_stops_at_the_cap_in_every_format() {
        use std::io::Write;
        let elf = elf_with(&FIXED, "6.14.0");
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 1);
        xz.write_all(&elf).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&elf).unwrap();
        let cases = [
            ("amdgpu.ko.xz", xz.finish().unwrap()),
            ("amdgpu.ko.zst", zstd::encode_all(&elf[..], 1).unwrap()),
            ("amdgpu.ko.gz", gz.finish().unwrap()),
            ("amdgpu.ko", elf.clone()),
        ];
        let len = elf.len() as u64;
        for (name, bytes) in cases {
            let err = scan_from(&mut &bytes[..], name, len - 1).unwrap_err();
            assert!(err.contains("decompresses to more than"), "{err}");
            let whole = scan_from(&mut &bytes[..], name, len).unwrap();
            assert_eq!(whole.len, len, "{name}");
            assert_eq!(judge_scan(&whole).0, TrapHandler::Fixed, "{name}");
        }
    }

    /// A small xz stream whose block header declares an LZMA2 dictionary
    /// of `dict` (its one-byte encoding), the header's CRC32 made again.
    fn xz_declaring(dict: u8) -> Vec<u8> {
        use std::io::Write;
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 0);
        xz.write_all(&elf_with(&FIXED, "6.14.0")).unwrap();
        let mut bytes = xz.finish().unwrap();
        // stream header (12 bytes), then the block header: its size byte,
        // flags, filter flags (id 0x21, 1 props byte), padding, CRC32
        let size = (bytes[12] as usize + 1) * 4;
        let header = 12..12 + size;
        let props = bytes[header.clone()]
            .windows(2)
            .position(|w| w == [0x21, 0x01])
            .expect("the LZMA2 filter flags")
            + 12
            + 2;
        bytes[props] = dict;
        let mut crc = flate2::Crc::new();
        crc.update(&bytes[12..header.end - 4]);
        bytes[header.end - 4..header.end].copy_from_slice(&crc.sum().to_le_bytes());
        bytes
    }

    #[test]
    fn an_xz_dictionary_past_the_decoder_memory_is_refused() {
        // 1 MiB, as the kernel compresses modules: read
        let ok = scan(&xz_declaring(16), "amdgpu.ko.xz").unwrap();
        assert_eq!(judge_scan(&ok).0, TrapHandler::Fixed);
        // 1.5 GiB: a decoder that would fill that much is not started
        let err = scan(&xz_declaring(37), "amdgpu.ko.xz").unwrap_err();
        assert!(err.contains("does not decompress as xz"), "{err}");
    }
}
