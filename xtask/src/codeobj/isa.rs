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

/// The length in dwords of the instruction whose first dword is `w0` and
/// second (when there is one) `w1`; `None` for an encoding gfx12 lacks.
/// `w1` is asked for only when the encoding has a second dword.
pub fn length(w0: u32, w1: impl FnOnce() -> Option<u32>) -> Result<usize, &'static str> {
    let lit = |src: u32| usize::from(src == LITERAL);
    // SALU
    if w0 >> 30 == 0b10 {
        let ssrc0 = w0 & 0xff;
        let ssrc1 = (w0 >> 8) & 0xff;
        return Ok(match w0 >> 23 {
            0x17d => 1 + lit(ssrc0),                                        // SOP1
            0x17e => 1 + usize::from(ssrc0 == LITERAL || ssrc1 == LITERAL), // SOPC
            0x17f => 1,                                                     // SOPP
            _ if w0 >> 28 == 0b1011 => {
                // SOPK: only s_setreg_imm32_b32 carries a literal
                1 + usize::from((w0 >> 23) & 0x1f == 0x13)
            }
            _ => {
                // SOP2; s_fmaak_f32 (0x45) and s_fmamk_f32 (0x46) always carry one
                let op = (w0 >> 23) & 0x7f;
                1 + usize::from(ssrc0 == LITERAL || ssrc1 == LITERAL || op == 0x45 || op == 0x46)
            }
        });
    }
    // VOP1, VOPC, VOP2
    if w0 >> 31 == 0 {
        let src0 = w0 & 0x1ff;
        let extra = match src0 {
            LITERAL | DPP16 | DPP8 | DPP8_FI => 1,
            // SDWA (249) is gone in gfx12
            249 => return Err("an SDWA operand (src0 249), which gfx12 does not have"),
            _ => 0,
        };
        let mandatory = match w0 >> 25 {
            0x3f | 0x3e => false, // VOP1, VOPC
            // VOP2: v_fmamk_f32 0x2c, v_fmaak_f32 0x2d, v_fmamk_f16 0x37, v_fmaak_f16 0x38
            op => matches!(op, 0x2c | 0x2d | 0x37 | 0x38),
        };
        // a literal is shared: the fmamk/fmaak constant is the one literal
        return Ok(1 + extra.max(usize::from(mandatory)));
    }
    let second = |w1: Option<u32>| w1.ok_or("ends mid-instruction");
    match w0 >> 26 {
        // VOP3, VOP3SD
        0b110101 => vop3_length(second(w1())?),
        0b110011 => match w0 >> 24 {
            0xcc => vop3_length(second(w1())?), // VOP3P
            0xcd => Ok(2),                      // VINTERP
            _ => Err("an encoding gfx12 does not have (0xce/0xcf)"),
        },
        // VOPD: opX bits 25..22, opY bits 21..17; FMAAK 1, FMAMK 2
        0b110010 => {
            let w1 = second(w1())?;
            let opx = (w0 >> 22) & 0xf;
            let opy = (w0 >> 17) & 0x1f;
            let literal = w0 & 0x1ff == LITERAL
                || w1 & 0x1ff == LITERAL
                || matches!(opx, 1 | 2)
                || matches!(opy, 1 | 2);
            Ok(2 + usize::from(literal))
        }
        0b110110 | 0b111101 | 0b111110 => Ok(2), // DS, SMEM, EXP
        0b110001 | 0b110100 | 0b111001 => Ok(3), // VBUFFER, VIMAGE, VSAMPLE
        0b111011 if (w0 >> 24) & 3 != 3 => Ok(3), // VFLAT, VSCRATCH, VGLOBAL
        _ => Err("an encoding gfx12 does not have"),
    }
}

/// VOP3 and VOP3P: two dwords, then a DPP word or one literal.
fn vop3_length(w1: u32) -> Result<usize, &'static str> {
    let src = [w1 & 0x1ff, (w1 >> 9) & 0x1ff, (w1 >> 18) & 0x1ff];
    if matches!(src[0], DPP16 | DPP8 | DPP8_FI) {
        return Ok(3);
    }
    Ok(2 + usize::from(src.contains(&LITERAL)))
}

