//! AMDGPU ELF code objects: the GPU target from `e_flags`, the `.text`
//! section and the function symbols in it, and the encoding of the
//! instruction that switches expert scheduling on (found by `isa`'s walk).

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
pub(crate) const SETREG_SCHED_MODE: u32 = 0xb000_0000 | (0x13 << 23) | (26 | (1 << 11));
/// The SCHED_MODE value that switches expert scheduling on.
pub(crate) const EXPERT_SCHED_ON: u32 = 2;

/// A parsed AMDGPU code object: its mach value, its `.text` bytes and
/// where they lie, and the function symbols that point into `.text`.
#[derive(Debug)]
pub struct CodeObject<'a> {
    pub(crate) mach: u32,
    pub(crate) text: &'a [u8],
    /// Where `.text` starts in the ELF file.
    pub(crate) text_offset: usize,
    /// `.text`'s address (`sh_addr`), which symbol values count from.
    pub(crate) text_addr: u64,
    /// Offsets in `.text` of its `STT_FUNC` symbols (the kernels' entries),
    /// sorted, each once.
    pub(crate) functions: Vec<usize>,
}

impl CodeObject<'_> {
    /// The target name, or `mach 0x..` when it is not one of [`MACHS`].
    pub(crate) fn gfx(&self) -> String {
        MACHS
            .iter()
            .find(|(m, _)| *m == self.mach)
            .map_or(format!("mach 0x{:03x}", self.mach), |(_, n)| {
                (*n).to_owned()
            })
    }

    pub(crate) fn is_gfx12(&self) -> bool {
        matches!(self.mach, 0x048 | 0x04e)
    }
}

const SHT_SYMTAB: u32 = 2;
const STT_FUNC: u8 = 2;

/// Parses a 64-bit little-endian AMDGPU ELF and finds its `.text` and the
/// function symbols in it. Every offset and length is checked against the
/// file: a section outside it is an error, never a panic.
pub fn parse(bytes: &[u8]) -> Result<CodeObject<'_>, String> {
    let elf = Elf(bytes);
    let mach = header(elf)?;
    let table = SectionTable::read(elf)?;
    let names = table.section(elf, table.names)?;
    let names = elf
        .at(names.offset, names.size)
        .map_err(|e| format!("section names: {e}"))?;
    let mut text = None;
    let mut symtab = None;
    for i in 0..table.count {
        let s = table.section(elf, i)?;
        let name = names.get(s.name as usize..).unwrap_or_default();
        if name.starts_with(b".text\0") && text.is_none() {
            let bytes = elf
                .at(s.offset, s.size)
                .map_err(|e| format!(".text: {e}"))?;
            text = Some((i, bytes, s.offset as usize, s.addr));
        } else if s.kind == SHT_SYMTAB && symtab.is_none() {
            symtab = Some(s);
        }
    }
    let Some((text_index, text, text_offset, text_addr)) = text else {
        return Err("ELF has no .text section".to_owned());
    };
    let mut functions = match symtab {
        Some(sym) => function_offsets(elf, &sym, table.count, (text_index, text, text_addr))?,
        None => Vec::new(),
    };
    functions.sort_unstable();
    functions.dedup();
    Ok(CodeObject {
        mach,
        text,
        text_offset,
        text_addr,
        functions,
    })
}

/// The file's bytes, read only within bounds.
#[derive(Clone, Copy)]
struct Elf<'a>(&'a [u8]);

