//! Clang offload bundles as hipBLASLt ships its kernel files: an optional
//! `CCOB` compressed wrapper (versions 1 to 3, zstd or zlib), the
//! `__CLANG_OFFLOAD_BUNDLE__` table of entries, or a bare AMDGPU ELF.

use std::io::Read;

/// Magic of a compressed bundle.
pub const CCOB: &[u8; 4] = b"CCOB";
/// Magic of an uncompressed bundle.
pub(crate) const BUNDLE: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Magic of an ELF file.
pub const ELF: &[u8; 4] = b"\x7fELF";

/// llvm::compression::Format as the CCOB header stores it.
pub(crate) const ZLIB: u16 = 0;
pub(crate) const ZSTD: u16 = 1;

/// The most bytes a bundle may decompress to, whatever its header says: the
/// largest of Debian's hipBLASLt 7.1.1 is 171 MB.
pub(crate) const MAX_UNCOMPRESSED: u64 = 1 << 30;
/// The zstd level the rewritten frames are made at ([`Scratch::compress`]).
pub const ZSTD_LEVEL: i32 = 9;

/// What decompressing reuses from file to file: the output buffer and the
/// zstd context (its window buffers), so a library costs no fresh memory per file.
pub struct Scratch {
    pub out: Vec<u8>,
    dctx: zstd::zstd_safe::DCtx<'static>,
    /// The compression context, made on the first rewrite.
    cctx: Option<zstd::zstd_safe::CCtx<'static>>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            out: Vec::new(),
            dctx: zstd::zstd_safe::DCtx::create(),
            cctx: None,
        }
    }
}

impl Scratch {
    /// `out` as one zstd frame at the rewrite's level (long-distance
    /// matching on), its size stated, a window of at most 2^`window_log`
    /// (zstd makes it single-segment when that covers the whole content).
    pub(crate) fn compress(&mut self, window_log: u32, checksum: bool) -> Result<Vec<u8>, String> {
        use zstd::zstd_safe::{CCtx, CParameter, ResetDirective};
        let err = |code| format!("zstd: {}", zstd::zstd_safe::get_error_name(code));
        let cctx = self.cctx.get_or_insert_with(CCtx::create);
        cctx.reset(ResetDirective::SessionAndParameters)
            .map_err(err)?;
        for p in [
            CParameter::CompressionLevel(ZSTD_LEVEL),
            CParameter::WindowLog(window_log.max(10)),
            CParameter::EnableLongDistanceMatching(true),
            CParameter::ContentSizeFlag(true),
            CParameter::ChecksumFlag(checksum),
        ] {
            cctx.set_parameter(p).map_err(err)?;
        }
        cctx.set_pledged_src_size(Some(self.out.len() as u64))
            .map_err(err)?;
        let mut frame = Vec::new();
        frame
            .try_reserve_exact(zstd::zstd_safe::compress_bound(self.out.len()))
            .map_err(|e| format!("cannot allocate the compressed frame: {e}"))?;
        cctx.compress2(&mut frame, &self.out).map_err(err)?;
        Ok(frame)
    }
}

/// The `CCOB` header of a compressed bundle (LLVM `OffloadBundler.cpp`,
/// little-endian): version, method, the total file size (v2, v3), the
/// uncompressed size and the first 8 bytes of the MD5 of the uncompressed bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    /// [`ZLIB`] or [`ZSTD`].
    pub method: u16,
    /// The whole file's size, as v2 and v3 state it.
    pub(crate) total: Option<u64>,
    pub uncompressed: u64,
    /// The first 8 bytes of the MD5, as they lie in the file.
    pub(crate) hash: [u8; 8],
}

impl Header {
    /// The header's length in bytes for its version (where the frame starts).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        header_len(self.version).unwrap_or(0)
    }

    /// The header's bytes; an error when a size does not fit its field.
    pub(crate) fn to_bytes(self) -> Result<Vec<u8>, String> {
        let mut out = CCOB.to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend(self.method.to_le_bytes());
        let u32_of = |v: u64, what: &str| {
            u32::try_from(v).map_err(|_| {
                format!(
                    "{what} {v} does not fit the u32 field of a CCOB v{} header",
                    self.version
                )
            })
        };
        match self.version {
            1 => out.extend(u32_of(self.uncompressed, "uncompressed size")?.to_le_bytes()),
            2 => {
                out.extend(u32_of(self.total.unwrap_or(0), "file size")?.to_le_bytes());
                out.extend(u32_of(self.uncompressed, "uncompressed size")?.to_le_bytes());
            }
            3 => {
                out.extend(self.total.unwrap_or(0).to_le_bytes());
                out.extend(self.uncompressed.to_le_bytes());
            }
            v => return Err(format!("CCOB version {v} is not known (1 to 3 are)")),
        }
        out.extend(self.hash);
        Ok(out)
    }
}

