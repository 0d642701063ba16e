//! Rewrites a GPU kernel file so that its gfx12 code never switches expert
//! scheduling on: each `s_setreg_imm32_b32 hwreg(26, 0, 2), 2` gets the
//! value 0, nothing else changes, and the container is rebuilt as the
//! original was (same bundle entries, same `CCOB` version and codec, right
//! sizes and hash, a zstd frame no decoder of the original would refuse).
//! Pure: bytes in, bytes out; it reads and writes no file.
//!
//! The contract, for the commands built on it:
//! - [`rewrite_file`] takes a kernel file's bytes and says [`Rewrite::NoGfx12`],
//!   [`Rewrite::NoSites`] (nothing to do: leave the file alone) or gives
//!   the new bytes with the sites it changed; [`rewrite_ungated_with`]
//!   leaves the gated sites ([`super::gate`]) as they are and says
//!   [`Rewrite::OnlyGated`] of a file that has no other;
//! - [`find_sites`] lists the sites still on in a file (what verify and
//!   doctor ask: after a rewrite it finds none);
//! - an `Err` names what is wrong with the file; the file is then to be left
//!   alone. Neither function panics or allocates without bound on any input.

use serde::Serialize;

use super::bundle::{self, Header, Scratch};
use super::elf::{self, EXPERT_SCHED_ON};
use super::gate::{self, Gate};
use super::isa;

/// The value written in place of [`EXPERT_SCHED_ON`]: SCHED_MODE 0, every
/// hardware dependency check on.
pub(crate) const SCHED_MODE_NORMAL: u32 = 0;

/// The largest window (log2) a rewritten frame uses, and no larger than
/// the original's: 27 is the window every zstd decoder accepts by default.
pub const ZSTD_WINDOW_LOG: u32 = 27;
/// How much larger than the original a rewritten file may be, in percent.
pub(crate) const MAX_GROWTH_PERCENT: u64 = 2;

/// One place where a gfx12 code object switches expert scheduling on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Site {
    /// The bundle entry's triple (`hipv4-amdgcn-amd-amdhsa--gfx1201`); for a
    /// bare ELF code object, its target (`gfx1201`).
    pub(crate) entry: String,
    /// Offset of the `s_setreg_imm32_b32` in that code object's `.text`.
    pub(crate) text_offset: u64,
    /// Offset of its 32-bit value in the uncompressed file (the bundle, or
    /// the ELF itself): the four bytes the rewrite changes.
    pub value_offset: u64,
    /// When it runs only if a kernel argument says so: on what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gate: Option<Gate>,
}

/// What [`rewrite_file`] made of a file.
#[derive(Debug)]
pub enum Rewrite {
    /// No gfx12 code object: nothing to do.
    NoGfx12,
    /// gfx12 code objects that never switch expert scheduling on.
    NoSites,
    /// Every site is gated and was kept ([`rewrite_ungated_with`]): the
    /// file is left alone.
    OnlyGated { sites: Vec<Site> },
    /// The new file's bytes, the sites changed (in file order) and the size
    /// of the uncompressed bundle (the file's own size when not compressed).
    Rewritten {
        bytes: Vec<u8>,
        sites: Vec<Site>,
        uncompressed: u64,
    },
}

/// The sites still on in a kernel file (empty when none, or when it holds
/// no gfx12 code).
pub(crate) fn find_sites(file: &[u8]) -> Result<Vec<Site>, String> {
    find_sites_with(file, &mut Scratch::default())
}

/// [`find_sites`] decompressing into `scratch`, whose memory is reused.
pub(crate) fn find_sites_with(file: &[u8], scratch: &mut Scratch) -> Result<Vec<Site>, String> {
    let plain = if file.starts_with(bundle::CCOB) {
        bundle::decompress(file, scratch)?;
        &scratch.out[..]
    } else {
        file
    };
    Ok(scan(plain)?.unwrap_or_default())
}

/// Rewrites one kernel file (see the module's contract).
pub(crate) fn rewrite_file(original: &[u8]) -> Result<Rewrite, String> {
    rewrite_file_with(original, &mut Scratch::default())
}

