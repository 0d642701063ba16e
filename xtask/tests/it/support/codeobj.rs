//! GPU kernel files assembled by the tests: a minimal AMDGPU ELF code object
//! (a `.text` of the given instruction words), a clang offload bundle of such
//! objects, and its `CCOB` zstd-compressed form, byte for byte as clang
//! writes them.

/// `s_setreg_imm32_b32 hwreg(HW_REG_SCHED_MODE, 0, 2)`, whose next word is the value.
pub(crate) const SETREG_SCHED_MODE: u32 = 0xb980_081a;
/// `s_endpgm` on gfx12.
pub(crate) const S_ENDPGM: u32 = 0xbfb0_0000;
/// `s_nop 0`.
pub(crate) const S_NOP: u32 = 0xbf80_0000;
/// EF_AMDGPU_MACH of gfx1200, gfx1201 and gfx1100.
pub(crate) const GFX1200: u32 = 0x048;
pub(crate) const GFX1201: u32 = 0x04e;
pub(crate) const GFX1100: u32 = 0x041;

/// A kernel body that switches expert scheduling on (value 2) or not.
pub(crate) fn kernel(expert_sched: bool) -> Vec<u32> {
    let value = if expert_sched { 2 } else { 0 };
    vec![S_NOP, SETREG_SCHED_MODE, value, S_NOP, S_ENDPGM]
}

/// A 64-bit AMDGPU ELF with sections: null, `.text`, `.shstrtab`.
pub(crate) fn elf(mach: u32, words: &[u32]) -> Vec<u8> {
    let text: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let names = b"\0.text\0.shstrtab\0";
    let text_off = 64usize;
    let names_off = text_off + text.len();
    let shoff = (names_off + names.len()).next_multiple_of(8);
    let mut out = Vec::new();
    out.extend_from_slice(b"\x7fELF");
    out.extend_from_slice(&[2, 1, 1, 0x40, 4]); // 64-bit, LE, v1, AMDGPU_HSA, ABI v6
    out.resize(16, 0);
    out.extend_from_slice(&3u16.to_le_bytes()); // ET_DYN
    out.extend_from_slice(&224u16.to_le_bytes()); // EM_AMDGPU
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // entry
    out.extend_from_slice(&0u64.to_le_bytes()); // phoff
    out.extend_from_slice(&(shoff as u64).to_le_bytes());
    out.extend_from_slice(&mach.to_le_bytes()); // e_flags
    out.extend_from_slice(&64u16.to_le_bytes()); // ehsize
    out.extend_from_slice(&56u16.to_le_bytes()); // phentsize
    out.extend_from_slice(&0u16.to_le_bytes()); // phnum
    out.extend_from_slice(&64u16.to_le_bytes()); // shentsize
    out.extend_from_slice(&3u16.to_le_bytes()); // shnum
    out.extend_from_slice(&2u16.to_le_bytes()); // shstrndx
    assert_eq!(out.len(), 64);
    out.extend_from_slice(&text);
    out.extend_from_slice(names);
    out.resize(shoff, 0);
    let section = |out: &mut Vec<u8>, name: u32, kind: u32, flags: u64, off: usize, len: usize| {
        out.extend_from_slice(&name.to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes()); // addr
        out.extend_from_slice(&(off as u64).to_le_bytes());
        out.extend_from_slice(&(len as u64).to_le_bytes());
        out.extend_from_slice(&[0; 8]); // link, info
        out.extend_from_slice(&4u64.to_le_bytes()); // addralign
        out.extend_from_slice(&0u64.to_le_bytes()); // entsize
    };
    section(&mut out, 0, 0, 0, 0, 0);
    section(&mut out, 1, 1, 0x6, text_off, text.len()); // PROGBITS, ALLOC|EXECINSTR
    section(&mut out, 7, 3, 0, names_off, names.len()); // STRTAB
    out
}

/// An uncompressed clang offload bundle: a host entry, then one per object.
pub(crate) fn bundle(objects: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut entries: Vec<(String, &[u8])> =
        vec![("host-x86_64-unknown-linux-gnu-".to_owned(), &[][..])];
    entries.extend(
        objects
            .iter()
            .map(|(gfx, bytes)| (format!("hipv4-amdgcn-amd-amdhsa--{gfx}"), bytes.as_slice())),
    );
    let table: usize = 32 + entries.iter().map(|(t, _)| 24 + t.len()).sum::<usize>();
    let mut offset = table.next_multiple_of(4096);
    let mut head = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    head.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let mut body = Vec::new();
    for (triple, bytes) in &entries {
        head.extend_from_slice(&(offset as u64).to_le_bytes());
        head.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        head.extend_from_slice(&(triple.len() as u64).to_le_bytes());
        head.extend_from_slice(triple.as_bytes());
        body.push((offset, *bytes));
        offset = (offset + bytes.len()).next_multiple_of(4096);
    }
    let mut out = head;
    for (at, bytes) in body {
        out.resize(at, 0);
        out.extend_from_slice(bytes);
    }
    out
}

/// `CCOB` version 2, zstd: magic, version, method, total size, uncompressed
/// size, a hash (any 8 bytes: readers do not check it), the frame.
pub(crate) fn ccob(bundle: &[u8]) -> Vec<u8> {
    let frame = zstd::encode_all(bundle, 3).unwrap();
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&((24 + frame.len()) as u32).to_le_bytes());
    out.extend_from_slice(&(bundle.len() as u32).to_le_bytes());
    out.extend_from_slice(&0x5eed_c0de_u64.to_le_bytes());
    out.extend_from_slice(&frame);
    out
}

