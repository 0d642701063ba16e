//! What a code object declares about its kernels: the `amdhsa.kernels`
//! entries of its metadata notes (`NT_AMDGPU_METADATA`, msgpack: each
//! kernel's `.name`, `.symbol` and `.args` with their `.name` and
//! `.offset`) and, from the kernel descriptor (`<name>.kd`), which SGPR
//! pair holds the kernel-argument segment pointer when the kernel starts.

use super::elf::{self, Symbol};
use super::msgpack::{self, Value};

/// The note that holds the metadata (LLVM's `NT_AMDGPU_METADATA`).
const NOTE_NAME: &str = "AMDGPU";
const NT_AMDGPU_METADATA: u32 = 32;
/// `kernel_code_properties` (a u16 at byte 56 of the 64-byte descriptor):
/// the user SGPRs before the kernarg pointer, and the pointer's own bit.
const PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
const DISPATCH_PTR: u16 = 1 << 1;
const QUEUE_PTR: u16 = 1 << 2;
const KERNARG_SEGMENT_PTR: u16 = 1 << 3;

/// One kernel argument as the metadata declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arg {
    pub(crate) name: Option<String>,
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

/// One kernel as the metadata declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kernel {
    pub(crate) name: String,
    /// Its descriptor's symbol (`<name>.kd`).
    pub(crate) symbol: String,
    pub(crate) args: Vec<Arg>,
}

impl Kernel {
    /// The argument called `name`, if declared.
    pub(crate) fn arg(&self, name: &str) -> Option<&Arg> {
        self.args.iter().find(|a| a.name.as_deref() == Some(name))
    }
}

/// The kernel named `name` in the metadata notes of the ELF `bytes`.
pub(crate) fn named(bytes: &[u8], name: &str) -> Result<Option<Kernel>, String> {
    for note in elf::notes(bytes, NOTE_NAME, NT_AMDGPU_METADATA)? {
        let root = msgpack::decode(note).map_err(|e| format!("metadata note: {e}"))?;
        let kernels = root
            .get("amdhsa.kernels")
            .and_then(Value::as_array)
            .unwrap_or_default();
        for k in kernels {
            if k.get(".name").and_then(Value::as_str) == Some(name) {
                return kernel(k).map(Some);
            }
        }
    }
    Ok(None)
}

fn kernel(k: &Value<'_>) -> Result<Kernel, String> {
    let text = |v: &Value<'_>, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let name = text(k, ".name").unwrap_or_default();
    let symbol =
        text(k, ".symbol").ok_or_else(|| format!("metadata of kernel {name}: no .symbol"))?;
    let mut args = Vec::new();
    for a in k.get(".args").and_then(Value::as_array).unwrap_or_default() {
        let number = |key: &str| {
            a.get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("metadata of kernel {name}: an argument without {key}"))
        };
        args.push(Arg {
            name: text(a, ".name"),
            offset: number(".offset")?,
            size: number(".size")?,
        });
    }
    Ok(Kernel { name, symbol, args })
}

/// The first SGPR of the pair that holds the kernel-argument segment
/// pointer when `kernel` starts, from its descriptor; `Err` when it has
/// none (or preloads arguments into SGPRs, which no load then shows).
pub(crate) fn kernarg_sgpr(
    bytes: &[u8],
    symbols: &[Symbol],
    kernel: &Kernel,
) -> Result<u16, String> {
    let kd = symbols
        .iter()
        .find(|s| s.name == kernel.symbol && s.kind == 1)
        .ok_or_else(|| format!("no kernel descriptor symbol {}", kernel.symbol))?;
    let desc = elf::symbol_bytes(bytes, kd, 64)?;
    let props = u16::from_le_bytes([desc[56], desc[57]]);
    let preload = u16::from_le_bytes([desc[58], desc[59]]) & 0x7f;
    if props & KERNARG_SEGMENT_PTR == 0 {
        return Err(format!(
            "kernel {} takes no kernel-argument pointer",
            kernel.name
        ));
    }
    if preload != 0 {
        return Err(format!(
            "kernel {} preloads {preload} argument dwords into SGPRs",
            kernel.name
        ));
    }
    let before = 4 * u16::from(props & PRIVATE_SEGMENT_BUFFER != 0)
        + 2 * u16::from(props & DISPATCH_PTR != 0)
        + 2 * u16::from(props & QUEUE_PTR != 0);
    Ok(before)
}
