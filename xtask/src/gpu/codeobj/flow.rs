//! The data flow behind a gate ([`super::gate`]): what a compare before a
//! conditional branch lets run, which SGPRs a kernel loads one kernel
//! argument into, and whether a register's value comes from them. Plain
//! reads of instruction fields, in address order.

use std::collections::BTreeSet;

use super::listing::{may_write, Listing};

/// A register: VGPR or SGPR number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reg {
    V(u16),
    S(u16),
}

impl std::fmt::Display for Reg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reg::V(n) => write!(f, "v{n}"),
            Reg::S(n) => write!(f, "s{n}"),
        }
    }
}

/// An operand of a compare: a register or a constant.
#[derive(Debug, Clone, Copy)]
enum Operand {
    Reg(Reg),
    Const(u32),
}

/// The 9-bit source operand `src` (`literal` when it is 255).
fn operand(src: u32, literal: Option<u32>) -> Option<Operand> {
    Some(match src {
        0..=105 => Operand::Reg(Reg::S(src as u16)),
        128..=192 => Operand::Const(src - 128),
        193..=208 => Operand::Const((-((src - 192) as i32)) as u32),
        255 => Operand::Const(literal?),
        256..=511 => Operand::Reg(Reg::V((src - 256) as u16)),
        _ => return None,
    })
}

/// An integer relation and whether it compares signed.
#[derive(Debug, Clone, Copy)]
struct Relation {
    /// 1 lt, 2 eq, 3 le, 4 gt, 5 ne, 6 ge (the VOPC order).
    rel: u32,
    signed: bool,
}

impl Relation {
    fn holds(self, a: u32, b: u32) -> bool {
        let ord = if self.signed {
            (a as i32).cmp(&(b as i32))
        } else {
            a.cmp(&b)
        };
        use std::cmp::Ordering::*;
        match self.rel {
            1 => ord == Less,
            2 => ord == Equal,
            3 => ord != Greater,
            4 => ord == Greater,
            5 => ord != Equal,
            _ => ord != Less,
        }
    }
}

/// VCC written by `insn` from a relation of two operands: a VOPC
/// (`v_cmp_*_{i,u}32_e32`) or its VOP3 form with `vcc_lo` as destination.
fn vcc_compare(insn: &[u32]) -> Option<(Relation, Operand, Operand)> {
    let w0 = insn[0];
    let (op, a, b) = if w0 >> 25 == 0x3e {
        let lit = insn.get(1).copied();
        let a = operand(w0 & 0x1ff, lit)?;
        (
            (w0 >> 17) & 0xff,
            a,
            Operand::Reg(Reg::V(((w0 >> 9) & 0xff) as u16)),
        )
    } else if w0 >> 26 == 0b110101 && (w0 >> 16) & 0x3ff < 0x80 && w0 & 0xff == 106 {
        let w1 = *insn.get(1)?;
        // no abs, neg, op_sel or clamp: a plain integer compare
        if w0 & 0xff00 != 0 || w1 >> 29 != 0 {
            return None;
        }
        let lit = insn.get(2).copied();
        let op = (w0 >> 16) & 0x3ff;
        (
            op,
            operand(w1 & 0x1ff, lit)?,
            operand((w1 >> 9) & 0x1ff, lit)?,
        )
    } else {
        return None;
    };
    let (rel, signed) = match op {
        0x41..=0x46 => (op - 0x40, true),
        0x49..=0x4e => (op - 0x48, false),
        _ => return None,
    };
    Some((Relation { rel, signed }, a, b))
}

/// SCC written by `insn` from a SOPC `s_cmp_{eq,lg,gt,ge,lt,le}_{i,u}32`.
fn scc_compare(insn: &[u32]) -> Option<(Relation, Operand, Operand)> {
    let w0 = insn[0];
    if w0 >> 23 != 0x17e {
        return None;
    }
    let op = (w0 >> 16) & 0x7f;
    // SOPC order: eq lg gt ge lt le; as VOPC relations
    const REL: [u32; 6] = [2, 5, 4, 6, 1, 3];
    let rel = *REL.get((op % 6) as usize).filter(|_| op < 12)?;
    let lit = insn.get(1).copied();
    let a = operand(w0 & 0xff, lit)?;
    let b = operand((w0 >> 8) & 0xff, lit)?;
    Some((
        Relation {
            rel,
            signed: op < 6,
        },
        a,
        b,
    ))
}

