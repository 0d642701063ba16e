//! gfx12 (RDNA4, gfx1200/gfx1201) machine code: where the instructions of
//! a code object's `.text` begin, and which of them switch expert
//! scheduling on. An instruction-length decoder, not a disassembler: it
//! knows each encoding's size and when a 32-bit literal or a DPP word
//! follows, and nothing else. Code that ends mid-instruction, an encoding
//! gfx12 does not have, or a kernel symbol that falls inside an
//! instruction is an error naming the offset, never a silent skip.
//!
//! The encodings (first dword; checked against `llvm-mc -mcpu=gfx1201
//! -show-encoding` and against `llvm-objdump`'s boundaries on Debian's
//! hipBLASLt kernels, see `tests/it/rewrite_real.rs`):
//!
//! | bits             | format   | dwords                                   |
//! |------------------|----------|------------------------------------------|
//! | `10111110 1`     | SOP1     | 1, +1 when ssrc0 = 255                   |
//! | `10111111 0`     | SOPC     | 1, +1 when ssrc0 or ssrc1 = 255          |
//! | `10111111 1`     | SOPP     | 1                                        |
//! | `1011`           | SOPK     | 1, +1 for s_setreg_imm32_b32 (op 0x13)   |
//! | `10`             | SOP2     | 1, +1 when a source = 255 or s_fmaak/s_fmamk_f32 |
//! | `0111111`        | VOP1     | 1, +1 literal or DPP (src0 255/250/233/234) |
//! | `0111110`        | VOPC     | as VOP1                                  |
//! | `0`              | VOP2     | as VOP1, +1 for v_fmaak/v_fmamk_f32/f16  |
//! | `110101`         | VOP3(SD) | 2, +1 literal (any source 255) or DPP    |
//! | `11001100`       | VOP3P    | as VOP3                                  |
//! | `11001101`       | VINTERP  | 2                                        |
//! | `110010`         | VOPD     | 2, +1 when src0X/src0Y = 255 or an FMAAK/FMAMK half |
//! | `110110`         | DS       | 2                                        |
//! | `111101`         | SMEM     | 2                                        |
//! | `111110`         | EXP      | 2                                        |
//! | `110001`         | VBUFFER  | 3                                        |
//! | `110100`         | VIMAGE   | 3                                        |
//! | `111001`         | VSAMPLE  | 3                                        |
//! | `111011 00/01/10`| VFLAT, VSCRATCH, VGLOBAL | 3                        |

use super::elf::{CodeObject, EXPERT_SCHED_ON, SETREG_SCHED_MODE};

/// The source operand value that means "a 32-bit literal follows".
const LITERAL: u32 = 255;
/// Source 0 values of the DPP forms (a DPP word follows): DPP16, DPP8, DPP8 with FI.
const DPP16: u32 = 250;
const DPP8: u32 = 233;
const DPP8_FI: u32 = 234;
/// Source 0 of SDWA, which gfx12 does not have.
const SDWA: u32 = 249;

/// The length in dwords of the instruction whose first dword is `w0` and
/// whose next dword is `w1` (0 when there is none: every encoding that
/// reads it is at least 2 dwords long, so the caller's bounds check names
/// the stream that ends there); 0 for an encoding gfx12 does not have
/// ([`unknown`] says which). Plain arithmetic, its helpers inlined: it
/// runs once per instruction of 4 GB of code, in test builds too.
pub(crate) fn length(w0: u32, w1: u32) -> usize {
    if w0 >> 30 == 0b10 {
        return salu_length(w0);
    }
    if w0 >> 31 == 0 {
        return vop_length(w0);
    }
    let top = w0 >> 26;
    // VOP3, VOP3SD; VOP3P (0xcc)
    if top == 0b110101 || w0 >> 24 == 0xcc {
        let src0 = w1 & 0x1ff;
        if src0 == DPP16 || src0 == DPP8 || src0 == DPP8_FI {
            return 3;
        }
        let literal =
            src0 == LITERAL || (w1 >> 9) & 0x1ff == LITERAL || (w1 >> 18) & 0x1ff == LITERAL;
        return 2 + literal as usize;
    }
    if w0 >> 24 == 0xcd {
        return 2; // VINTERP
    }
    // VOPD: opX bits 25..22, opY bits 21..17; FMAAK 1, FMAMK 2
    if top == 0b110010 {
        let opx = (w0 >> 22) & 0xf;
        let opy = (w0 >> 17) & 0x1f;
        let literal = w0 & 0x1ff == LITERAL
            || w1 & 0x1ff == LITERAL
            || opx == 1
            || opx == 2
            || opy == 1
            || opy == 2;
        return 2 + literal as usize;
    }
    // DS, SMEM, EXP
    if top == 0b110110 || top == 0b111101 || top == 0b111110 {
        return 2;
    }
    // VBUFFER, VIMAGE, VSAMPLE; VFLAT, VSCRATCH, VGLOBAL (0xec to 0xee)
    if top == 0b110001 || top == 0b110100 || top == 0b111001 {
        return 3;
    }
    if top == 0b111011 && (w0 >> 24) & 3 != 3 {
        return 3;
    }
    0
}

