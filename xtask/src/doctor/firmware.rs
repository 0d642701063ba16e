//! The GPU firmware versions amdgpu publishes in sysfs: the `fw_version`
//! attribute group of each card's device (`amdgpu_ucode.c`:
//! `/sys/class/drm/cardN/device/fw_version/<block>_fw_version`, `0x%08x`,
//! only the blocks the GPU has) and its VBIOS (`vbios_version`). AMD's
//! triage of a GPU fault asks for them. Read through [`super::fsread`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::fsread::{self, Root, Unread};

/// Firmware blocks listed per card at most (6.18 knows 28).
const MAX_BLOCKS: usize = 64;

/// One GPU's firmware, as amdgpu reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct GpuFirmware {
    /// `card0`.
    pub(crate) card: String,
    /// The PCI address of its device (`0000:03:00.0`), when a link says it.
    pub(crate) pci: Option<String>,
    pub(crate) vbios: Option<String>,
    /// Block (`mes`, `mec`, `sdma`, ...) to version (`0x00000080`).
    pub(crate) versions: BTreeMap<String, String>,
}

/// Every card below `root` that publishes firmware versions.
pub(crate) fn read(root: &Path, unread: &mut Vec<Unread>) -> Vec<GpuFirmware> {
    let fs = Root::new(root);
    let Ok(entries) = fs.list(Path::new("sys/class/drm")) else {
        return Vec::new();
    };
    let cards = entries
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| {
            n.strip_prefix("card")
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        });
    let mut out = Vec::new();
    for card in cards {
        let device = format!("sys/class/drm/{card}/device");
        let dir = format!("{device}/fw_version");
        let Ok(files) = fs.list(Path::new(&dir)) else {
            continue; // not amdgpu's, or a kernel without the group
        };
        let mut versions = BTreeMap::new();
        let blocks = files
            .into_iter()
            .filter_map(|e| e.name.into_string().ok())
            .filter_map(|n| n.strip_suffix("_fw_version").map(str::to_owned))
            .take(MAX_BLOCKS);
        for block in blocks {
            let file = format!("{dir}/{block}_fw_version");
            match fs.read_text(Path::new(&file), fsread::LINE) {
                Ok(v) => {
                    versions.insert(block, short(v.trim()));
                }
                Err(u) => unread.push(u),
            }
        }
        let vbios = fs
            .read_text(Path::new(&format!("{device}/vbios_version")), fsread::LINE)
            .ok()
            .map(|v| short(v.trim()))
            .filter(|v| !v.is_empty());
        let pci = fs.read_link(Path::new(&device)).and_then(|target| {
            target
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_owned)
        });
        out.push(GpuFirmware {
            card,
            pci,
            vbios,
            versions,
        });
    }
    out
}

/// A version as sysfs gives it, cut to a sane length.
fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

impl GpuFirmware {
    /// `card0 (0000:03:00.0, VBIOS 113-...): mec 0x..., mes 0x...`.
    pub(crate) fn describe(&self) -> String {
        let mut about = Vec::new();
        about.extend(self.pci.clone());
        about.extend(self.vbios.as_ref().map(|v| format!("VBIOS {v}")));
        let about = if about.is_empty() {
            String::new()
        } else {
            format!(" ({})", about.join(", "))
        };
        let versions: Vec<String> = self
            .versions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        format!("{}{about}: {}", self.card, versions.join(", "))
    }
}
