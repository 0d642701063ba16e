//! Which registers a gfx12 instruction may write: its VGPR and SGPR
//! destinations and how many registers each spans, read from the
//! instruction's fields and per-opcode width tables. Over-approximates and
//! never under-approximates: a destination whose width depends on state
//! the instruction does not carry (M0-relative moves) writes "any". The
//! tables are LLVM's: `tests/it/codeobj_writes.rs` disassembles every
//! opcode of every encoding with `llvm-objdump` and holds them to it.
//!
//! Used by [`super::gate`] to follow a register back to where its value
//! came from; nothing here decodes what an instruction computes.

/// The registers one instruction may write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Writes {
    /// Up to two VGPR ranges (first, count); count 0 is none.
    pub(crate) vgpr: [(u16, u16); 2],
    /// One SGPR range (first, count); count 0 is none.
    pub(crate) sgpr: (u16, u16),
    /// A second SGPR range (the carry-out of VOP3SD).
    pub(crate) sgpr2: (u16, u16),
    /// Writes a VGPR it does not name (M0-relative).
    pub(crate) any_vgpr: bool,
    /// Writes an SGPR it does not name (M0-relative).
    pub(crate) any_sgpr: bool,
}

impl Writes {
    fn v(first: u32, count: u16) -> Writes {
        Writes {
            vgpr: [(first as u16, count), (0, 0)],
            ..Writes::default()
        }
    }

    fn s(first: u32, count: u16) -> Writes {
        Writes {
            sgpr: (first as u16, count),
            ..Writes::default()
        }
    }

    /// Whether VGPR `n` may be written.
    pub fn vgpr(&self, n: u16) -> bool {
        self.any_vgpr || self.vgpr.iter().any(|&(f, c)| c > 0 && n >= f && n < f + c)
    }

    /// Whether SGPR `n` may be written.
    pub fn sgpr(&self, n: u16) -> bool {
        let within = |(f, c): (u16, u16)| c > 0 && n >= f && n < f + c;
        self.any_sgpr || within(self.sgpr) || within(self.sgpr2)
    }
}

/// SOP1 opcodes that write a 64-bit SGPR pair.
const SOP1_B64: &[u32] = &[
    0x01, 0x03, 0x05, 0x11, 0x13, 0x14, 0x1b, 0x1d, 0x1f, 0x21, 0x23, 0x25, 0x27, 0x29, 0x2b, 0x2d,
    0x2f, 0x31, 0x33, 0x35, 0x37, 0x41, 0x47, 0x49, 0x4d,
];
/// SOP1 opcodes without a destination (`s_setpc_b64`, the barriers, ...).
const SOP1_NO_DST: &[u32] = &[0x48, 0x4a, 0x4e, 0x4f, 0x51, 0x52, 0x57, 0x58];
/// SOP1 M0-relative writes (`s_movreld_b32`, `s_movreld_b64`).
const SOP1_RELATIVE: &[u32] = &[0x42, 0x43];
/// SOP2 opcodes that write a 64-bit SGPR pair.
const SOP2_B64: &[u32] = &[
    0x09, 0x0b, 0x0d, 0x17, 0x19, 0x1b, 0x1d, 0x1f, 0x21, 0x23, 0x25, 0x28, 0x29, 0x2b, 0x31, 0x53,
    0x54, 0x55,
];
/// VOP1 opcodes with a 64-bit VGPR result.
const VOP1_B64: &[u32] = &[
    0x04, 0x10, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x2f, 0x31, 0x34, 0x3d, 0x3e, 0x6e, 0x6f,
];
/// VOP1 M0-relative writes (`v_movreld`, `v_movrelsd`, `v_movrelsd_2`, `v_swaprel`).
const VOP1_RELATIVE: &[u32] = &[0x42, 0x44, 0x48, 0x68];
/// VOP2 opcodes with a 64-bit VGPR result.
const VOP2_B64: &[u32] = &[0x02, 0x06, 0x0d, 0x0e, 0x1f];
/// Native VOP3 opcodes (0x200 on) with a 64-bit VGPR result.
const VOP3_B64: &[u32] = &[
    0x214, 0x228, 0x238, 0x23a, 0x23b, 0x2fd, 0x2fe, 0x2ff, 0x32b, 0x32f, 0x33d, 0x33e, 0x341,
    0x342,
];
/// DS opcodes that write VGPRs, with the count.
const DS_WRITES: &[(u32, u16)] = &[
    (0x20, 1),
    (0x21, 1),
    (0x22, 1),
    (0x23, 1),
    (0x24, 1),
    (0x25, 1),
    (0x26, 1),
    (0x27, 1),
    (0x28, 1),
    (0x29, 1),
    (0x2a, 1),
    (0x2b, 1),
    (0x2c, 1),
    (0x2d, 1),
    (0x2e, 2),
    (0x2f, 2),
    (0x30, 1),
    (0x32, 1),
    (0x33, 1),
    (0x35, 1),
    (0x36, 1),
    (0x37, 2),
    (0x38, 2),
    (0x39, 1),
    (0x3a, 1),
    (0x3b, 1),
    (0x3c, 1),
    (0x60, 2),
    (0x61, 2),
    (0x62, 2),
    (0x63, 2),
    (0x64, 2),
    (0x65, 2),
    (0x66, 2),
    (0x67, 2),
    (0x68, 2),
    (0x69, 2),
    (0x6a, 2),
    (0x6b, 2),
    (0x6c, 2),
    (0x6d, 2),
    (0x6e, 4),
    (0x6f, 4),
    (0x70, 2),
    (0x72, 2),
    (0x73, 2),
    (0x76, 2),
    (0x77, 4),
    (0x78, 4),
    (0x79, 1),
    (0x7e, 2),
    (0xa2, 1),
    (0xa3, 1),
    (0xa4, 1),
    (0xa5, 1),
    (0xa6, 1),
    (0xa7, 1),
    (0xa8, 1),
    (0xa9, 1),
    (0xaa, 1),
    (0xab, 1),
    (0xb2, 1),
    (0xb3, 1),
    (0xfe, 3),
    (0xff, 4),
];

