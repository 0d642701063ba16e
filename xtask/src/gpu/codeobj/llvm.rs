//! The independent checks of a rewrite, by LLVM's own tools (llvm-19 and
//! clang-tools-19 of Debian bookworm): `clang-offload-bundler --unbundle
//! --verbose` must accept a rewritten file and find its hash right, and
//! `llvm-objdump -d` of a code object before and after must differ only
//! at the sites, with the instruction boundaries our walker found. What
//! the tests and `patchkit-bench rewrite --disasm-all` run; the rewrite itself
//! never calls them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::elf;
use super::isa;

/// The first of `names` that runs (a name on PATH or a path), if any.
fn find(names: &[&str]) -> Option<PathBuf> {
    names.iter().map(PathBuf::from).find(|p| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `llvm-objdump` of llvm-19, if installed.
pub fn objdump() -> Option<PathBuf> {
    find(&["llvm-objdump-19", "/usr/lib/llvm-19/bin/llvm-objdump"])
}

/// `clang-offload-bundler` of clang-tools-19, if installed.
pub fn bundler() -> Option<PathBuf> {
    find(&[
        "clang-offload-bundler-19",
        "/usr/lib/llvm-19/bin/clang-offload-bundler",
    ])
}

/// Unbundles the `triple` entry of the kernel file at `path` with
/// `clang-offload-bundler --verbose`: it must succeed and, for a compressed
/// bundle, say "Hashes match: Yes".
pub fn bundler_accepts(bundler: &Path, path: &Path, triple: &str) -> Result<(), String> {
    let out = Command::new(bundler)
        .args(["--unbundle", "--verbose", "--type=o"])
        .arg(format!("--input={}", path.display()))
        .arg(format!("--targets={triple}"))
        .arg("--output=/dev/null")
        .output()
        .map_err(|e| format!("running {}: {e}", bundler.display()))?;
    let said = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{} refuses {}: {}",
            bundler.display(),
            path.display(),
            said.trim()
        ));
    }
    let compressed = std::fs::read(path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?
        .starts_with(super::bundle::CCOB);
    if compressed && !said.contains("Hashes match: Yes") {
        return Err(format!(
            "{} does not find the hash of {} right: {}",
            bundler.display(),
            path.display(),
            said.trim()
        ));
    }
    Ok(())
}

/// What [`compare_disassembly`] counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compared {
    pub instructions: u64,
    pub sites: u64,
}

/// One instruction line of `llvm-objdump -d`: its address, its text and
/// its encoding's words.
struct Line {
    addr: u64,
    text: String,
    words: usize,
}

/// The instruction lines of a running `llvm-objdump`, read as they come.
struct Listing {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    what: String,
}

impl Listing {
    fn start(objdump: &Path, mcpu: &str, object: &Path) -> Result<Self, String> {
        let mut child = Command::new(objdump)
            .args([
                "--triple=amdgcn-amd-amdhsa",
                &format!("--mcpu={mcpu}"),
                "-d",
                // runs of zero bytes as instructions, not as `...`
                "-z",
            ])
            .arg(object)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("running {}: {e}", objdump.display()))?;
        let stdout = child.stdout.take().expect("piped");
        Ok(Listing {
            child,
            lines: BufReader::with_capacity(1 << 16, stdout).lines(),
            what: format!("llvm-objdump of {}", object.display()),
        })
    }

    /// The next instruction line (`\t<text>  // <addr>: <words>`).
    fn next(&mut self) -> Result<Option<Line>, String> {
        for line in self.lines.by_ref() {
            let line = line.map_err(|e| format!("{}: {e}", self.what))?;
            if !line.starts_with('\t') {
                continue;
            }
            let Some((text, comment)) = line.rsplit_once("// ") else {
                return Err(format!("{}: a line without its address: {line}", self.what));
            };
            let (addr, words) = comment
                .split_once(": ")
                .ok_or_else(|| format!("{}: cannot read the address of: {line}", self.what))?;
            let addr = u64::from_str_radix(addr.trim(), 16)
                .map_err(|_| format!("{}: cannot read the address of: {line}", self.what))?;
            return Ok(Some(Line {
                addr,
                text: text.trim().to_owned(),
                // the encoding's words; a branch's target may follow them
                words: words
                    .split_whitespace()
                    .take_while(|w| w.len() == 8 && w.bytes().all(|b| b.is_ascii_hexdigit()))
                    .count(),
            }));
        }
        Ok(None)
    }

    fn finish(&mut self) -> Result<(), String> {
        let status = self
            .child
            .wait()
            .map_err(|e| format!("{}: {e}", self.what))?;
        if !status.success() {
            return Err(format!("{} failed ({status})", self.what));
        }
        Ok(())
    }
}