fn header_len(version: u16) -> Option<usize> {
    match version {
        1 => Some(20),
        2 => Some(24),
        3 => Some(32),
        _ => None,
    }
}

/// Reads the `CCOB` header at the start of `bytes` and checks it against the
/// file: the stated total size, a known version and method, an uncompressed
/// size within [`MAX_UNCOMPRESSED`].
pub fn header(bytes: &[u8]) -> Result<Header, String> {
    let truncated = || format!("truncated CCOB header ({} bytes)", bytes.len());
    let field = |at: usize, n: usize| bytes.get(at..at + n).ok_or_else(truncated);
    let u16_at = |at| field(at, 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at =
        |at| field(at, 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64);
    let u64_at = |at| field(at, 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    if field(0, 4)? != CCOB {
        return Err("not a CCOB compressed bundle".to_owned());
    }
    let version = u16_at(4)?;
    let method = u16_at(6)?;
    // v1: size u32, hash u64; v2: total u32, size u32, hash u64; v3: total u64, size u64, hash u64.
    let (total, uncompressed, hash_at) = match version {
        1 => (None, u32_at(8)?, 12),
        2 => (Some(u32_at(8)?), u32_at(12)?, 16),
        3 => (Some(u64_at(8)?), u64_at(16)?, 24),
        v => return Err(format!("CCOB version {v} is not known (1 to 3 are)")),
    };
    let hash: [u8; 8] = field(hash_at, 8)?.try_into().expect("8 bytes");
    if method != ZLIB && method != ZSTD {
        return Err(format!(
            "CCOB compression method {method} is not known (0 zlib, 1 zstd)"
        ));
    }
    if let Some(total) = total {
        if total != bytes.len() as u64 {
            return Err(format!(
                "CCOB header says {total} bytes, the file has {} (truncated or padded)",
                bytes.len()
            ));
        }
    }
    if uncompressed > MAX_UNCOMPRESSED {
        return Err(format!(
            "CCOB header claims {uncompressed} uncompressed bytes, more than the {MAX_UNCOMPRESSED} a kernel file may hold"
        ));
    }
    Ok(Header {
        version,
        method,
        total,
        uncompressed,
        hash,
    })
}

/// The bytes inside a `CCOB` wrapper, decompressed into `scratch.out`: never
/// more than the header states (a frame that gives more, or less, is an error).
pub fn decompress(bytes: &[u8], scratch: &mut Scratch) -> Result<Header, String> {
    let header = header(bytes)?;
    let size = header.uncompressed;
    let Scratch { out, dctx, .. } = scratch;
    let payload = &bytes[header.len()..];
    out.clear();
    if header.method == ZSTD {
        let frame = frame_header(payload)?;
        if let Some(content) = frame.content_size {
            if content != size {
                return Err(format!(
                    "CCOB header says {size} uncompressed bytes, its zstd frame says {content}"
                ));
            }
        }
    }
    out.try_reserve_exact(size as usize)
        .map_err(|e| format!("cannot allocate {size} bytes to decompress into: {e}"))?;
    // One byte past the stated size tells a frame that expands further.
    let cap = size + 1;
    match header.method {
        ZSTD => {
            // in one pass into `out`, whose capacity is the stated size: no
            // window buffer beside it, and a frame that gives more stops there
            dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly)
                .map_err(|code| format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))?;
            out.clear();
            if let Err(code) = dctx.decompress(out, payload) {
                let name = zstd::zstd_safe::get_error_name(code);
                return Err(if name.contains("too small") {
                    format!("CCOB header says {size} uncompressed bytes, the frame gives more")
                } else {
                    format!("zstd frame: {name}")
                });
            }
        }
        _ => {
            flate2::read::ZlibDecoder::new(payload)
                .take(cap)
                .read_to_end(out)
                .map_err(|e| format!("zlib stream: {e}"))?;
        }
    }
    if out.len() as u64 != size {
        return Err(if out.len() as u64 > size {
            format!("CCOB header says {size} uncompressed bytes, the frame gives more")
        } else {
            format!(
                "CCOB header says {size} uncompressed bytes, the frame gave {}",
                out.len()
            )
        });
    }
    Ok(header)
}