/// The register whose value decides whether the site after the branch
/// `branch_op` (0x21 scc0, 0x22 scc1, 0x23 vccz, 0x24 vccnz) runs, when
/// the compare `insn` before it makes the site run for 1 and skip for 0.
pub(crate) fn tested(insn: &[u32], branch_op: u32) -> Result<Reg, String> {
    let on_vcc = matches!(branch_op, 0x23 | 0x24);
    let compare = if on_vcc {
        vcc_compare(insn)
    } else {
        scc_compare(insn)
    };
    let (relation, a, b) = compare.ok_or_else(|| {
        format!(
            "the instruction before the branch is no integer compare into {}",
            if on_vcc { "VCC" } else { "SCC" }
        )
    })?;
    let (reg, holds): (Reg, Box<dyn Fn(u32) -> bool>) = match (a, b) {
        (Operand::Reg(r), Operand::Const(c)) => (r, Box::new(move |x| relation.holds(x, c))),
        (Operand::Const(c), Operand::Reg(r)) => (r, Box::new(move |x| relation.holds(c, x))),
        _ => return Err("the compare does not test one register against a constant".to_owned()),
    };
    // the branch is taken (the site skipped) when VCC is zero / SCC is set
    let runs = |x: u32| match branch_op {
        0x21 | 0x23 => holds(x),
        _ => !holds(x),
    };
    if runs(1) && !runs(0) {
        Ok(reg)
    } else {
        Err(format!(
            "the test on {reg} does not run the site exactly when it is non-zero"
        ))
    }
}

/// A SMEM load `s_load_b{32,64,96,128,256,512}`: (sdata, dwords, sbase
/// pair, byte offset), when its offset is an immediate (no SGPR offset).
fn scalar_load(insn: &[u32]) -> Option<(u16, u16, u16, i64)> {
    let (w0, w1) = (insn[0], *insn.get(1)?);
    if w0 >> 26 != 0b111101 || w1 >> 25 != 0x7c {
        return None;
    }
    let dwords = match (w0 >> 13) & 0xff {
        0 => 1,
        1 => 2,
        2 => 4,
        3 => 8,
        4 => 16,
        5 => 3,
        _ => return None,
    };
    let offset = i64::from(((w1 & 0xff_ffff) << 8) as i32 >> 8);
    Some((
        ((w0 >> 6) & 0x7f) as u16,
        dwords,
        ((w0 & 0x3f) << 1) as u16,
        offset,
    ))
}

/// The constant of a SALU source operand (inline or literal).
fn salu_const(src: u32, literal: Option<u32>) -> Option<i64> {
    match operand(src, literal)? {
        Operand::Const(c) if src == 255 => Some(i64::from(c)),
        Operand::Const(c) => Some(i64::from(c as i32)),
        Operand::Reg(_) => None,
    }
}

/// How `insn` moves a kernel-argument pointer pair at `lo` (now `offset`
/// bytes past the segment): `Some(Some(new))` when it adds a constant,
/// `Some(None)` when it leaves the value (the carry into the high half),
/// `None` when it is not such an update.
fn pointer_update(insn: &[u32], lo: u16) -> Option<Option<i64>> {
    let w0 = insn[0];
    if w0 >> 30 != 0b10 || w0 >> 28 == 0b1011 {
        return None; // SOP2 only
    }
    let (op, dst) = ((w0 >> 23) & 0x7f, ((w0 >> 16) & 0x7f) as u16);
    let (s0, s1) = (w0 & 0xff, (w0 >> 8) & 0xff);
    let lit = insn.get(1).copied();
    let sign = match op {
        0x00 | 0x53 => 1,  // s_add_co_u32, s_add_nc_u64
        0x01 | 0x54 => -1, // s_sub_co_u32, s_sub_nc_u64
        0x04 | 0x05 if dst == lo + 1 && s0 == u32::from(lo + 1) && s1 == 128 => {
            return Some(None); // s_add_co_ci / s_sub_co_ci of 0
        }
        _ => return None,
    };
    if dst != lo || s0 != u32::from(lo) {
        return None;
    }
    Some(Some(sign * salu_const(s1, lit)?))
}

