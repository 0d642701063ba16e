//! Clang offload bundles as hipBLASLt ships its kernel files: an optional
//! `CCOB` compressed wrapper (versions 1 to 3, zstd or zlib), the
//! `__CLANG_OFFLOAD_BUNDLE__` table of entries, or a bare AMDGPU ELF.

use std::io::Read;

/// Magic of a compressed bundle.
pub const CCOB: &[u8; 4] = b"CCOB";
/// Magic of an uncompressed bundle.
pub const BUNDLE: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Magic of an ELF file.
pub const ELF: &[u8; 4] = b"\x7fELF";

/// llvm::compression::Format as the CCOB header stores it.
const ZLIB: u16 = 0;
const ZSTD: u16 = 1;

/// What decompressing reuses from file to file: the output buffer and the
/// zstd context (its window buffers), so a library costs no fresh memory per file.
pub struct Scratch {
    pub out: Vec<u8>,
    dctx: zstd::zstd_safe::DCtx<'static>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            out: Vec::new(),
            dctx: zstd::zstd_safe::DCtx::create(),
        }
    }
}

/// The bytes inside a `CCOB` wrapper, decompressed into `scratch.out`.
pub fn decompress(bytes: &[u8], scratch: &mut Scratch) -> Result<(), String> {
    let Scratch { out, dctx } = scratch;
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64)
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let truncated = || "truncated CCOB header".to_owned();
    let version = u16_at(4).ok_or_else(truncated)?;
    let method = u16_at(6).ok_or_else(truncated)?;
    // v1: size u32, hash u64; v2: total u32, size u32, hash u64; v3: total u64, size u64, hash u64.
    let (total, size, start) = match version {
        1 => (None, u32_at(8).ok_or_else(truncated)?, 20),
        2 => (
            Some(u32_at(8).ok_or_else(truncated)?),
            u32_at(12).ok_or_else(truncated)?,
            24,
        ),
        3 => (
            Some(u64_at(8).ok_or_else(truncated)?),
            u64_at(16).ok_or_else(truncated)?,
            32,
        ),
        v => return Err(format!("CCOB version {v} is not known (1 to 3 are)")),
    };
    if bytes.len() < start {
        return Err(truncated());
    }
    if let Some(total) = total {
        if total != bytes.len() as u64 {
            return Err(format!(
                "CCOB header says {total} bytes, the file has {} (truncated or padded)",
                bytes.len()
            ));
        }
    }
    if size > 1 << 34 {
        return Err(format!("CCOB header claims {size} uncompressed bytes"));
    }
    let payload = &bytes[start..];
    out.clear();
    out.reserve(size as usize);
    match method {
        ZSTD => {
            dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly)
                .map_err(|code| format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))?;
            zstd::stream::read::Decoder::with_context(payload, dctx)
                .read_to_end(out)
                .map_err(|e| format!("zstd frame: {e}"))?;
        }
        ZLIB => {
            flate2::read::ZlibDecoder::new(payload)
                .read_to_end(out)
                .map_err(|e| format!("zlib stream: {e}"))?;
        }
        m => return Err(format!("CCOB compression method {m} is not known")),
    }
    if out.len() as u64 != size {
        return Err(format!(
            "CCOB header says {size} uncompressed bytes, the frame gave {}",
            out.len()
        ));
    }
    Ok(())
}

/// One entry of an offload bundle: its target triple and its bytes.
#[derive(Debug)]
pub struct Entry<'a> {
    pub triple: String,
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
            bytes: body,
        });
    }
    Ok(out)
}
