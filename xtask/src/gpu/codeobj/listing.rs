//! A code object's instructions as a list: where each starts, its dwords,
//! which function holds it, and the direct branches (SOPP) among them.
//! Built by the one walk of [`super::isa`]; read by the gate analysis.

use super::elf::CodeObject;
use super::regs::writes;

/// A code object's instructions in order: start offsets and the dwords.
pub(crate) struct Listing {
    words: Vec<u32>,
    /// Byte offsets of the instructions in `.text`.
    pub(crate) starts: Vec<u32>,
    /// Instruction indices where the function symbols start.
    functions: Vec<usize>,
}

impl Listing {
    /// Walks `code` once ([`super::isa::walk`]).
    pub(crate) fn of(code: &CodeObject) -> Result<Listing, String> {
        let mut starts = Vec::new();
        super::isa::walk(code, |at, _| starts.push(at as u32))?;
        let words = code
            .text
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let functions = code
            .functions
            .iter()
            .filter_map(|f| starts.binary_search(&(*f as u32)).ok())
            .collect();
        Ok(Listing {
            words,
            starts,
            functions,
        })
    }

    /// The dwords of instruction `i`.
    pub(crate) fn insn(&self, i: usize) -> &[u32] {
        let end = self
            .starts
            .get(i + 1)
            .map_or(self.words.len(), |e| *e as usize / 4);
        &self.words[self.starts[i] as usize / 4..end]
    }

    /// The index of the instruction that starts at `.text+offset`.
    pub(crate) fn index_of(&self, offset: usize) -> Option<usize> {
        u32::try_from(offset)
            .ok()
            .and_then(|o| self.starts.binary_search(&o).ok())
    }

    /// The instruction range of the function holding instruction `i`.
    pub(crate) fn function_of(&self, i: usize) -> Option<(usize, usize)> {
        let k = self.functions.partition_point(|f| *f <= i);
        let start = *self.functions.get(k.checked_sub(1)?)?;
        let end = self.functions.get(k).copied().unwrap_or(self.starts.len());
        Some((start, end))
    }

    /// The `(index, dwords)` of the instructions `lo..hi`.
    pub(crate) fn range(
        &self,
        (lo, hi): (usize, usize),
    ) -> impl DoubleEndedIterator<Item = (usize, &[u32])> {
        (lo..hi).map(move |j| (j, self.insn(j)))
    }
}

/// A SOPP branch (`s_branch`, `s_cbranch_*`): its opcode and signed
/// distance in dwords.
pub(crate) fn branch(insn: &[u32]) -> Option<(u32, i32)> {
    let w0 = insn[0];
    let op = (w0 >> 16) & 0x7f;
    (w0 >> 23 == 0x17f && (0x20..=0x26).contains(&op))
        .then_some((op, i32::from((w0 & 0xffff) as u16 as i16)))
}

/// Where a branch at `.text+at` that jumps `dwords` lands.
pub(crate) fn target(at: u32, dwords: i32) -> i64 {
    i64::from(at) + 4 + 4 * i64::from(dwords)
}

/// Whether `insn` may write VGPR `n` (`vgpr`) or SGPR `n`.
pub(crate) fn may_write(insn: &[u32], vgpr: bool, n: u16) -> bool {
    let w = writes(insn);
    if vgpr {
        w.vgpr(n)
    } else {
        w.sgpr(n)
    }
}