/// [`length`] of a SALU instruction (SOP1, SOPC, SOPP, SOPK, SOP2).
#[inline(always)]
fn salu_length(w0: u32) -> usize {
    let ssrc0 = w0 & 0xff;
    let ssrc1 = (w0 >> 8) & 0xff;
    let op = w0 >> 23;
    if op == 0x17d {
        return 1 + (ssrc0 == LITERAL) as usize; // SOP1
    }
    if op == 0x17e {
        return 1 + (ssrc0 == LITERAL || ssrc1 == LITERAL) as usize; // SOPC
    }
    if op == 0x17f {
        return 1; // SOPP
    }
    if w0 >> 28 == 0b1011 {
        // SOPK: only s_setreg_imm32_b32 carries a literal
        return 1 + ((w0 >> 23) & 0x1f == 0x13) as usize;
    }
    // SOP2; s_fmaak_f32 (0x45) and s_fmamk_f32 (0x46) always carry one
    let op = (w0 >> 23) & 0x7f;
    1 + (ssrc0 == LITERAL || ssrc1 == LITERAL || op == 0x45 || op == 0x46) as usize
}

/// [`length`] of a VOP1, VOPC or VOP2 instruction (0 for SDWA).
#[inline(always)]
fn vop_length(w0: u32) -> usize {
    let src0 = w0 & 0x1ff;
    if src0 == SDWA {
        return 0;
    }
    let op = w0 >> 25;
    // VOP2 v_fmamk_f32 0x2c, v_fmaak_f32 0x2d, v_fmamk_f16 0x37,
    // v_fmaak_f16 0x38 carry their constant as the one literal
    let extra = src0 == LITERAL
        || src0 == DPP16
        || src0 == DPP8
        || src0 == DPP8_FI
        || op == 0x2c
        || op == 0x2d
        || op == 0x37
        || op == 0x38;
    1 + extra as usize
}

/// Why [`length`] knows no instruction that starts with `w0`.
pub(crate) fn unknown(w0: u32) -> String {
    if w0 >> 31 == 0 && w0 & 0x1ff == SDWA {
        format!("an SDWA operand (src0 249, first dword 0x{w0:08x}), which gfx12 does not have")
    } else {
        format!("an encoding gfx12 does not have (first dword 0x{w0:08x})")
    }
}