/// [`rewrite_file`] with `scratch`'s buffers and contexts reused.
pub fn rewrite_file_with(original: &[u8], scratch: &mut Scratch) -> Result<Rewrite, String> {
    rewrite_impl(original, scratch, false)
}

/// [`rewrite_file_with`] that rewrites only the sites that are not gated:
/// a gated site switches expert scheduling on only where the KFD supports
/// it (ABI 1.20, the trap-handler fix in), which is the fast path.
pub(crate) fn rewrite_ungated_with(
    original: &[u8],
    scratch: &mut Scratch,
) -> Result<Rewrite, String> {
    rewrite_impl(original, scratch, true)
}

fn rewrite_impl(
    original: &[u8],
    scratch: &mut Scratch,
    keep_gated: bool,
) -> Result<Rewrite, String> {
    let compressed = original.starts_with(bundle::CCOB);
    let header = if compressed {
        Some(bundle::decompress(original, scratch)?)
    } else {
        None
    };
    let plain = if compressed {
        &scratch.out[..]
    } else {
        original
    };
    let Some(mut sites) = scan(plain)? else {
        return Ok(Rewrite::NoGfx12);
    };
    if keep_gated {
        let (gated, ungated): (Vec<Site>, Vec<Site>) =
            sites.into_iter().partition(|s| s.gate.is_some());
        if ungated.is_empty() && !gated.is_empty() {
            return Ok(Rewrite::OnlyGated { sites: gated });
        }
        sites = ungated;
    }
    if sites.is_empty() {
        return Ok(Rewrite::NoSites);
    }
    let Some(header) = header else {
        let mut bytes = original.to_vec();
        patch(&mut bytes, &sites)?;
        return Ok(Rewrite::Rewritten {
            uncompressed: bytes.len() as u64,
            bytes,
            sites,
        });
    };
    patch(&mut scratch.out, &sites)?;
    let bytes = recompress(original, &header, scratch)?;
    Ok(Rewrite::Rewritten {
        bytes,
        sites,
        uncompressed: header.uncompressed,
    })
}

/// Writes [`SCHED_MODE_NORMAL`] at each site's value, checking it held
/// [`EXPERT_SCHED_ON`].
fn patch(plain: &mut [u8], sites: &[Site]) -> Result<(), String> {
    for site in sites {
        let at = site.value_offset as usize;
        let value = plain
            .get_mut(at..at + 4)
            .ok_or_else(|| format!("site value at {at} lies past the end"))?;
        if value != EXPERT_SCHED_ON.to_le_bytes() {
            return Err(format!("the value at {at} is not {EXPERT_SCHED_ON}"));
        }
        value.copy_from_slice(&SCHED_MODE_NORMAL.to_le_bytes());
    }
    Ok(())
}

/// The `CCOB` file around `scratch.out`: the original's version and codec,
/// the new hash, a frame within the original's window.
fn recompress(original: &[u8], header: &Header, scratch: &mut Scratch) -> Result<Vec<u8>, String> {
    use md5::Digest;
    let plain = &scratch.out[..];
    let digest = md5::Md5::digest(plain);
    let frame = match header.method {
        bundle::ZSTD => {
            let theirs = bundle::frame_header(&original[header.len()..])?;
            let window_log = if theirs.single_segment {
                // the whole content is the window: one no smaller than it
                ZSTD_WINDOW_LOG.min(log2_ceil(plain.len() as u64))
            } else {
                ZSTD_WINDOW_LOG.min(63 - theirs.window.leading_zeros())
            };
            let frame = scratch.compress(window_log, theirs.checksum)?;
            let ours = bundle::frame_header(&frame)?;
            if ours.window > theirs.window || (theirs.single_segment && !ours.single_segment) {
                return Err(format!(
                    "the rewritten zstd frame needs a {} byte window (single segment: {}), the original {} ({})",
                    ours.window, ours.single_segment, theirs.window, theirs.single_segment
                ));
            }
            frame
        }
        _ => {
            use std::io::Write;
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(plain)
                .and_then(|()| z.finish())
                .map_err(|e| format!("zlib: {e}"))?
        }
    };
    let mut new = Header {
        hash: digest[..8].try_into().expect("8 bytes"),
        ..*header
    };
    let total = (header.len() + frame.len()) as u64;
    if new.total.is_some() {
        new.total = Some(total);
    }
    let limit = original.len() as u64 + original.len() as u64 * MAX_GROWTH_PERCENT / 100;
    if total > limit {
        return Err(format!(
            "the rewritten file would be {total} bytes, more than {MAX_GROWTH_PERCENT}% over the original's {}",
            original.len()
        ));
    }
    let mut out = new.to_bytes()?;
    out.extend_from_slice(&frame);
    Ok(out)
}