/// What the instruction `insn` (its dwords) may write.
pub fn writes(insn: &[u32]) -> Writes {
    let w0 = insn[0];
    let w1 = insn.get(1).copied().unwrap_or(0);
    if w0 >> 30 == 0b10 {
        return salu(w0);
    }
    if w0 >> 31 == 0 {
        return vop12(w0);
    }
    let top = w0 >> 26;
    match top {
        0b110101 => vop3(w0),
        0b110010 => vopd(w1),
        0b110110 => ds(w0, w1),
        0b111101 => smem(w0),
        0b111110 => Writes::default(), // EXP
        0b110001 => vmem(w0, w1, vbuffer_width),
        0b110100 | 0b111001 => Writes::v(w1 & 0xff, 5), // VIMAGE, VSAMPLE: up to 4 + TFE
        0b111011 => vmem(w0, w1, vflat_width),
        _ if w0 >> 24 == 0xcc => vop3p(w0),
        _ if w0 >> 24 == 0xcd => Writes::v(w0 & 0xff, 1), // VINTERP
        _ => Writes {
            any_vgpr: true,
            any_sgpr: true,
            ..Writes::default()
        },
    }
}

fn salu(w0: u32) -> Writes {
    let sdst = (w0 >> 16) & 0x7f;
    match w0 >> 23 {
        0x17d => {
            let op = (w0 >> 8) & 0xff;
            if SOP1_NO_DST.contains(&op) {
                Writes::default()
            } else if SOP1_RELATIVE.contains(&op) {
                Writes {
                    any_sgpr: true,
                    ..Writes::default()
                }
            } else {
                Writes::s(sdst, 1 + SOP1_B64.contains(&op) as u16)
            }
        }
        0x17e | 0x17f => Writes::default(), // SOPC (SCC), SOPP
        _ if w0 >> 28 == 0b1011 => match (w0 >> 23) & 0x1f {
            0x00 | 0x02 | 0x0f | 0x10 | 0x11 => Writes::s(sdst, 1),
            0x14 => Writes::s(sdst, 2), // s_call_b64
            _ => Writes::default(),
        },
        _ => Writes::s(sdst, 1 + SOP2_B64.contains(&((w0 >> 23) & 0x7f)) as u16),
    }
}

