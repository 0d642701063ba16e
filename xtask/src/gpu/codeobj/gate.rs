//! Whether an expert-scheduling site runs unconditionally or only when the
//! kernel argument `ESMRuntimeSupported` is non-zero (rocm-libraries PR
//! #6261). tensilelite's `openLoop` writes, for a kernel generated with
//! `ESMRuntimeGate`:
//!
//! ```text
//! v_cmp_ge_i32 vcc_lo, vF, 1                  // check if ESM supported at runtime
//! s_cbranch_vccz label_skipEnableESM          // skip s_setreg if not supported
//! s_setreg_imm32_b32 hwreg(26, 0, 2), 2       // the site
//! label_skipEnableESM:
//! ```
//!
//! where `vF` was set by `v_mov_b32 vF, sA` once the kernel arguments were
//! loaded, `sA` holding the argument (its `.offset` in the metadata). A
//! site is gated when, inside its kernel's function:
//! 1. the instruction before it is a conditional branch (on VCC or SCC)
//!    whose target is the instruction right after it, and no branch of the
//!    function lands on that branch or on the site;
//! 2. the instruction before the branch is an integer compare of one
//!    register with a constant that lets the site run when the register
//!    holds 1 and skips it when it holds 0;
//! 3. the kernel declares the argument, and the register is, through the
//!    last write to it before the compare (a `v_mov_b32` from an SGPR), an
//!    SGPR last written by a scalar load and loaded with the argument's
//!    dword from the kernel-argument pointer (its SGPR pair from the
//!    descriptor, followed through constant adds and copies).
//!
//! Writes are read in address order with [`super::regs`] (which
//! over-approximates), not along paths; indirect jumps (`s_setpc_b64`,
//! `s_swappc_b64`) are not followed. Anything else is "not gated", with the
//! reason: the site then counts as on, as before this analysis existed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::elf::{CodeObject, Symbol};
use super::flow;
use super::kernels::{self, Kernel};
use super::listing::{branch, target, Listing};

/// The kernel argument the gate tests.
pub(crate) const ARGUMENT: &str = "ESMRuntimeSupported";

/// A gated site: the kernel, the argument and the register tested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    pub kernel: String,
    pub argument: String,
    /// The argument's offset in the kernel-argument segment.
    pub arg_offset: u64,
    /// The register the branch tests, back to the SGPR the argument is
    /// loaded into (`v5 <- s47`).
    pub register: String,
}

/// What the analysis keeps per code object: its symbols, and per function
/// its kernel and where its branches land.
pub(crate) struct Context<'a> {
    elf: &'a [u8],
    /// `.text`'s address, which symbol values count from.
    text_addr: u64,
    symbols: Option<Vec<Symbol>>,
    functions: BTreeMap<usize, Result<Function, String>>,
}

struct Function {
    kernel: Kernel,
    kernarg: u16,
    /// Offsets some direct branch of the function lands on.
    landings: BTreeSet<i64>,
}

impl<'a> Context<'a> {
    /// For the ELF code object `elf`, whose `.text` is at `text_addr`.
    pub(crate) fn new(elf: &'a [u8], text_addr: u64) -> Self {
        Context {
            elf,
            text_addr,
            symbols: None,
            functions: BTreeMap::new(),
        }
    }

    fn function(&mut self, listing: &Listing, range: (usize, usize)) -> Result<&Function, String> {
        if !self.functions.contains_key(&range.0) {
            let f = self.read_function(listing, range);
            self.functions.insert(range.0, f);
        }
        self.functions[&range.0].as_ref().map_err(Clone::clone)
    }