/// The instructions of a code object's `.text`, in order, walked from its
/// start: each as its offset and bytes, or the error that stops the walk.
/// Checks that every function symbol starts an instruction.
pub struct Instructions<'a> {
    text: &'a [u8],
    functions: &'a [usize],
    at: usize,
    failed: bool,
}

impl<'a> Instructions<'a> {
    pub fn of(code: &'a CodeObject) -> Self {
        Instructions {
            text: code.text,
            functions: &code.functions,
            at: 0,
            failed: false,
        }
    }

    fn step(&mut self) -> Result<(usize, &'a [u8]), String> {
        let text = self.text;
        let at = self.at;
        let dword = |at: usize| {
            text.get(at..at.checked_add(4)?)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        };
        let Some(w0) = dword(at) else {
            return Err(format!(
                ".text+0x{at:x}: ends mid-instruction ({} bytes left, .text is not whole dwords)",
                text.len() - at
            ));
        };
        let len = length(w0, || dword(at + 4))
            .map_err(|why| format!(".text+0x{at:x}: {why} (first dword 0x{w0:08x})"))?
            * 4;
        let end = at + len;
        if end > text.len() {
            return Err(format!(
                ".text+0x{at:x}: ends mid-instruction ({len} bytes from 0x{w0:08x}, .text has {})",
                text.len()
            ));
        }
        while let Some((&f, rest)) = self.functions.split_first() {
            if f >= end {
                break;
            }
            if f != at {
                return Err(format!(
                    ".text+0x{at:x}: the instruction (0x{w0:08x}, {len} bytes) runs across the kernel symbol at .text+0x{f:x}"
                ));
            }
            self.functions = rest;
        }
        self.at = end;
        Ok((at, &text[at..end]))
    }
}

impl<'a> Iterator for Instructions<'a> {
    type Item = Result<(usize, &'a [u8]), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.text.len() {
            return None;
        }
        let step = self.step();
        self.failed = step.is_err();
        Some(step)
    }
}

/// Calls `each(offset, bytes)` for every instruction of `code`'s `.text`.
pub fn walk(code: &CodeObject, mut each: impl FnMut(usize, &[u8])) -> Result<(), String> {
    for insn in Instructions::of(code) {
        let (at, bytes) = insn?;
        each(at, bytes);
    }
    Ok(())
}

/// The offsets in `.text` where instructions start.
pub fn boundaries(code: &CodeObject) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    walk(code, |at, _| out.push(at))?;
    Ok(out)
}

/// Whether `insn` is `s_setreg_imm32_b32 hwreg(26, 0, 2), 2`.
fn is_site(insn: &[u8]) -> bool {
    insn.len() == 8
        && insn[..4] == SETREG_SCHED_MODE.to_le_bytes()
        && insn[4..] == EXPERT_SCHED_ON.to_le_bytes()
}

/// Offsets in `.text` of every `s_setreg_imm32_b32 hwreg(26, 0, 2), 2`,
/// found as instructions.
pub fn sched_mode_sites(code: &CodeObject) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    walk(code, |at, insn| {
        if is_site(insn) {
            out.push(at);
        }
    })?;
    Ok(out)
}

/// The offset in `.text` of the first site, if any (the whole `.text` is
/// still walked: a stream that does not decode is an error, not "off").
pub fn first_sched_mode_site(code: &CodeObject) -> Result<Option<usize>, String> {
    let mut first = None;
    walk(code, |at, insn| {
        if first.is_none() && is_site(insn) {
            first = Some(at);
        }
    })?;
    Ok(first)
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
            let got = length(dwords[0], || dwords.get(1).copied());
            assert_eq!(got, Ok(dwords.len()), "{name}");
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
        assert_eq!(
            code.expert_sched_on(),
            Some(4),
            "the byte search would see one"
        );
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