/// VOP1, VOP2 and VOPC (the 32-bit VALU encodings).
fn vop12(w0: u32) -> Writes {
    let vdst = (w0 >> 17) & 0xff;
    match w0 >> 25 {
        0x3e => Writes::default(), // VOPC: VCC or EXEC
        0x3f => {
            let op = (w0 >> 9) & 0xff;
            match op {
                0x00 => Writes::default(), // v_nop
                0x65 => {
                    let src0 = w0 & 0x1ff;
                    let mut w = Writes::v(vdst, 1);
                    if src0 >= 256 {
                        w.vgpr[1] = ((src0 - 256) as u16, 1);
                    }
                    w
                }
                _ => vop1_op(op, vdst),
            }
        }
        op => Writes::v(vdst, 1 + VOP2_B64.contains(&op) as u16),
    }
}

fn vop1_op(op: u32, vdst: u32) -> Writes {
    if op == 0x02 {
        return Writes::s(vdst, 1); // v_readfirstlane_b32
    }
    if VOP1_RELATIVE.contains(&op) {
        return Writes {
            any_vgpr: true,
            ..Writes::default()
        };
    }
    Writes::v(vdst, 1 + VOP1_B64.contains(&op) as u16)
}

fn vop3(w0: u32) -> Writes {
    let op = (w0 >> 16) & 0x3ff;
    let vdst = w0 & 0xff;
    let sdst = (w0 >> 8) & 0x7f;
    match op {
        // VOPC promoted: an SGPR mask (a pair in wave64)
        0x000..=0x07f => Writes::s(vdst, 2),
        0x080..=0x0ff => Writes::default(), // v_cmpx: EXEC
        0x120..=0x122 => Writes {
            sgpr: (sdst as u16, 2),
            ..Writes::v(vdst, 1)
        },
        0x100..=0x17f => Writes::v(vdst, 1 + VOP2_B64.contains(&(op - 0x100)) as u16),
        0x180..=0x1ff => vop1_op(op - 0x180, vdst),
        0x280..=0x289 | 0x360 => Writes::s(vdst, 1), // v_s_*, v_readlane_b32
        0x23d => Writes::v(vdst, 4),
        0x2fc..=0x302 => Writes {
            sgpr: (sdst as u16, 2),
            ..Writes::v(vdst, 1 + VOP3_B64.contains(&op) as u16)
        },
        _ => Writes::v(vdst, 1 + VOP3_B64.contains(&op) as u16),
    }
}

fn vop3p(w0: u32) -> Writes {
    let op = (w0 >> 16) & 0x7f;
    let count = match op {
        0x42 | 0x43 | 0x52 | 0x53 => 4,
        0x40..=0x5f => 8, // v_wmma_*, v_swmmac_*: the accumulator
        _ => 1,
    };
    Writes::v(w0 & 0xff, count)
}

fn vopd(w1: u32) -> Writes {
    let x = w1 >> 24;
    let y = (((w1 >> 17) & 0x7f) << 1) | ((x & 1) ^ 1);
    Writes {
        vgpr: [(x as u16, 1), (y as u16, 1)],
        ..Writes::default()
    }
}

fn ds(w0: u32, w1: u32) -> Writes {
    let op = (w0 >> 18) & 0xff;
    match DS_WRITES.iter().find(|(o, _)| *o == op) {
        Some(&(_, count)) => Writes::v(w1 >> 24, count),
        None => Writes::default(),
    }
}

fn smem(w0: u32) -> Writes {
    let sdata = (w0 >> 6) & 0x7f;
    let count = match (w0 >> 13) & 0x3f {
        0x00 | 0x10 => 1,
        0x01 | 0x11 => 2,
        0x02 | 0x12 => 4,
        0x03 | 0x13 => 8,
        0x04 | 0x14 => 16,
        0x05 | 0x15 => 3,
        0x08..=0x0b | 0x18..=0x1b => 1,
        0x21..=0x28 => 0, // s_dcache_inv, s_atc_probe*, s_prefetch_*
        _ => 16,
    };
    Writes::s(sdata, count)
}

/// VBUFFER, VFLAT, VGLOBAL and VSCRATCH: the VGPRs at `w1[7:0]`, as many
/// as `width(op)` says (0: a store).
fn vmem(w0: u32, w1: u32, width: fn(u32) -> u16) -> Writes {
    match width((w0 >> 14) & 0xff) {
        0 => Writes::default(),
        n => Writes::v(w1 & 0xff, n),
    }
}