    fn read_function(
        &mut self,
        listing: &Listing,
        (start, end): (usize, usize),
    ) -> Result<Function, String> {
        if self.symbols.is_none() {
            self.symbols = Some(super::elf::symbols(self.elf)?);
        }
        let symbols = self.symbols.as_deref().unwrap_or_default();
        let at = u64::from(listing.starts[start]);
        let name = symbols
            .iter()
            .find(|s| s.kind == 2 && s.value.checked_sub(self.text_addr) == Some(at))
            .map(|s| s.name.clone())
            .ok_or_else(|| format!("no function symbol names the kernel at .text+0x{at:x}"))?;
        let kernel = kernels::named(self.elf, &name)?
            .ok_or_else(|| format!("no metadata for kernel {name}"))?;
        let kernarg = kernels::kernarg_sgpr(self.elf, symbols, &kernel)?;
        let landings = listing
            .range((start, end))
            .filter_map(|(i, insn)| branch(insn).map(|(_, d)| target(listing.starts[i], d)))
            .collect();
        Ok(Function {
            kernel,
            kernarg,
            landings,
        })
    }
}

/// Whether the site at `.text+site` (an instruction of `listing`) is
/// gated, and on what; `Err` says why not.
pub(crate) fn gate_of(
    cx: &mut Context<'_>,
    listing: &Listing,
    site: usize,
) -> Result<Gate, String> {
    let i = listing
        .index_of(site)
        .ok_or_else(|| format!(".text+0x{site:x} starts no instruction"))?;
    let range = listing
        .function_of(i)
        .ok_or_else(|| format!(".text+0x{site:x} lies in no kernel function"))?;
    if i < range.0 + 2 {
        return Err("nothing tests a condition before the site".to_owned());
    }
    let (b, c) = (i - 1, i - 2);
    let (op, dwords) = branch(listing.insn(b))
        .filter(|(op, _)| (0x21..=0x24).contains(op))
        .ok_or("the instruction before the site is no conditional branch on VCC or SCC")?;
    let end = site as i64 + 4 * listing.insn(i).len() as i64;
    if target(listing.starts[b], dwords) != end {
        return Err("the branch before the site does not skip exactly the site".to_owned());
    }
    let f = cx.function(listing, range)?;
    if f.landings.contains(&i64::from(listing.starts[b])) || f.landings.contains(&(site as i64)) {
        return Err("a branch lands on the site or on its test, past the test".to_owned());
    }
    let tested = flow::tested(listing.insn(c), op)?;
    let arg = f
        .kernel
        .arg(ARGUMENT)
        .ok_or_else(|| format!("kernel {} has no {ARGUMENT} argument", f.kernel.name))?;
    let loaded = flow::argument_sgprs(listing, (range.0, c), f.kernarg, arg.offset);
    let register = flow::from_argument(listing, (range.0, c), tested, &loaded)?;
    Ok(Gate {
        kernel: f.kernel.name.clone(),
        argument: ARGUMENT.to_owned(),
        arg_offset: arg.offset,
        register,
    })
}

/// The gate of each of `sites` (offsets in `code`'s `.text`, from
/// [`super::isa::sched_mode_sites`]): the gate, or why the site is not
/// gated. Lists the instructions only when a site follows what may be a
/// conditional branch (an ungated library costs no second walk); `Err`
/// when that listing fails.
pub fn of_sites(
    elf: &[u8],
    code: &CodeObject,
    sites: &[usize],
) -> Result<Vec<Result<Gate, String>>, String> {
    let after_branch = |site: usize| {
        let w = site
            .checked_sub(4)
            .and_then(|at| code.text.get(at..at + 4))
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        w.and_then(|w| branch(&[w]))
            .is_some_and(|(op, _)| (0x21..=0x24).contains(&op))
    };
    if !sites.iter().any(|s| after_branch(*s)) {
        let why = "the instruction before the site is no conditional branch on VCC or SCC";
        return Ok(sites.iter().map(|_| Err(why.to_owned())).collect());
    }
    let listing = Listing::of(code)?;
    let mut cx = Context::new(elf, code.text_addr);
    Ok(sites
        .iter()
        .map(|s| gate_of(&mut cx, &listing, *s))
        .collect())
}
