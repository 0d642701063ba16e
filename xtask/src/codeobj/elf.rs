//! AMDGPU ELF code objects: the GPU target from `e_flags`, the `.text`
//! section, and the search of `.text` for the instruction that switches
//! expert scheduling on.

/// EM_AMDGPU.
const EM_AMDGPU: u16 = 224;
/// EF_AMDGPU_MACH mask of `e_flags`.
const MACH_MASK: u32 = 0xff;

/// GPU targets by their EF_AMDGPU_MACH value (those hipBLASLt ships; each
/// checked against the `e_flags` of Debian's hipBLASLt 7.1.1 kernel files).
const MACHS: &[(u32, &str)] = &[
    (0x030, "gfx908"),
    (0x03f, "gfx90a"),
    (0x041, "gfx1100"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x04a, "gfx1151"),
    (0x04e, "gfx1201"),
];

/// `s_setreg_imm32_b32 hwreg(HW_REG_SCHED_MODE, 0, 2), 2`: SOPK (top nibble
/// 0xB), opcode 0x13 in bits 27..23, simm16 = 26 | 0 << 6 | (2 - 1) << 11,
/// the sdst field (bits 22..16) zero as the assembler writes it; the 32-bit
/// value follows.
pub const SETREG_SCHED_MODE: u32 = 0xb000_0000 | (0x13 << 23) | (26 | (1 << 11));
/// The SCHED_MODE value that switches expert scheduling on.
pub const EXPERT_SCHED_ON: u32 = 2;

/// The instruction and its value as they lie in `.text` (little-endian).
fn needle() -> [u8; 8] {
    let mut n = [0; 8];
    n[..4].copy_from_slice(&SETREG_SCHED_MODE.to_le_bytes());
    n[4..].copy_from_slice(&EXPERT_SCHED_ON.to_le_bytes());
    n
}

/// A parsed AMDGPU code object: its mach value and its `.text` bytes.
#[derive(Debug)]
pub struct CodeObject<'a> {
    pub mach: u32,
    pub text: &'a [u8],
}

impl CodeObject<'_> {
    /// The target name, or `mach 0x..` when it is not one of [`MACHS`].
    pub fn gfx(&self) -> String {
        MACHS
            .iter()
            .find(|(m, _)| *m == self.mach)
            .map_or(format!("mach 0x{:03x}", self.mach), |(_, n)| {
                (*n).to_owned()
            })
    }

    pub fn is_gfx12(&self) -> bool {
        matches!(self.mach, 0x048 | 0x04e)
    }

    /// The byte offset in `.text` of the first expert-scheduling switch.
    /// Instructions are dword-aligned: a match across two of them does not count.
    pub fn expert_sched_on(&self) -> Option<usize> {
        memchr::memmem::find_iter(self.text, &needle()).find(|at| at % 4 == 0)
    }
}

/// Parses a 64-bit little-endian AMDGPU ELF and finds its `.text`.
pub fn parse(bytes: &[u8]) -> Result<CodeObject<'_>, String> {
    let at = |off: usize, len: usize| -> Result<&[u8], String> {
        bytes
            .get(off..off.checked_add(len).ok_or("offset overflow")?)
            .ok_or_else(|| {
                format!(
                    "ELF truncated: {len} bytes at {off} lie past the end ({} bytes)",
                    bytes.len()
                )
            })
    };
    let u16_at = |off: usize| at(off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |off: usize| at(off, 4).map(|b| u32::from_le_bytes(b.try_into().expect("4")));
    let u64_at = |off: usize| at(off, 8).map(|b| u64::from_le_bytes(b.try_into().expect("8")));
    if at(0, 4)? != b"\x7fELF" {
        return Err("not an ELF file".to_owned());
    }
    if at(4, 2)? != [2, 1] {
        return Err("not a 64-bit little-endian ELF".to_owned());
    }
    let machine = u16_at(18)?;
    if machine != EM_AMDGPU {
        return Err(format!("ELF machine {machine} is not AMDGPU ({EM_AMDGPU})"));
    }
    let mach = u32_at(48)? & MACH_MASK;
    let shoff = u64_at(40)? as usize;
    let shentsize = u16_at(58)? as usize;
    let shnum = u16_at(60)? as usize;
    let shstrndx = u16_at(62)? as usize;
    if shentsize < 64 || shnum == 0 || shstrndx >= shnum {
        return Err(format!(
            "ELF section table is not usable (entry size {shentsize}, {shnum} sections, names in {shstrndx})"
        ));
    }
    let section = |i: usize| -> Result<(u32, usize, usize), String> {
        let base = shoff + i * shentsize;
        Ok((
            u32_at(base)?,
            u64_at(base + 24)? as usize,
            u64_at(base + 32)? as usize,
        ))
    };
    let (_, names_off, names_len) = section(shstrndx)?;
    let names = at(names_off, names_len)?;
    for i in 0..shnum {
        let (name, off, len) = section(i)?;
        let name = names.get(name as usize..).unwrap_or_default();
        if name.starts_with(b".text\0") {
            return Ok(CodeObject {
                mach,
                text: at(off, len)?,
            });
        }
    }
    Err("ELF has no .text section".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn the_switch_is_the_documented_encoding() {
        // simm16 0x081a: hwreg 26, offset 0, size 2.
        assert_eq!(SETREG_SCHED_MODE, 0xb980_081a);
    }

    #[test]
    fn only_the_word_pair_at_an_instruction_boundary_counts() {
        let on = text(&[0xbf80_0000, SETREG_SCHED_MODE, 2, 0xbfb0_0000]);
        let code = CodeObject {
            mach: 0x04e,
            text: &on,
        };
        assert_eq!(code.expert_sched_on(), Some(4));
        // value 0 (off), another hwreg (25), size 1, or a misaligned copy: no.
        for words in [
            vec![SETREG_SCHED_MODE, 0],
            vec![SETREG_SCHED_MODE - 1, 2],
            vec![SETREG_SCHED_MODE & !(1 << 11), 2],
        ] {
            let bytes = text(&words);
            assert_eq!(
                CodeObject {
                    mach: 0x04e,
                    text: &bytes
                }
                .expert_sched_on(),
                None
            );
        }
        let mut shifted = vec![0u8; 2];
        shifted.extend(text(&[SETREG_SCHED_MODE, 2]));
        assert_eq!(
            CodeObject {
                mach: 0x04e,
                text: &shifted
            }
            .expert_sched_on(),
            None
        );
        // a misaligned copy before an aligned one: the aligned one is found.
        shifted.extend([0, 0]);
        shifted.extend(text(&[SETREG_SCHED_MODE, 2]));
        let found = CodeObject {
            mach: 0x048,
            text: &shifted,
        }
        .expert_sched_on();
        assert_eq!(found, Some(12));
    }
}