/// `text` as little-endian dwords: borrowed when it lies aligned (a
/// decompressed bundle, an ELF read whole), copied otherwise.
fn dwords(text: &[u8]) -> std::borrow::Cow<'_, [u32]> {
    if cfg!(target_endian = "little") {
        // SAFETY: every bit pattern is a valid u32.
        let (head, words, tail) = unsafe { text.align_to::<u32>() };
        if head.is_empty() && tail.is_empty() {
            return std::borrow::Cow::Borrowed(words);
        }
    }
    std::borrow::Cow::Owned(
        text.chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

/// Walks `code`'s `.text` from its start, instruction by instruction; at
/// each calls `each(offset, dwords)` when `wanted(first dword, its length)`
/// says so (the test is a plain function so the loop stays tight). Checks
/// that every function symbol starts an instruction and that the last
/// instruction ends where `.text` does.
pub(crate) fn walk_where(
    code: &CodeObject,
    wanted: fn(&[u32]) -> bool,
    mut each: impl FnMut(usize, &[u32]),
) -> Result<(), String> {
    let text = code.text;
    let whole = text.len() / 4 * 4;
    let words = dwords(&text[..whole]);
    let words: &[u32] = &words;
    let n = words.len();
    let functions = &code.functions;
    let mut next_fn = functions.first().copied().unwrap_or(usize::MAX);
    let mut f = 0;
    let mut i = 0;
    while i < n {
        let w0 = words[i];
        let w1 = if i + 1 < n { words[i + 1] } else { 0 };
        let len = length(w0, w1);
        if len == 0 {
            return Err(format!(".text+0x{:x}: {}", i * 4, unknown(w0)));
        }
        let end = i + len;
        if end > n {
            return Err(format!(
                ".text+0x{:x}: ends mid-instruction ({} bytes from 0x{w0:08x}, .text has {})",
                i * 4,
                len * 4,
                text.len()
            ));
        }
        while next_fn < end * 4 {
            if next_fn != i * 4 {
                return Err(format!(
                    ".text+0x{:x}: the instruction (0x{w0:08x}, {} bytes) runs across the kernel symbol at .text+0x{next_fn:x}",
                    i * 4,
                    len * 4
                ));
            }
            f += 1;
            next_fn = if f < functions.len() {
                functions[f]
            } else {
                usize::MAX
            };
        }
        let insn = &words[i..end];
        if wanted(insn) {
            each(i * 4, insn);
        }
        i = end;
    }
    if whole != text.len() {
        return Err(format!(
            ".text+0x{whole:x}: ends mid-instruction (.text is {} bytes, not whole dwords)",
            text.len()
        ));
    }
    if next_fn != usize::MAX && next_fn > whole {
        return Err(format!(
            "the kernel symbol at .text+0x{next_fn:x} lies past the end of .text"
        ));
    }
    Ok(())
}

/// Calls `each(offset, dwords)` for every instruction of `code`'s `.text`.
pub(crate) fn walk(code: &CodeObject, each: impl FnMut(usize, &[u32])) -> Result<(), String> {
    walk_where(code, |_| true, each)
}

/// The instructions of a code object's `.text` one at a time, as
/// (offset, length in bytes), for a caller that reads another listing
/// beside them (`llvm::compare_disassembly`); the same decoder as
/// [`walk_where`], which also checks the kernel symbols.
pub(crate) struct Instructions<'a> {
    words: std::borrow::Cow<'a, [u32]>,
    tail: usize,
    i: usize,
    failed: bool,
}

impl<'a> Instructions<'a> {
    pub(crate) fn of(code: &'a CodeObject) -> Self {
        let whole = code.text.len() / 4 * 4;
        Instructions {
            words: dwords(&code.text[..whole]),
            tail: code.text.len() - whole,
            i: 0,
            failed: false,
        }
    }
}

impl Iterator for Instructions<'_> {
    type Item = Result<(usize, usize), String>;

    fn next(&mut self) -> Option<Self::Item> {
        let n = self.words.len();
        if self.failed || (self.i >= n && self.tail == 0) {
            return None;
        }
        let at = self.i * 4;
        let step = if self.i >= n {
            Err(format!(
                ".text+0x{at:x}: ends mid-instruction ({} bytes left)",
                self.tail
            ))
        } else {
            let w0 = self.words[self.i];
            let w1 = self.words.get(self.i + 1).copied().unwrap_or(0);
            match length(w0, w1) {
                0 => Err(format!(".text+0x{at:x}: {}", unknown(w0))),
                len if self.i + len > n => Err(format!(
                    ".text+0x{at:x}: ends mid-instruction ({} bytes from 0x{w0:08x})",
                    len * 4
                )),
                len => {
                    self.i += len;
                    Ok((at, len * 4))
                }
            }
        };
        self.failed = step.is_err();
        Some(step)
    }
}

#[cfg(test)]
/// The offsets in `.text` where instructions start.
pub(crate) fn boundaries(code: &CodeObject) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    walk(code, |at, _| out.push(at))?;
    Ok(out)
}

/// Whether `insn` is `s_setreg_imm32_b32 hwreg(26, 0, 2), 2`.
pub(crate) fn is_site(insn: &[u32]) -> bool {
    insn.len() == 2 && insn[0] == SETREG_SCHED_MODE && insn[1] == EXPERT_SCHED_ON
}

/// Offsets in `.text` of every `s_setreg_imm32_b32 hwreg(26, 0, 2), 2`,
/// found as instructions.
pub fn sched_mode_sites(code: &CodeObject) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    walk_where(code, is_site, |at, _| out.push(at))?;
    Ok(out)
}

