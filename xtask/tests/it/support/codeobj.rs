//! GPU kernel files assembled by the tests: a minimal AMDGPU ELF code object
//! (a `.text` of the given instruction words), a clang offload bundle of such
//! objects, and its `CCOB` zstd-compressed form, byte for byte as clang
//! writes them.

/// `s_setreg_imm32_b32 hwreg(HW_REG_SCHED_MODE, 0, 2)`, whose next word is the value.
pub const SETREG_SCHED_MODE: u32 = 0xb980_081a;
/// `s_endpgm` on gfx12.
pub const S_ENDPGM: u32 = 0xbfb0_0000;
/// `s_nop 0`.
pub const S_NOP: u32 = 0xbf80_0000;
/// EF_AMDGPU_MACH of gfx1200, gfx1201 and gfx1100.
pub const GFX1200: u32 = 0x048;
pub const GFX1201: u32 = 0x04e;
pub const GFX1100: u32 = 0x041;

/// A kernel body that switches expert scheduling on (value 2) or not.
pub fn kernel(expert_sched: bool) -> Vec<u32> {
    let value = if expert_sched { 2 } else { 0 };
    vec![S_NOP, SETREG_SCHED_MODE, value, S_NOP, S_ENDPGM]
}

/// A 64-bit AMDGPU ELF with sections: null, `.text`, `.shstrtab`.
pub fn elf(mach: u32, words: &[u32]) -> Vec<u8> {
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
pub fn bundle(objects: &[(&str, Vec<u8>)]) -> Vec<u8> {
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
pub fn ccob(bundle: &[u8]) -> Vec<u8> {
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
pub fn gfx12_kernel_file(expert_sched: bool) -> Vec<u8> {
    ccob(&bundle(&[
        ("gfx1200", elf(GFX1200, &kernel(expert_sched))),
        ("gfx1201", elf(GFX1201, &kernel(expert_sched))),
    ]))
}