impl Drop for Listing {
    /// A comparison that stops early leaves no objdump running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SITE_ON: &str = "s_setreg_imm32_b32 hwreg(26, 0, 2), 2";
const SITE_OFF: &str = "s_setreg_imm32_b32 hwreg(26, 0, 2), 0";

/// `bytes` in a temporary `<name>*.o` file in `dir`, removed when dropped.
fn write_object(dir: &Path, name: &str, bytes: &[u8]) -> Result<tempfile::TempPath, String> {
    let mut file = tempfile::Builder::new()
        .prefix(name)
        .suffix(".o")
        .tempfile_in(dir)
        .map_err(|e| format!("creating a temporary file in {}: {e}", dir.display()))?;
    std::io::Write::write_all(&mut file, bytes)
        .map_err(|e| format!("writing {}: {e}", file.path().display()))?;
    Ok(file.into_temp_path())
}

/// One instruction of the listings, `b` before and `a` after, checked
/// against the walker's (`at`, `len`): the same address and length, the
/// same text but at a site, where `SITE_ON` became `SITE_OFF`. Whether it
/// is a site.
fn compare_line(
    code: &elf::CodeObject<'_>,
    (at, len): (usize, usize),
    b: &Line,
    a: &Line,
) -> Result<bool, String> {
    let offset = b.addr.checked_sub(code.text_addr);
    if offset != Some(at as u64) || b.words * 4 != len || a.addr != b.addr {
        return Err(format!(
            "llvm-objdump's instruction at 0x{:x} ({} words: {}) is not the walker's (.text+0x{at:x}, {} bytes)",
            b.addr,
            b.words,
            b.text,
            len
        ));
    }
    let is_site = len == 8
        && code.text[at..at + 4] == elf::SETREG_SCHED_MODE.to_le_bytes()
        && code.text[at + 4..at + 8] == elf::EXPERT_SCHED_ON.to_le_bytes();
    if is_site {
        if b.text != SITE_ON || a.text != SITE_OFF {
            return Err(format!(
                "at 0x{:x} the site reads `{}` before and `{}` after",
                b.addr, b.text, a.text
            ));
        }
    } else if a.text != b.text {
        return Err(format!(
            "at 0x{:x} the listings differ outside a site: `{}` became `{}`",
            b.addr, b.text, a.text
        ));
    }
    Ok(is_site)
}

/// Disassembles the code objects `original` and `rewritten` (ELF bytes)
/// with `objdump`, both at once, reading their listings side by side:
/// every line must be the same but at the sites our walker finds in
/// `original`, where `SITE_ON` must have become `SITE_OFF`; the
/// instruction counts must agree; and every instruction's address and
/// length must be the walker's. `dir` holds the two objects meanwhile.
pub fn compare_disassembly(
    objdump: &Path,
    original: &[u8],
    rewritten: &[u8],
    dir: &Path,
) -> Result<Compared, String> {
    let code = elf::parse(original)?;
    if elf::parse(rewritten)?.text.len() != code.text.len() {
        return Err("the rewritten code object's .text differs in size".to_owned());
    }
    let mcpu = code.gfx();
    let before_path = write_object(dir, "original-", original)?;
    let after_path = write_object(dir, "rewritten-", rewritten)?;
    let mut before = Listing::start(objdump, &mcpu, &before_path)?;
    let mut after = Listing::start(objdump, &mcpu, &after_path)?;
    let mut walker = isa::Instructions::of(&code);
    let mut counted = Compared::default();
    loop {
        let (b, a) = (before.next()?, after.next()?);
        let (b, a) = match (b, a) {
            (None, None) => break,
            (Some(b), Some(a)) => (b, a),
            (b, _) => {
                return Err(format!(
                    "the listings end apart: the {} one is longer (at instruction {})",
                    if b.is_some() { "original" } else { "rewritten" },
                    counted.instructions
                ))
            }
        };
        let (at, len) = walker.next().ok_or_else(|| {
            format!(
                "llvm-objdump lists an instruction at 0x{:x} past the walker's end",
                b.addr
            )
        })??;
        let is_site = compare_line(&code, (at, len), &b, &a)?;
        counted.instructions += 1;
        if is_site {
            counted.sites += 1;
        }
    }
    if let Some(rest) = walker.next() {
        let (at, _) = rest?;
        return Err(format!(
            "the walker finds an instruction at .text+0x{at:x} that llvm-objdump does not list"
        ));
    }
    before.finish()?;
    after.finish()?;
    Ok(counted)
}