fn log2_ceil(n: u64) -> u32 {
    64 - n.saturating_sub(1).leading_zeros()
}

/// The sites of an uncompressed kernel file (an offload bundle or a bare
/// ELF); `None` when it holds no gfx12 code object.
fn scan(plain: &[u8]) -> Result<Option<Vec<Site>>, String> {
    if plain.starts_with(bundle::ELF) {
        let code = elf::parse(plain)?;
        if !code.is_gfx12() {
            return Ok(None);
        }
        return sites_of(&code.gfx(), 0, plain, &code).map(Some);
    }
    if !plain.starts_with(bundle::BUNDLE) {
        return Err(
            "neither a CCOB compressed bundle, an offload bundle nor an ELF code object".to_owned(),
        );
    }
    let mut found = None;
    for entry in bundle::entries(plain)? {
        if !entry.gfx().is_some_and(|g| g.starts_with("gfx120")) {
            continue;
        }
        let code =
            elf::parse(entry.bytes).map_err(|e| format!("bundle entry {}: {e}", entry.triple))?;
        if !code.is_gfx12() {
            continue;
        }
        let sites = sites_of(&entry.triple, entry.offset, entry.bytes, &code)
            .map_err(|e| format!("bundle entry {}: {e}", entry.triple))?;
        found.get_or_insert_with(Vec::new).extend(sites);
    }
    Ok(found)
}

