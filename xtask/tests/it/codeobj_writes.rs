//! `codeobj::regs`, which says what registers a gfx12 instruction may
//! write, held to LLVM: every opcode of every encoding the gate analysis
//! reads is assembled (`llvm-mc-19`, raw words), disassembled
//! (`llvm-objdump-19 --mcpu=gfx1201`) and its destination operands read
//! from LLVM's text. The decoder must claim every register LLVM writes
//! (it is used to prove nothing overwrote a value), and, outside the few
//! opcodes it over-approximates on purpose, no other.

use std::process::Command;

use xtask::gpu::codeobj::regs::writes;

use crate::support::have_tools;

/// Each instruction sits in a 16-byte slot, padded with `s_nop`, so a word
/// LLVM cannot decode never shifts the ones after it.
const SLOT: usize = 16;

/// One family: its name, how an opcode is encoded (the destination field
/// always 10 for VALU/SALU, 8 for DS/VMEM/VOP3P, 16 for SMEM), and the
/// opcodes to try.
struct Family {
    name: &'static str,
    encode: fn(u32) -> Vec<u32>,
    ops: std::ops::Range<u32>,
}

fn families() -> Vec<Family> {
    vec![
        Family {
            name: "vop1",
            encode: |op| vec![0x7e00_0000 | (op << 9) | (10 << 17) | (256 + 20)],
            ops: 0..256,
        },
        Family {
            name: "vop2",
            encode: |op| vec![(op << 25) | (10 << 17) | (30 << 9) | (256 + 20)],
            ops: 0..0x3e,
        },
        Family {
            name: "vopc",
            encode: |op| vec![0x7c00_0000 | (op << 17) | (30 << 9) | (256 + 20)],
            ops: 0..256,
        },
        Family {
            name: "vop3-vvv",
            encode: |op| {
                vec![
                    0xd400_0000 | (op << 16) | 10,
                    (256 + 20) | ((256 + 30) << 9) | ((256 + 40) << 18),
                ]
            },
            ops: 0..1024,
        },
        Family {
            name: "vop3-vv",
            encode: |op| {
                vec![
                    0xd400_0000 | (op << 16) | 10,
                    (256 + 20) | ((256 + 30) << 9),
                ]
            },
            ops: 0..1024,
        },
        Family {
            name: "vop3-v",
            encode: |op| vec![0xd400_0000 | (op << 16) | 10, 256 + 20],
            ops: 0..1024,
        },
        Family {
            name: "vop3-sss",
            encode: |op| vec![0xd400_0000 | (op << 16) | 10, 21 | (22 << 9) | (23 << 18)],
            ops: 0..1024,
        },
        Family {
            name: "vop3p",
            encode: |op| {
                vec![
                    0xcc00_4000 | (op << 16) | 8,
                    0x1800_0000 | (256 + 16) | ((256 + 24) << 9) | ((256 + 8) << 18),
                ]
            },
            ops: 0..128,
        },
        Family {
            name: "vop3p-pk",
            encode: |op| vec![0xcc00_0000 | (op << 16) | 8, (256 + 16) | ((256 + 24) << 9)],
            ops: 0..128,
        },
        Family {
            name: "ds",
            encode: |op| vec![0xd800_0000 | (op << 18), 20 | (8 << 24)],
            ops: 0..256,
        },
        Family {
            name: "ds-data",
            encode: |op| {
                vec![
                    0xd800_0000 | (op << 18),
                    20 | (30 << 8) | (40 << 16) | (8 << 24),
                ]
            },
            ops: 0..256,
        },
        Family {
            name: "smem",
            encode: |op| {
                vec![
                    0xf400_0000 | (op << 13) | (16 << 6) | 2,
                    (0x7c << 25) | 0x10,
                ]
            },
            ops: 0..256,
        },
        Family {
            name: "vglobal",
            encode: |op| vec![0xee00_0000 | (op << 14) | 0x02, 8 | (12 << 23), 16],
            ops: 0..256,
        },
        Family {
            name: "vbuffer",
            encode: |op| {
                vec![
                    0xc400_0000 | (op << 14) | 0x7c,
                    8 | (4 << 16) | (1 << 30),
                    16,
                ]
            },
            ops: 0..256,
        },
        Family {
            name: "sop1",
            encode: |op| vec![0xbe80_0000 | (10 << 16) | (op << 8) | 20],
            ops: 0..256,
        },
        Family {
            name: "sop2",
            encode: |op| vec![0x8000_0000 | (op << 23) | (10 << 16) | (21 << 8) | 20],
            ops: 0..0x60,
        },
        Family {
            name: "sopk",
            encode: |op| vec![0xb000_0000 | (op << 23) | (10 << 16) | 0x1a, 0],
            ops: 0..0x1d,
        },
    ]
}

/// A register operand of LLVM's text: (`v` or `s`, first, count).
fn register(token: &str) -> Option<(char, u16, u16)> {
    let token = token.trim();
    let kind = token.chars().next().filter(|c| *c == 'v' || *c == 's')?;
    let rest = &token[1..];
    if let Some(range) = rest.strip_prefix('[') {
        let (a, b) = range.split_once(']')?.0.split_once(':')?;
        let (a, b): (u16, u16) = (a.parse().ok()?, b.parse().ok()?);
        return Some((kind, a, b - a + 1));
    }
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let after = &rest[digits.len()..];
    (!digits.is_empty() && (after.is_empty() || after.starts_with('.')))
        .then(|| (kind, digits.parse().unwrap(), 1))
}

