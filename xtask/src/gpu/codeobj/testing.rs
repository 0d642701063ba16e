//! Small kernel files the unit tests build themselves: an AMDGPU ELF with a
//! `.text` and its function symbols, an offload bundle around entries, and
//! a `CCOB` wrapper in any version and codec.

use std::io::Write;

/// EF_AMDGPU_MACH of gfx1201.
pub(crate) const GFX1201: u32 = 0x04e;
/// EF_AMDGPU_MACH of gfx1100 (not gfx12).
pub(crate) const GFX1100: u32 = 0x041;

/// The little-endian bytes of `words`.
pub(crate) fn words(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A 64-bit AMDGPU ELF for `mach` whose `.text` (at address 0x1000) is
/// `text`, with one `STT_FUNC` symbol per offset of `functions`.
pub(crate) fn elf(mach: u32, text: &[u8], functions: &[u64]) -> Vec<u8> {
    const TEXT_AT: usize = 0x100;
    const ADDR: u64 = 0x1000;
    let mut out = vec![0u8; TEXT_AT];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2; // 64-bit
    out[5] = 1; // little-endian
    out[6] = 1;
    out[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    out[18..20].copy_from_slice(&224u16.to_le_bytes());
    out[48..52].copy_from_slice(&mach.to_le_bytes());
    out[52..54].copy_from_slice(&64u16.to_le_bytes());
    out.extend_from_slice(text);
    // .strtab: "\0k0\0k1\0..."
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for (i, f) in functions.iter().enumerate() {
        let name = strtab.len() as u32;
        strtab.extend(format!("k{i}\0").bytes());
        let mut sym = vec![0u8; 24];
        sym[..4].copy_from_slice(&name.to_le_bytes());
        sym[4] = 0x12; // STB_GLOBAL, STT_FUNC
        sym[6..8].copy_from_slice(&1u16.to_le_bytes()); // .text
        sym[8..16].copy_from_slice(&(ADDR + f).to_le_bytes());
        symtab.extend(sym);
    }
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0".to_vec();
    let mut place = |bytes: &[u8]| {
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let at = out.len();
        out.extend_from_slice(bytes);
        at as u64
    };
    let symtab_at = place(&symtab);
    let strtab_at = place(&strtab);
    let shstrtab_at = place(&shstrtab);
    let shoff = place(&[]);
    // name, type, addr, offset, size, link, entsize
    let sections: [(u32, u32, u64, u64, u64, u32, u64); 5] = [
        (0, 0, 0, 0, 0, 0, 0),
        (1, 1, ADDR, TEXT_AT as u64, text.len() as u64, 0, 0),
        (7, 2, 0, symtab_at, symtab.len() as u64, 3, 24),
        (15, 3, 0, strtab_at, strtab.len() as u64, 0, 0),
        (23, 3, 0, shstrtab_at, shstrtab.len() as u64, 0, 0),
    ];
    for (name, kind, addr, offset, size, link, entsize) in sections {
        let mut sh = vec![0u8; 64];
        sh[..4].copy_from_slice(&name.to_le_bytes());
        sh[4..8].copy_from_slice(&kind.to_le_bytes());
        sh[16..24].copy_from_slice(&addr.to_le_bytes());
        sh[24..32].copy_from_slice(&offset.to_le_bytes());
        sh[32..40].copy_from_slice(&size.to_le_bytes());
        sh[40..44].copy_from_slice(&link.to_le_bytes());
        sh[56..64].copy_from_slice(&entsize.to_le_bytes());
        out.extend(sh);
    }
    out[40..48].copy_from_slice(&shoff.to_le_bytes());
    out[58..60].copy_from_slice(&64u16.to_le_bytes());
    out[60..62].copy_from_slice(&5u16.to_le_bytes());
    out[62..64].copy_from_slice(&4u16.to_le_bytes());
    out
}

/// An uncompressed offload bundle of `entries` (triple, bytes), each
/// payload at a 4096-byte boundary as clang lays them out.
pub(crate) fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut table = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    table.extend((entries.len() as u64).to_le_bytes());
    let header_len = 32 + entries.iter().map(|(t, _)| 24 + t.len()).sum::<usize>();
    let mut at = header_len.next_multiple_of(4096) as u64;
    let mut offsets = Vec::new();
    for (triple, bytes) in entries {
        let offset = if bytes.is_empty() { 0 } else { at };
        table.extend(offset.to_le_bytes());
        table.extend((bytes.len() as u64).to_le_bytes());
        table.extend((triple.len() as u64).to_le_bytes());
        table.extend(triple.bytes());
        offsets.push(offset);
        if !bytes.is_empty() {
            at = (at + bytes.len() as u64).next_multiple_of(4096);
        }
    }
    for ((_, bytes), offset) in entries.iter().zip(offsets) {
        if !bytes.is_empty() {
            table.resize(offset as usize, 0);
            table.extend_from_slice(bytes);
        }
    }
    table
}

/// `plain` in a `CCOB` wrapper of `version` and `method`, with the right
/// sizes and hash, its zstd frame at `level` (single-segment: the size is pledged).
pub(crate) fn ccob(version: u16, method: u16, plain: &[u8]) -> Vec<u8> {
    // written here from the format, not by the code under test
    let frame = if method == 1 {
        zstd::bulk::compress(plain, 3).expect("zstd")
    } else {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(plain).expect("zlib");
        z.finish().expect("zlib")
    };
    let digest = <md5::Md5 as md5::Digest>::digest(plain);
    let mut out = b"CCOB".to_vec();
    out.extend(version.to_le_bytes());
    out.extend(method.to_le_bytes());
    let (plain_len, frame_len) = (plain.len() as u64, frame.len() as u64);
    match version {
        1 => out.extend((plain_len as u32).to_le_bytes()),
        2 => {
            out.extend(((24 + frame_len) as u32).to_le_bytes());
            out.extend((plain_len as u32).to_le_bytes());
        }
        3 => {
            out.extend((32 + frame_len).to_le_bytes());
            out.extend(plain_len.to_le_bytes());
        }
        v => panic!("CCOB version {v} is not known"),
    }
    out.extend(&digest[..8]);
    out.extend(frame);
    out
}