#[cfg(test)]
/// The offset in `.text` of the first site, if any (the whole `.text` is
/// still walked: a stream that does not decode is an error, not "off").
pub(crate) fn first_sched_mode_site(code: &CodeObject) -> Result<Option<usize>, String> {
    Ok(sched_mode_sites(code)?.first().copied())
}

#[cfg(test)]
mod tests {
    use super::super::elf;
    use super::super::testing::{elf as make_elf, words, GFX1201};
    use super::*;

    /// Encodings from `llvm-mc -triple=amdgcn -mcpu=gfx1201 -show-encoding`
    /// (little-endian dwords) and their lengths in dwords.
    const KNOWN: &[(&str, &[u32])] = &[
        ("s_fmaak_f32 s0, s1, s2, 0x1234", &[0xa280_0201, 0x1234]),
        ("s_fmamk_f32 s0, s1, 0x1234, s2", &[0xa300_0201, 0x1234]),
        ("v_fmaak_f32 v0, v1, v2, 0x1234", &[0x5a00_0501, 0x1234]),
        ("v_fmamk_f16 v0, v1, 0x1234, v2", &[0x6e00_0501, 0x1234]),
        (
            "v_dual_fmaak_f32 :: v_dual_mov_b32",
            &[0xc850_0501, 0x0002_0104, 0x1234],
        ),
        (
            "v_dual_mov_b32 :: v_dual_fmamk_f32",
            &[0xca04_0104, 0x0300_0501, 0x1234],
        ),
        (
            "v_dual_mov_b32 v3, 0x1234 :: v_dual_mov_b32",
            &[0xca10_00ff, 0x0300_0101, 0x1234],
        ),
        ("s_setreg_imm32_b32 hwreg(26, 0, 2), 2", &[0xb980_081a, 2]),
        ("s_version 0x1234", &[0xb080_1234]),
        ("s_getreg_b32 s0, hwreg(26, 0, 2)", &[0xb880_081a]),
        ("global_load_b32 v0, v1, s[0:1]", &[0xee05_0000, 0, 1]),
        ("flat_load_b32 v0, v[1:2]", &[0xec05_007c, 0, 1]),
        (
            "scratch_load_b32 v0, v1, off",
            &[0xed05_007c, 0x0002_0000, 1],
        ),
        (
            "buffer_load_b32 v0, v1, s[0:3], null offen",
            &[0xc405_007c, 0x4080_0000, 1],
        ),
        (
            "image_load v[0:3], [v4, v5], s[0:7]",
            &[0xd3c0_0001, 0, 0x0504],
        ),
        (
            "image_sample v[0:3], [v4, v5], s[0:7], s[8:11]",
            &[0xe7c6_c001, 0x0400_0000, 0x0504],
        ),
        ("ds_load_b32 v0, v1", &[0xd8d8_0000, 1]),
        ("export mrt0 v0, v1, v2, v3", &[0xf800_000f, 0x0302_0100]),
        (
            "v_interp_p10_f32 v0, v1, v2, v3",
            &[0xcd00_0000, 0x040e_0501],
        ),
        ("s_load_b32 s0, s[0:1], 0x0", &[0xf400_0000, 0xf800_0000]),
        (
            "v_add_f32_e64 v0, v1, 0x1234",
            &[0xd503_0000, 0x0001_ff01, 0x1234],
        ),
        (
            "v_add_f32_e64_dpp quad_perm",
            &[0xd503_0000, 0x0002_04fa, 0xff00_e401],
        ),
        (
            "v_add_f32_e64_dpp dpp8",
            &[0xd503_0000, 0x0002_04e9, 0xfac6_8801],
        ),
        ("v_add_f32_dpp dpp8", &[0x0600_04e9, 0xfac6_8801]),
        ("v_add_f32_dpp quad_perm", &[0x0600_04fa, 0xff00_e401]),
        (
            "v_pk_add_f16 v0, v1, 0x1234",
            &[0xcc0f_4000, 0x1801_ff01, 0x1234],
        ),
        ("v_wmma_f32_16x16x16_f16", &[0xcc40_4008, 0x1c22_0900]),
        (
            "v_cmp_eq_u32_e32 vcc_lo, 0x1234, v0",
            &[0x7c94_00ff, 0x1234],
        ),
        (
            "v_add_co_u32 v0, s0, v1, 0x1234",
            &[0xd700_0000, 0x0001_ff01, 0x1234],
        ),
        ("s_mov_b64 s[0:1], 0x1234", &[0xbe80_01ff, 0x1234]),
        ("s_add_co_u32 s0, s1, 0x1234", &[0x8000_ff01, 0x1234]),
        ("s_cmp_eq_u32 s0, 0x1234", &[0xbf06_ff00, 0x1234]),
        (
            "v_fma_f32 v0, v1, v2, 0x1234",
            &[0xd613_0000, 0x03fe_0501, 0x1234],
        ),
        (
            "v_dot2_f32_f16_e64_dpp",
            &[0xcc13_4000, 0x1c0e_04fa, 0xff00_e401],
        ),
        (
            "v_cmp_eq_u32 vcc_lo, v1, v2 dpp8",
            &[0x7c94_04e9, 0xfac6_8801],
        ),
        ("v_mov_b32_e32 v0, 0x1234", &[0x7e00_02ff, 0x1234]),
        ("v_readfirstlane_b32 s0, v1", &[0x7e00_0501]),
        ("s_nop 0", &[0xbf80_0000]),
    ];