/// VBUFFER: loads and atomics (an atomic with return writes its data
/// width; `cmpswap` is counted at its data width, which covers the return).
fn vbuffer_width(op: u32) -> u16 {
    match op {
        0x00 | 0x08 | 0x09 | 0x26 | 0x80 | 0x88 | 0x89 => 1,
        0x01 | 0x0a | 0x0b | 0x81 | 0x8a | 0x8b => 2,
        0x02 | 0x82 => 3,
        0x03 | 0x83 => 4,
        0x04..=0x07 | 0x0c..=0x0f | 0x18..=0x1d | 0x24 | 0x25 | 0x27 | 0x84..=0x87 => 0,
        0x8c..=0x8f => 0,
        _ => vflat_width(op),
    }
}

/// VFLAT, VGLOBAL, VSCRATCH (and the shared VBUFFER opcodes).
fn vflat_width(op: u32) -> u16 {
    match op {
        0x10..=0x14 | 0x1e..=0x23 | 0x28 => 1,
        0x15 | 0x58 => 2,
        0x16 => 3,
        0x17 | 0x57 => 4,
        0x53 => 32, // global_load_block
        0x18..=0x1d | 0x24 | 0x25 | 0x29 | 0x54 => 0,
        0x34 | 0x41 | 0x43..=0x4d | 0x73 => 2,
        0x42 => 4,
        0x33 | 0x35..=0x40 | 0x50..=0x52 | 0x56 | 0x59 | 0x5a => 1,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings from `llvm-mc -triple=amdgcn -mcpu=gfx1201 -show-encoding`.
    #[test]
    fn destinations_of_common_instructions() {
        let v = |w: &[u32], n| writes(w).vgpr(n);
        let s = |w: &[u32], n| writes(w).sgpr(n);
        // v_mov_b32_e32 v5, s47
        assert!(v(&[0x7e0a_022f], 5) && !v(&[0x7e0a_022f], 6));
        // v_readfirstlane_b32 s10, v20
        assert!(s(&[0x7e14_0514], 10) && !v(&[0x7e14_0514], 10));
        // s_load_b32 s47, s[0:1], 0x58 / s_load_b512 s[16:31], s[0:1], 0x0
        assert!(s(&[0xf400_0bc0, 0xf800_0058], 47));
        assert!(s(&[0xf400_8400, 0xf800_0000], 31) && !s(&[0xf400_8400, 0xf800_0000], 32));
        // s_add_co_u32 s0, s0, 16; s_mov_b64 s[4:5], s[0:1]
        assert!(s(&[0x8000_9000], 0) && !s(&[0x8000_9000], 1));
        assert!(s(&[0xbe84_0100], 5));
        // v_cmp_ge_i32_e64 vcc_lo, v5, 1 writes no VGPR
        assert!(!v(&[0xd446_006a, 0x0001_0305], 106));
        // v_wmma_f32_16x16x16_f16 v[8:15], ...
        assert!(v(&[0xcc40_4008, 0x1c22_2910], 15) && !v(&[0xcc40_4008, 0x1c22_2910], 16));
        // global_load_b128 v[8:11], v16, s[2:3]; global_store_b32 v16, v8, s[2:3]
        assert!(v(&[0xee05_c002, 8, 16], 11));
        assert!(!v(&[0xee06_8002, 0x0400_0000, 16], 8) && !v(&[0xee06_8002, 0x0400_0000, 16], 0));
        // ds_load_b128 v[8:11], v20 offset:16; ds_store_b32 v20, v8
        assert!(v(&[0xdbfc_0010, 0x0800_0014], 11));
        assert_eq!(writes(&[0xd834_0000, 0x0000_0814]), Writes::default());
        // v_dual_mov_b32 v10, v2 :: v_dual_mov_b32 v11, v5
        let d = writes(&[0xca10_0102, 0x0a0a_0105]);
        assert!(d.vgpr(10) && d.vgpr(11) && !d.vgpr(12));
        // s_setpc_b64 s[20:21] writes nothing
        assert_eq!(writes(&[0xbe80_4814]), Writes::default());
    }
}