/// A compressed bundle of gfx1200 and gfx1201 objects, with or without the switch.
pub(crate) fn gfx12_kernel_file(expert_sched: bool) -> Vec<u8> {
    ccob(&bundle(&[
        ("gfx1200", elf(GFX1200, &kernel(expert_sched))),
        ("gfx1201", elf(GFX1201, &kernel(expert_sched))),
    ]))
}

/// How the kernel [`gated_kernel_source`] writes tests its expert-scheduling site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gating {
    /// As tensilelite writes it from rocm-libraries PR #6261 on: the flag
    /// VGPR moved from the SGPR `ESMRuntimeSupported` is loaded into, a
    /// compare, `s_cbranch_vccz` over the site.
    Gated,
    /// The same test on SCC: `s_cmp_eq_u32 s47, 0; s_cbranch_scc1`.
    GatedScc,
    /// No test: the site runs (ROCm 7.0, 7.1, TheRock 7.9, 7.10).
    Ungated,
    /// The branch skips more than the site (it lands past the loop).
    BranchesElsewhere,
    /// The compare tests the VGPR moved from another argument (`alpha`).
    OtherArgument,
    /// A second branch of the kernel lands on the site, past the test.
    SiteReachedPastTest,
}

/// An assembly source of one gfx1201 kernel `name` that switches expert
/// scheduling on before its loop, tested as `gating` says, with metadata
/// declaring `alpha` (offset 96) and `ESMRuntimeSupported` (offset 104)
/// and the argument loads tensilelite's inline-argument path makes (the
/// kernel-argument pointer moved 16 bytes on, then `s_load_b32` of each).
pub(crate) fn gated_kernel_source(name: &str, gating: Gating) -> String {
    let (test, branch_to) = match gating {
        Gating::Gated | Gating::SiteReachedPastTest => (
            "v_cmp_ge_i32 vcc_lo, v5, 1",
            "s_cbranch_vccz label_skipEnableESM",
        ),
        Gating::GatedScc => ("s_cmp_eq_u32 s47, 0", "s_cbranch_scc1 label_skipEnableESM"),
        Gating::Ungated => ("", ""),
        Gating::BranchesElsewhere => (
            "v_cmp_ge_i32 vcc_lo, v5, 1",
            "s_cbranch_vccz label_LoopEndL",
        ),
        Gating::OtherArgument => (
            "v_cmp_ge_i32 vcc_lo, v6, 1",
            "s_cbranch_vccz label_skipEnableESM",
        ),
    };
    let early = if gating == Gating::SiteReachedPastTest {
        "s_cmp_eq_u32 s20, 3\n  s_cbranch_scc1 label_site"
    } else {
        ""
    };
    format!(
        r#".amdgcn_target "amdgcn-amd-amdhsa--gfx1201"
.text
.globl {name}
.p2align 8
.type {name},@function
{name}:
  s_load_b128 s[20:23], s[0:1], 0x0
  s_add_co_u32 s0, s0, 16
  s_add_co_ci_u32 s1, s1, 0
  s_load_b32 s46, s[0:1], 0x50
  s_load_b32 s47, s[0:1], 0x58
  s_wait_kmcnt 0
  v_mov_b32 v5, s47
  v_mov_b32 v6, s46
  v_add_nc_u32 v7, v6, v6
  {early}
  v_lshlrev_b64 v[2:3], 1, v[8:9]
  {test}
  {branch_to}
label_site:
  s_setreg_imm32_b32 hwreg(26, 0, 2), 2
label_skipEnableESM:
label_LoopBeginL:
  v_add_nc_u32 v7, v7, v6
  s_sub_co_u32 s22, s22, 1
  s_cbranch_scc0 label_LoopBeginL
label_LoopEndL:
  s_setreg_imm32_b32 hwreg(26, 0, 2), 0
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel {name}
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 16
  .amdhsa_next_free_sgpr 48
  .amdhsa_wavefront_size32 1
.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [1, 2]
amdhsa.kernels:
  - .name: {name}
    .symbol: {name}.kd
    .kernarg_segment_size: 112
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 32
    .sgpr_count: 48
    .vgpr_count: 16
    .max_flat_workgroup_size: 256
    .args:
      - {{.name: alpha, .offset: 96, .size: 4, .value_kind: by_value, .value_type: f32}}
      - {{.name: ESMRuntimeSupported, .offset: 104, .size: 4, .value_kind: by_value, .value_type: u32}}
...
.end_amdgpu_metadata
"#
    )
}

/// `source` assembled for gfx1201 by `llvm-mc-19` into an ELF code object
/// (relocatable: symbols, metadata note and descriptor as the linker gets
/// them); `None` (skipped) when llvm-mc-19 is missing outside CI.
pub(crate) fn assemble_gfx1201(source: &str) -> Option<Vec<u8>> {
    if !super::have_tool("llvm-mc-19") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (s, o) = (dir.path().join("k.s"), dir.path().join("k.o"));
    std::fs::write(&s, source).unwrap();
    let out = std::process::Command::new("llvm-mc-19")
        .args([
            "-triple=amdgcn-amd-amdhsa",
            "-mcpu=gfx1201",
            "-filetype=obj",
            "-o",
        ])
        .arg(&o)
        .arg(&s)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "llvm-mc-19: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(std::fs::read(&o).unwrap())
}

/// A compressed bundle holding the gfx1201 kernel of `gating`.
pub(crate) fn gated_kernel_file(name: &str, gating: Gating) -> Option<Vec<u8>> {
    let object = assemble_gfx1201(&gated_kernel_source(name, gating))?;
    Some(ccob(&bundle(&[("gfx1201", object)])))
}