    #[test]
    fn lengths_agree_with_llvm_mc() {
        for (name, dwords) in KNOWN {
            let got = length(dwords[0], dwords.get(1).copied().unwrap_or(0));
            assert_eq!(got, dwords.len(), "{name}");
        }
    }

    #[test]
    fn a_site_inside_another_instructions_literal_is_not_a_site() {
        // v_mov_b32 v0, <literal = the setreg's first dword>; then 2 as a VOP2
        // instruction: the bytes of a site, at a dword boundary, but not one.
        let text = words(&[0x7e00_02ff, SETREG_SCHED_MODE, 2, 0xbfb0_0000]);
        let file = make_elf(GFX1201, &text, &[0]);
        let code = elf::parse(&file).unwrap();
        assert_eq!(sched_mode_sites(&code).unwrap(), Vec::<usize>::new());
        let needle = words(&[SETREG_SCHED_MODE, 2]);
        let by_bytes = memchr::memmem::find(code.text, &needle);
        assert_eq!(by_bytes, Some(4), "a byte search would see one");
        assert_eq!(boundaries(&code).unwrap(), vec![0, 8, 12]);
        // the same bytes after one instruction less: a site
        let text = words(&[SETREG_SCHED_MODE, 2, 0xbfb0_0000]);
        let file = make_elf(GFX1201, &text, &[0]);
        let code = elf::parse(&file).unwrap();
        assert_eq!(sched_mode_sites(&code).unwrap(), vec![0]);
        assert_eq!(first_sched_mode_site(&code).unwrap(), Some(0));
    }

    #[test]
    fn a_stream_that_ends_mid_instruction_is_an_error_naming_the_offset() {
        for text in [
            words(&[0xbf80_0000, SETREG_SCHED_MODE]), // literal missing
            words(&[0xbf80_0000, 0xee05_0000, 0]),    // VGLOBAL, 2 of 3 dwords
            words(&[0xbf80_0000, 0xd503_0000]),       // VOP3, 1 of 2
        ] {
            let file = make_elf(GFX1201, &text, &[0]);
            let code = elf::parse(&file).unwrap();
            let err = sched_mode_sites(&code).unwrap_err();
            assert!(
                err.contains(".text+0x4") && err.contains("mid-instruction"),
                "{err}"
            );
        }
        let mut odd = words(&[0xbf80_0000]);
        odd.push(0);
        let file = make_elf(GFX1201, &odd, &[0]);
        assert!(sched_mode_sites(&elf::parse(&file).unwrap()).is_err());
    }

    #[test]
    fn unknown_encodings_and_symbols_inside_instructions_are_errors() {
        for bad in [0xcf00_0000u32, 0xef00_0000, 0xfc00_0000, 0x7e00_02f9] {
            let file = make_elf(GFX1201, &words(&[0xbf80_0000, bad, 0, 0]), &[0]);
            let err = sched_mode_sites(&elf::parse(&file).unwrap()).unwrap_err();
            assert!(err.contains(".text+0x4"), "{bad:08x}: {err}");
        }
        // a kernel symbol at the literal of s_setreg_imm32_b32
        let file = make_elf(
            GFX1201,
            &words(&[SETREG_SCHED_MODE, 2, 0xbfb0_0000]),
            &[0, 4],
        );
        let err = sched_mode_sites(&elf::parse(&file).unwrap()).unwrap_err();
        assert!(err.contains("kernel symbol at .text+0x4"), "{err}");
    }
}