/// The SGPRs that instructions `lo..hi` of `listing` load the argument at
/// byte `arg_offset` of the kernel-argument segment into: loads from the
/// pointer pair the kernel starts with at `kernarg` (followed through
/// constant adds and `s_mov_b64` copies, in address order).
pub(crate) fn argument_sgprs(
    listing: &Listing,
    range: (usize, usize),
    kernarg: u16,
    arg_offset: u64,
) -> BTreeSet<u16> {
    let mut pairs: Vec<(u16, i64)> = vec![(kernarg, 0)];
    let mut found = BTreeSet::new();
    for (_, insn) in listing.range(range) {
        if let Some((sdata, dwords, base, imm)) = scalar_load(insn) {
            if let Some(&(_, at)) = pairs.iter().find(|(lo, _)| *lo == base) {
                for k in 0..dwords {
                    if at + imm + 4 * i64::from(k) == arg_offset as i64 {
                        found.insert(sdata + k);
                    }
                }
            }
        }
        let copy = (insn[0] >> 23 == 0x17d && (insn[0] >> 8) & 0xff == 1)
            .then(|| (((insn[0] >> 16) & 0x7f) as u16, (insn[0] & 0xff) as u16));
        let mut next = Vec::new();
        for &(lo, at) in &pairs {
            match pointer_update(insn, lo) {
                Some(Some(delta)) => next.push((lo, at + delta)),
                Some(None) => next.push((lo, at)),
                None if may_write(insn, false, lo) || may_write(insn, false, lo + 1) => {}
                None => next.push((lo, at)),
            }
            if let Some((dst, _)) = copy.filter(|(_, src)| *src == lo) {
                next.retain(|(l, _)| *l != dst);
                next.push((dst, at));
            }
        }
        pairs = next;
    }
    found
}

/// Follows `reg` back from the end of `range`: the last write to a VGPR
/// must be a `v_mov_b32` from an SGPR, and the last write to that SGPR a
/// scalar load, into one of `loaded`. The chain as text (`v5 <- s47`).
pub(crate) fn from_argument(
    listing: &Listing,
    range: (usize, usize),
    reg: Reg,
    loaded: &BTreeSet<u16>,
) -> Result<String, String> {
    let mut chain = reg.to_string();
    let (m, end) = match reg {
        Reg::S(m) => (m, range.1),
        Reg::V(n) => {
            let (j, insn) = last_write(listing, range, true, n)
                .ok_or_else(|| format!("nothing sets v{n} before the test"))?;
            let w0 = insn[0];
            let src = w0 & 0x1ff;
            if w0 >> 25 != 0x3f || (w0 >> 9) & 0xff != 1 || src > 105 {
                return Err(format!("v{n} is last set by no v_mov_b32 from an SGPR"));
            }
            chain.push_str(&format!(" <- s{src}"));
            (src as u16, j)
        }
    };
    let (_, insn) = last_write(listing, (range.0, end), false, m)
        .ok_or_else(|| format!("nothing sets s{m} before the test"))?;
    if scalar_load(insn).is_none() {
        return Err(format!("s{m} is last set by no scalar load"));
    }
    if !loaded.contains(&m) {
        return Err(format!(
            "s{m} is not where the kernel loads the argument from its kernel-argument pointer"
        ));
    }
    Ok(chain)
}

fn last_write(
    listing: &Listing,
    range: (usize, usize),
    vgpr: bool,
    n: u16,
) -> Option<(usize, &[u32])> {
    listing
        .range(range)
        .rev()
        .find(|(_, insn)| may_write(insn, vgpr, n))
}