/// The sites of one gfx12 code object (the ELF `object`, parsed as
/// `code`) that starts at `base` of the file, each with its gate.
fn sites_of(
    entry: &str,
    base: usize,
    object: &[u8],
    code: &elf::CodeObject,
) -> Result<Vec<Site>, String> {
    let setregs = isa::sched_mode_sites(code)?;
    let gates = gate::of_sites(object, code, &setregs)?;
    Ok(setregs
        .into_iter()
        .zip(gates)
        .map(|(at, gate)| Site {
            entry: entry.to_owned(),
            text_offset: at as u64,
            value_offset: (base + code.text_offset + at + 4) as u64,
            gate: gate.ok(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{bundle, ccob, elf, words, GFX1100, GFX1201};
    use super::*;
    use crate::gpu::codeobj::elf::SETREG_SCHED_MODE;

    const HOST: &str = "host-x86_64-unknown-linux-gnu-";
    const GFX: &str = "hipv4-amdgcn-amd-amdhsa--gfx1201";

    /// s_nop 0; s_setreg_imm32_b32 hwreg(26,0,2), 2; s_endpgm; and again off.
    fn text_with_sites() -> Vec<u8> {
        words(&[
            0xbf80_0000,
            SETREG_SCHED_MODE,
            2,
            0xbf80_0000,
            SETREG_SCHED_MODE,
            0,
            0xbfb0_0000,
        ])
    }

    fn kernel_file(version: u16, method: u16) -> Vec<u8> {
        let code = elf(GFX1201, &text_with_sites(), &[0]);
        ccob(version, method, &bundle(&[(HOST, &[]), (GFX, &code)]))
    }

    #[test]
    fn each_site_gets_zero_and_nothing_else_changes() {
        for (version, method) in [
            (1, bundle::ZSTD),
            (2, bundle::ZSTD),
            (3, bundle::ZSTD),
            (2, bundle::ZLIB),
        ] {
            let original = kernel_file(version, method);
            let Rewrite::Rewritten {
                bytes,
                sites,
                uncompressed,
            } = rewrite_file(&original).unwrap()
            else {
                panic!("v{version} m{method}: nothing rewritten");
            };
            assert_eq!(sites.len(), 1);
            assert_eq!(sites[0].entry, GFX);
            assert_eq!(sites[0].text_offset, 4);
            let theirs = bundle::header(&original).unwrap();
            let ours = bundle::header(&bytes).unwrap();
            assert_eq!((ours.version, ours.method), (theirs.version, theirs.method));
            assert_eq!(ours.uncompressed, uncompressed);
            let mut scratch = Scratch::default();
            bundle::decompress(&original, &mut scratch).unwrap();
            let before = std::mem::take(&mut scratch.out);
            bundle::decompress(&bytes, &mut scratch).unwrap();
            let after = &scratch.out;
            use md5::Digest;
            assert_eq!(ours.hash, md5::Md5::digest(after)[..8]);
            assert_ne!(ours.hash, theirs.hash);
            let differing: Vec<usize> = (0..before.len())
                .filter(|&i| before[i] != after[i])
                .collect();
            assert_eq!(differing, vec![sites[0].value_offset as usize]);
            assert_eq!(after[differing[0]], 0);
            assert_eq!(find_sites(&bytes).unwrap(), vec![]);
            assert_eq!(find_sites(&original).unwrap(), sites);
            assert!(matches!(rewrite_file(&bytes).unwrap(), Rewrite::NoSites));
        }
    }

    #[test]
    fn no_gfx12_and_no_sites_are_told_apart() {
        let off = elf(GFX1201, &words(&[0xbf80_0000, 0xbfb0_0000]), &[0]);
        let other = elf(GFX1100, &text_with_sites(), &[0]);
        let file = ccob(2, bundle::ZSTD, &bundle(&[(HOST, &[]), (GFX, &off)]));
        assert!(matches!(rewrite_file(&file).unwrap(), Rewrite::NoSites));
        let file = ccob(
            2,
            bundle::ZSTD,
            &bundle(&[(HOST, &[]), ("hipv4-amdgcn-amd-amdhsa--gfx1100", &other)]),
        );
        assert!(matches!(rewrite_file(&file).unwrap(), Rewrite::NoGfx12));
        assert!(matches!(rewrite_file(&other).unwrap(), Rewrite::NoGfx12));
    }

    #[test]
    fn a_bare_elf_and_an_uncompressed_bundle_are_rewritten_in_place() {
        let code = elf(GFX1201, &text_with_sites(), &[0]);
        let Rewrite::Rewritten { bytes, sites, .. } = rewrite_file(&code).unwrap() else {
            panic!("bare ELF not rewritten")
        };
        assert_eq!(sites[0].entry, "gfx1201");
        assert_eq!(bytes.len(), code.len());
        assert_eq!(find_sites(&bytes).unwrap(), vec![]);
        let plain = bundle(&[(HOST, &[]), (GFX, &code)]);
        let Rewrite::Rewritten { bytes, .. } = rewrite_file(&plain).unwrap() else {
            panic!("bundle not rewritten")
        };
        let changed = (0..plain.len()).filter(|&i| plain[i] != bytes[i]).count();
        assert_eq!(changed, 1);
    }

    #[test]
    fn a_single_segment_frame_stays_single_segment() {
        let original = kernel_file(2, bundle::ZSTD);
        let Rewrite::Rewritten { bytes, .. } = rewrite_file(&original).unwrap() else {
            panic!("nothing rewritten")
        };
        let theirs = bundle::frame_header(&original[24..]).unwrap();
        let ours = bundle::frame_header(&bytes[24..]).unwrap();
        assert!(theirs.single_segment && ours.single_segment);
        assert_eq!(ours.window, theirs.window);
        assert_eq!(ours.content_size, theirs.content_size);
    }
}