impl<'a> Elf<'a> {
    fn at(self, off: u64, len: u64) -> Result<&'a [u8], String> {
        let end = off.checked_add(len);
        usize::try_from(off)
            .ok()
            .zip(end.and_then(|e| usize::try_from(e).ok()))
            .and_then(|(o, e)| self.0.get(o..e))
            .ok_or_else(|| {
                format!(
                    "ELF truncated: {len} bytes at {off} lie past the end ({} bytes)",
                    self.0.len()
                )
            })
    }

    fn u16_at(self, off: u64) -> Result<u16, String> {
        self.at(off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32_at(self, off: u64) -> Result<u32, String> {
        self.at(off, 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
    }

    fn u64_at(self, off: u64) -> Result<u64, String> {
        self.at(off, 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
    }
}

/// The ELF header checked (64-bit little-endian AMDGPU); the mach value of
/// its `e_flags`.
fn header(elf: Elf<'_>) -> Result<u32, String> {
    if elf.at(0, 4)? != b"\x7fELF" {
        return Err("not an ELF file".to_owned());
    }
    if elf.at(4, 2)? != [2, 1] {
        return Err("not a 64-bit little-endian ELF".to_owned());
    }
    let machine = elf.u16_at(18)?;
    if machine != EM_AMDGPU {
        return Err(format!("ELF machine {machine} is not AMDGPU ({EM_AMDGPU})"));
    }
    Ok(elf.u32_at(48)? & MACH_MASK)
}

/// The section header table: where it is, its entry size and count, and
/// the index of the section that holds the section names.
struct SectionTable {
    offset: u64,
    entry_size: u64,
    count: u64,
    names: u64,
}

struct Section {
    name: u32,
    kind: u32,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

impl SectionTable {
    fn read(elf: Elf<'_>) -> Result<SectionTable, String> {
        let shoff = elf.u64_at(40)?;
        let shentsize = u64::from(elf.u16_at(58)?);
        let shnum = u64::from(elf.u16_at(60)?);
        let shstrndx = u64::from(elf.u16_at(62)?);
        if shentsize < 64 || shnum == 0 || shstrndx >= shnum {
            return Err(format!(
                "ELF section table is not usable (entry size {shentsize}, {shnum} sections, names in {shstrndx})"
            ));
        }
        // shnum and shentsize are u16: the product cannot overflow; the sum can.
        elf.at(shoff, shnum * shentsize).map_err(|_| {
            format!(
                "ELF section headers ({shnum} of {shentsize} bytes at {shoff}) lie outside the file ({} bytes)",
                elf.0.len()
            )
        })?;
        Ok(SectionTable {
            offset: shoff,
            entry_size: shentsize,
            count: shnum,
            names: shstrndx,
        })
    }

    fn section(&self, elf: Elf<'_>, i: u64) -> Result<Section, String> {
        let base = self.offset + i * self.entry_size;
        Ok(Section {
            name: elf.u32_at(base)?,
            kind: elf.u32_at(base + 4)?,
            addr: elf.u64_at(base + 16)?,
            offset: elf.u64_at(base + 24)?,
            size: elf.u64_at(base + 32)?,
            link: elf.u32_at(base + 40)?,
            entsize: elf.u64_at(base + 56)?,
        })
    }
}

/// The offsets in `.text` of the `STT_FUNC` symbols of `sym` that lie in
/// it (section `text_index`, at address `text_addr`), in symbol order.
fn function_offsets(
    elf: Elf<'_>,
    sym: &Section,
    shnum: u64,
    (text_index, text, text_addr): (u64, &[u8], u64),
) -> Result<Vec<usize>, String> {
    if sym.entsize < 24 {
        return Err(format!(
            "ELF .symtab entry size {} is below 24",
            sym.entsize
        ));
    }
    let table = elf
        .at(sym.offset, sym.size)
        .map_err(|e| format!(".symtab: {e}"))?;
    if u64::from(sym.link) >= shnum {
        return Err(format!(".symtab links to section {}, of {shnum}", sym.link));
    }
    let mut functions = Vec::new();
    for entry in table.chunks_exact(sym.entsize as usize) {
        let info = entry[4];
        let shndx = u64::from(u16::from_le_bytes([entry[6], entry[7]]));
        let value = u64::from_le_bytes(entry[8..16].try_into().expect("8"));
        if info & 0xf != STT_FUNC || shndx != text_index {
            continue;
        }
        let offset = value
            .checked_sub(text_addr)
            .filter(|o| *o <= text.len() as u64)
            .ok_or_else(|| {
                format!(
                    "ELF function symbol at 0x{value:x} lies outside .text (0x{text_addr:x}, {} bytes)",
                    text.len()
                )
            })?;
        functions.push(offset as usize);
    }
    Ok(functions)
}

/// A symbol of the file's `.symtab`, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Symbol {
    pub(crate) name: String,
    /// `STT_*` (2 a function, 1 an object).
    pub(crate) kind: u8,
    pub(crate) section: u64,
    pub(crate) value: u64,
    pub(crate) size: u64,
}

const SHT_NOTE: u32 = 7;
const STT_OBJECT: u8 = 1;
/// The longest symbol name read (tensilelite's kernel names run to ~600).
const MAX_NAME: usize = 4096;

/// Every named function and object symbol of the file's `.symtab`.
pub(crate) fn symbols(bytes: &[u8]) -> Result<Vec<Symbol>, String> {
    let elf = Elf(bytes);
    header(elf)?;
    let table = SectionTable::read(elf)?;
    let Some(sym) = (0..table.count)
        .map(|i| table.section(elf, i))
        .find(|s| s.as_ref().map_or(true, |s| s.kind == SHT_SYMTAB))
        .transpose()?
    else {
        return Ok(Vec::new());
    };
    if sym.entsize < 24 || u64::from(sym.link) >= table.count {
        return Err(format!(
            ".symtab entry size {} or link {} unusable",
            sym.entsize, sym.link
        ));
    }
    let strtab = table.section(elf, u64::from(sym.link))?;
    let names = elf
        .at(strtab.offset, strtab.size)
        .map_err(|e| format!(".strtab: {e}"))?;
    let entries = elf
        .at(sym.offset, sym.size)
        .map_err(|e| format!(".symtab: {e}"))?;
    let mut out = Vec::new();
    for entry in entries.chunks_exact(sym.entsize as usize) {
        let kind = entry[4] & 0xf;
        if kind != STT_FUNC && kind != STT_OBJECT {
            continue;
        }
        let at = u32::from_le_bytes(entry[..4].try_into().expect("4")) as usize;
        let name = names.get(at..).unwrap_or_default();
        let end = name
            .iter()
            .take(MAX_NAME)
            .position(|b| *b == 0)
            .ok_or_else(|| {
                format!("a symbol name at .strtab+{at} has no end within {MAX_NAME} bytes")
            })?;
        out.push(Symbol {
            name: String::from_utf8_lossy(&name[..end]).into_owned(),
            kind,
            section: u64::from(u16::from_le_bytes([entry[6], entry[7]])),
            value: u64::from_le_bytes(entry[8..16].try_into().expect("8")),
            size: u64::from_le_bytes(entry[16..24].try_into().expect("8")),
        });
    }
    Ok(out)
}

/// The `len` bytes of the file at symbol `sym`'s address (in its section).
pub(crate) fn symbol_bytes<'a>(
    bytes: &'a [u8],
    sym: &Symbol,
    len: u64,
) -> Result<&'a [u8], String> {
    let elf = Elf(bytes);
    let table = SectionTable::read(elf)?;
    if sym.section == 0 || sym.section >= table.count {
        return Err(format!(
            "symbol {} is in no section ({})",
            sym.name, sym.section
        ));
    }
    let s = table.section(elf, sym.section)?;
    let within = sym
        .value
        .checked_sub(s.addr)
        .filter(|o| o.checked_add(len).is_some_and(|end| end <= s.size))
        .ok_or_else(|| format!("symbol {} lies outside its section", sym.name))?;
    elf.at(s.offset + within, len)
}

/// The descriptors of the notes named `name` of type `kind` in the file's
/// `SHT_NOTE` sections (AMDGPU metadata: `AMDGPU`, 32).
pub(crate) fn notes<'a>(bytes: &'a [u8], name: &str, kind: u32) -> Result<Vec<&'a [u8]>, String> {
    let elf = Elf(bytes);
    let table = SectionTable::read(elf)?;
    let mut out = Vec::new();
    for i in 0..table.count {
        let s = table.section(elf, i)?;
        if s.kind != SHT_NOTE {
            continue;
        }
        let mut rest = elf.at(s.offset, s.size).map_err(|e| format!("note: {e}"))?;
        while rest.len() >= 12 {
            let word =
                |at: usize| u32::from_le_bytes(rest[at..at + 4].try_into().expect("4")) as usize;
            let (namesz, descsz, ty) = (word(0), word(4), word(8) as u32);
            let name_end = 12 + namesz.next_multiple_of(4);
            let desc_end = name_end.checked_add(descsz.next_multiple_of(4));
            let Some(desc_end) = desc_end.filter(|e| *e <= rest.len()) else {
                return Err(format!("a note of {descsz} bytes runs past its section"));
            };
            let this = &rest[12..12 + namesz];
            if this.strip_suffix(b"\0").unwrap_or(this) == name.as_bytes() && ty == kind {
                out.push(&rest[name_end..name_end + descsz]);
            }
            rest = &rest[desc_end..];
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{elf, words, GFX1201};
    use super::*;

    #[test]
    fn the_switch_is_the_documented_encoding() {
        // simm16 0x081a: hwreg 26, offset 0, size 2.
        assert_eq!(SETREG_SCHED_MODE, 0xb980_081a);
    }

    #[test]
    fn text_and_function_symbols_are_found() {
        let text = words(&[0xbf80_0000, 0xbfb0_0000, 0xbf80_0000, 0xbfb0_0000]);
        let file = elf(GFX1201, &text, &[8, 0, 8]);
        let code = parse(&file).unwrap();
        assert_eq!(code.gfx(), "gfx1201");
        assert!(code.is_gfx12());
        assert_eq!(code.text, &text[..]);
        assert_eq!(&file[code.text_offset..code.text_offset + 16], &text[..]);
        assert_eq!(code.functions, vec![0, 8]);
    }

    #[test]
    fn offsets_near_the_end_of_the_address_space_are_errors_not_panics() {
        let good = elf(GFX1201, &words(&[0xbfb0_0000]), &[0]);
        // e_shoff near 2^64
        let mut bad = good.clone();
        bad[40..48].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        let err = parse(&bad).unwrap_err();
        assert!(err.contains("section headers"), "{err}");
        // e_shoff just past the end of the file
        let mut bad = good.clone();
        bad[40..48].copy_from_slice(&(good.len() as u64).to_le_bytes());
        assert!(parse(&bad).unwrap_err().contains("outside the file"));
        // .text's offset and size near 2^64 (section 1's sh_offset, sh_size)
        let shoff = u64::from_le_bytes(good[40..48].try_into().unwrap()) as usize;
        for field in [24, 32] {
            let mut bad = good.clone();
            let at = shoff + 64 + field;
            bad[at..at + 8].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
            let err = parse(&bad).unwrap_err();
            assert!(err.contains(".text"), "{err}");
        }
        // a function symbol outside .text
        let bad = elf(GFX1201, &words(&[0xbfb0_0000]), &[64]);
        assert!(parse(&bad).unwrap_err().contains("outside .text"));
        // truncated anywhere: an error, never a panic
        for len in 0..good.len() {
            let _ = parse(&good[..len]);
        }
    }
}