/// What a zstd frame header says (RFC 8878 3.1.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The whole content is one segment: the decoder's window is the content size.
    pub single_segment: bool,
    /// The window a decoder must hold, in bytes.
    pub window: u64,
    pub(crate) content_size: Option<u64>,
    pub(crate) checksum: bool,
    pub(crate) dictionary: bool,
}

/// Parses the header of the zstd frame at the start of `bytes`.
pub fn frame_header(bytes: &[u8]) -> Result<Frame, String> {
    let truncated = || "zstd frame header truncated".to_owned();
    if bytes.get(..4) != Some(&[0x28, 0xb5, 0x2f, 0xfd][..]) {
        return Err("the CCOB payload is not a zstd frame (bad magic)".to_owned());
    }
    let fhd = *bytes.get(4).ok_or_else(truncated)?;
    let fcs_flag = fhd >> 6;
    let single_segment = fhd & 0x20 != 0;
    if fhd & 0x08 != 0 {
        return Err("zstd frame header has its reserved bit set".to_owned());
    }
    let checksum = fhd & 0x04 != 0;
    let did_len = [0, 1, 2, 4][(fhd & 3) as usize];
    let mut at = 5;
    let mut window = None;
    if !single_segment {
        let wd = *bytes.get(at).ok_or_else(truncated)?;
        let exponent = u32::from(wd >> 3);
        let base = 1u64 << (10 + exponent);
        window = Some(base + (base / 8) * u64::from(wd & 7));
        at += 1;
    }
    at += did_len;
    let fcs_len = match (fcs_flag, single_segment) {
        (0, true) => 1,
        (0, false) => 0,
        (1, _) => 2,
        (2, _) => 4,
        _ => 8,
    };
    let field = bytes.get(at..at + fcs_len).ok_or_else(truncated)?;
    let mut le = [0u8; 8];
    le[..fcs_len].copy_from_slice(field);
    let content_size =
        (fcs_len > 0).then(|| u64::from_le_bytes(le) + if fcs_len == 2 { 256 } else { 0 });
    let window = match window {
        Some(w) => w,
        None => content_size.ok_or_else(truncated)?,
    };
    Ok(Frame {
        single_segment,
        window,
        content_size,
        checksum,
        dictionary: did_len > 0,
    })
}

/// One entry of an offload bundle: its target triple and its bytes.
#[derive(Debug)]
pub struct Entry<'a> {
    pub triple: String,
    /// Where its bytes start in the uncompressed bundle.
    pub offset: usize,
    pub bytes: &'a [u8],
}

impl Entry<'_> {
    /// The GPU target of the triple (`gfx1201` of
    /// `hipv4-amdgcn-amd-amdhsa--gfx1201:xnack-`), if it names one.
    pub fn gfx(&self) -> Option<&str> {
        let last = self.triple.rsplit('-').next()?;
        let name = last.split(':').next()?;
        name.starts_with("gfx").then_some(name)
    }
}

