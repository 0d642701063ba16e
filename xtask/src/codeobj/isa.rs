//! gfx12 (RDNA4) machine code: where the instructions of a code object's
//! `.text` begin, and which of them switch expert scheduling on.

use super::elf::{CodeObject, EXPERT_SCHED_ON, SETREG_SCHED_MODE};

/// Offsets in `.text` of every `s_setreg_imm32_b32 hwreg(26, 0, 2), 2`.
pub fn sched_mode_sites(code: &CodeObject) -> Result<Vec<usize>, String> {
    let mut needle = [0u8; 8];
    needle[..4].copy_from_slice(&SETREG_SCHED_MODE.to_le_bytes());
    needle[4..].copy_from_slice(&EXPERT_SCHED_ON.to_le_bytes());
    Ok(memchr::memmem::find_iter(code.text, &needle)
        .filter(|at| at % 4 == 0)
        .collect())
}

/// The offset in `.text` of the first site, if any.
pub fn first_sched_mode_site(code: &CodeObject) -> Result<Option<usize>, String> {
    Ok(sched_mode_sites(code)?.first().copied())
}