/// The registers LLVM's text says the instruction writes.
fn llvm_writes(family: &str, text: &str) -> Vec<(char, u16, u16)> {
    let text = text.split("/*").next().unwrap_or(text);
    let (mnemonic, operands) = text.split_once(' ').unwrap_or((text, ""));
    let ops: Vec<&str> = operands.split(", ").collect();
    let first = ops.first().and_then(|t| register(t));
    let mut out = Vec::new();
    let marker = match family {
        f if f.starts_with("vop3p") || f.starts_with("ds") || f == "vglobal" => 8,
        "smem" => 16,
        _ => 10,
    };
    match first {
        Some(r) if family == "vbuffer" && mnemonic.contains("load") => out.push(r),
        Some(r) if family != "vbuffer" && r.1 == marker => out.push(r),
        _ => {}
    }
    // VOP3SD: the carry-out SGPR (field 0 in these words) is the second
    // operand (a v_cmpx has no destination: its second operand is a source)
    if family.starts_with("vop3-") && !mnemonic.starts_with("v_cmpx") {
        out.extend(
            ops.get(1)
                .and_then(|t| register(t))
                .filter(|r| *r == ('s', 0, 1)),
        );
    }
    if mnemonic == "v_swap_b32" {
        out.extend(ops.get(1).and_then(|t| register(t)));
    }
    out
}

/// Opcodes the decoder over-approximates on purpose: VOPC and VOP3SD
/// into SGPRs (a pair, for wave64), M0-relative moves and atomics (their
/// data width, returned or not).
fn over_approximated(family: &str, mnemonic: &str, text: &str) -> bool {
    (family.starts_with("vop3-")
        && (mnemonic.starts_with("v_cmp") || text.split(", ").nth(1) == Some("s0")))
        || mnemonic.contains("movrel")
        || mnemonic.contains("swaprel")
        || mnemonic.contains("atomic")
}

#[test]
fn the_register_write_decoder_agrees_with_llvm_on_every_opcode() {
    if !have_tools(&["llvm-mc-19", "llvm-objdump-19"]) {
        return;
    }
    let families = families();
    let mut words: Vec<(usize, u32, Vec<u32>)> = Vec::new();
    let mut source = String::from(".text\n");
    for (f, family) in families.iter().enumerate() {
        for op in family.ops.clone() {
            let insn = (family.encode)(op);
            source.push_str(".p2align 4\n  .long ");
            let hex: Vec<String> = insn.iter().map(|w| format!("0x{w:08x}")).collect();
            source.push_str(&hex.join(", "));
            source.push('\n');
            words.push((f, op, insn));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (s, o) = (dir.path().join("all.s"), dir.path().join("all.o"));
    std::fs::write(&s, source).unwrap();
    let asm = Command::new("llvm-mc-19")
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
        asm.status.success(),
        "{}",
        String::from_utf8_lossy(&asm.stderr)
    );
    let listing = Command::new("llvm-objdump-19")
        .args([
            "-d",
            "--no-show-raw-insn",
            "--triple=amdgcn-amd-amdhsa",
            "--mcpu=gfx1201",
        ])
        .arg(&o)
        .output()
        .unwrap();
    let listing = String::from_utf8(listing.stdout).unwrap();
    let mut decoded = 0;
    let mut problems = Vec::new();
    for line in listing.lines() {
        let Some((text, addr)) = line.split_once("// ") else {
            continue;
        };
        let Some(addr) = addr
            .split(':')
            .next()
            .and_then(|a| usize::from_str_radix(a, 16).ok())
        else {
            continue;
        };
        let text = text.trim();
        if addr % SLOT != 0 || text.starts_with(".long") || text.starts_with("s_nop") {
            continue;
        }
        let Some((f, op, insn)) = words.get(addr / SLOT) else {
            continue;
        };
        let family = families[*f].name;
        decoded += 1;
        let ours = writes(insn);
        let theirs = llvm_writes(family, text);
        for &(kind, first, count) in &theirs {
            for n in first..first + count {
                let claimed = if kind == 'v' {
                    ours.vgpr(n)
                } else {
                    ours.sgpr(n)
                };
                if !claimed {
                    problems.push(format!(
                        "{family} op 0x{op:x} `{text}`: {kind}{n} written, not claimed ({ours:?})"
                    ));
                }
            }
        }
        let mnemonic = text.split(' ').next().unwrap_or(text);
        if over_approximated(family, mnemonic, text) {
            continue;
        }
        for n in 0..64 {
            let in_theirs = |k: char| {
                theirs
                    .iter()
                    .any(|&(kind, f, c)| kind == k && n >= f && n < f + c)
            };
            if ours.vgpr(n) && !in_theirs('v') || ours.sgpr(n) && !in_theirs('s') {
                problems.push(format!("{family} op 0x{op:x} `{text}`: claims register {n} LLVM does not write ({ours:?})"));
            }
        }
    }
    assert!(decoded > 1500, "only {decoded} instructions decoded");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