/// The entries of an uncompressed offload bundle.
pub fn entries(bytes: &[u8]) -> Result<Vec<Entry<'_>>, String> {
    let u64_at = |at: usize| -> Result<u64, String> {
        bytes
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| format!("bundle table truncated at byte {at}"))
    };
    let count = u64_at(24)?;
    if count > 4096 {
        return Err(format!("bundle table claims {count} entries"));
    }
    let mut at = 32;
    let mut out = Vec::new();
    for _ in 0..count {
        let offset = u64_at(at)?;
        let size = u64_at(at + 8)?;
        let len = u64_at(at + 16)? as usize;
        at += 24;
        let triple = bytes
            .get(at..at.saturating_add(len))
            .ok_or_else(|| format!("bundle entry triple truncated at byte {at}"))?;
        at += len;
        let triple = String::from_utf8_lossy(triple).into_owned();
        let body = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(size).ok())
            .and_then(|(o, s)| bytes.get(o..o.checked_add(s)?))
            .ok_or_else(|| {
                format!("bundle entry {triple} ({size} bytes at {offset}) lies past the end")
            })?;
        out.push(Entry {
            triple,
            offset: offset as usize,
            bytes: body,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{bundle, ccob, elf, words, GFX1201};
    use super::*;

    fn file() -> Vec<u8> {
        let code = elf(GFX1201, &words(&[0xbfb0_0000]), &[0]);
        ccob(
            2,
            ZSTD,
            &bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1201", &code)]),
        )
    }

    #[test]
    fn sizes_that_lie_in_the_header_are_named() {
        let good = file();
        let mut scratch = Scratch::default();
        assert!(decompress(&good, &mut scratch).is_ok());
        // uncompressed size one less, one more, and huge
        for (size, says) in [
            (1000u32, "its zstd frame says"),
            (u32::MAX, "more than the"),
        ] {
            let mut bad = good.clone();
            bad[12..16].copy_from_slice(&size.to_le_bytes());
            let err = decompress(&bad, &mut scratch).unwrap_err();
            assert!(err.contains(says), "{size}: {err}");
        }
        // the total size
        let mut bad = good.clone();
        bad[8..12].copy_from_slice(&(good.len() as u32 + 1).to_le_bytes());
        assert!(decompress(&bad, &mut scratch)
            .unwrap_err()
            .contains("truncated or padded"));
        // v3 with a size near 2^64
        let mut v3 = ccob(3, ZSTD, b"__CLANG_OFFLOAD_BUNDLE__");
        v3[16..24].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        assert!(decompress(&v3, &mut scratch)
            .unwrap_err()
            .contains("more than the"));
        // truncated anywhere: an error, never a panic
        for len in 0..good.len() {
            assert!(decompress(&good[..len], &mut scratch).is_err());
        }
    }

    #[test]
    fn a_frame_that_expands_past_the_stated_size_stops_there() {
        // 64 MiB of zeros in a frame without a content size, under a header
        // that states 1000 bytes: read no further than 1001
        let zeros = vec![0u8; 64 << 20];
        let mut cctx = zstd::zstd_safe::CCtx::create();
        cctx.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))
            .unwrap();
        let mut frame = Vec::with_capacity(zstd::zstd_safe::compress_bound(zeros.len()));
        cctx.compress2(&mut frame, &zeros).unwrap();
        assert_eq!(frame_header(&frame).unwrap().content_size, None);
        let header = Header {
            version: 2,
            method: ZSTD,
            total: Some(24 + frame.len() as u64),
            uncompressed: 1000,
            hash: [0; 8],
        };
        let mut bomb = header.to_bytes().unwrap();
        bomb.extend(&frame);
        let mut scratch = Scratch::default();
        let err = decompress(&bomb, &mut scratch).unwrap_err();
        assert!(err.contains("the frame gives more"), "{err}");
        assert!(
            scratch.out.capacity() < 1 << 20,
            "{}",
            scratch.out.capacity()
        );
        // the same with zlib
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, &zeros).unwrap();
        let stream = z.finish().unwrap();
        let mut bomb = Header {
            method: ZLIB,
            total: Some(24 + stream.len() as u64),
            ..header
        }
        .to_bytes()
        .unwrap();
        bomb.extend(&stream);
        assert!(decompress(&bomb, &mut scratch)
            .unwrap_err()
            .contains("gives more"));
    }

    #[test]
    fn bundle_entries_past_the_end_are_named() {
        let code = elf(GFX1201, &words(&[0xbfb0_0000]), &[0]);
        let good = bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1201", &code)]);
        assert_eq!(entries(&good).unwrap()[0].bytes, &code[..]);
        // the entry's offset, its size, its triple's length near 2^64
        for (at, what) in [
            (32, "lies past the end"),
            (40, "lies past the end"),
            (48, "triple truncated"),
        ] {
            let mut bad = good.clone();
            bad[at..at + 8].copy_from_slice(&(u64::MAX - 4).to_le_bytes());
            let err = entries(&bad).unwrap_err();
            assert!(err.contains(what), "{at}: {err}");
        }
        // a count that claims too many
        let mut bad = good.clone();
        bad[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(entries(&bad).is_err());
        for len in 0..good.len() {
            let _ = entries(&good[..len]);
        }
    }

    #[test]
    fn frame_headers_are_read_as_rfc_8878_says() {
        let one = zstd::bulk::compress(&[7u8; 300], 3).unwrap();
        let f = frame_header(&one).unwrap();
        assert!(f.single_segment);
        assert_eq!((f.content_size, f.window), (Some(300), 300));
        assert!(frame_header(b"\x28\xb5\x2f").is_err());
        assert!(frame_header(b"PK\x03\x04").is_err());
    }
}
