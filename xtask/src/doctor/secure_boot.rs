//! Secure Boot and DKMS's signing key: whether the firmware enforces
//! signatures, whether the key DKMS signs modules with
//! (`/var/lib/dkms/mok.pub`) is in shim's MOK list, and what to do when a
//! DKMS module will not load because of it. Reads only, through
//! [`super::fsread`].

use std::path::Path;

use serde::Serialize;

use super::fsread::{self, Root, Unread};

const EFIVARS: &str = "sys/firmware/efi/efivars";
const SECURE_BOOT: &str = "SecureBoot-8be4df61-93ca-11d2-aa0d-e0800e4c9796";
const MOK_LIST: &str = "MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23";
/// Where shim mirrors its MOK list without the efivar attribute header.
const MOK_MIRROR: &str = "sys/firmware/efi/mok-variables/MokListRT";
/// The key DKMS 3 signs modules with.
pub(crate) const DKMS_KEY: &str = "var/lib/dkms/mok.pub";

/// What doctor read about Secure Boot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct SecureBoot {
    /// `None`: not booted through UEFI, or the variable is unreadable.
    pub(crate) enabled: Option<bool>,
    /// `/var/lib/dkms/mok.pub` when it exists.
    pub(crate) dkms_key: Option<String>,
    /// Whether that key is in the MOK list; `None` when either is unread.
    pub(crate) key_enrolled: Option<bool>,
}

/// Reads Secure Boot's state and the DKMS key below `root`; a file that is
/// there but cannot be read (not a file, too large) goes to `unread`.
pub(crate) fn read(root: &Path, unread: &mut Vec<Unread>) -> SecureBoot {
    let fs = Root::new(root);
    let mut read = |path: &Path, limit: u64| match fs.read(path, limit) {
        Ok(bytes) => Some(bytes),
        Err(u) if u.why == "does not exist" => None,
        Err(u) => {
            unread.push(u);
            None
        }
    };
    let var = read(&Path::new(EFIVARS).join(SECURE_BOOT), fsread::LINE);
    // An efivar is 4 bytes of attributes, then the value: one byte, 1 = on.
    let enabled = var.and_then(|v| v.get(4).map(|b| *b == 1));
    let key = read(Path::new(DKMS_KEY), fsread::SMALL);
    let mok = read(Path::new(MOK_MIRROR), fsread::SMALL)
        .or_else(|| read(&Path::new(EFIVARS).join(MOK_LIST), fsread::SMALL));
    let key_enrolled = match (&key, &mok) {
        (Some(key), Some(mok)) if !key.is_empty() => {
            Some(mok.windows(key.len()).any(|w| w == key.as_slice()))
        }
        _ => None,
    };
    SecureBoot {
        enabled,
        dkms_key: key.map(|_| format!("/{DKMS_KEY}")),
        key_enrolled,
    }
}

impl SecureBoot {
    /// One line for the report.
    pub(crate) fn describe(&self) -> String {
        let state = match self.enabled {
            Some(true) => "on",
            Some(false) => "off",
            None => "not read (no UEFI variables: legacy boot or no efivarfs)",
        };
        let key = match (&self.dkms_key, self.key_enrolled) {
            (None, _) => "no DKMS signing key yet".to_owned(),
            (Some(k), Some(true)) => format!("DKMS key {k} enrolled"),
            (Some(k), Some(false)) => format!("DKMS key {k} NOT enrolled"),
            (Some(k), None) => format!("DKMS key {k}, enrolment not read"),
        };
        format!("{state}; {key}")
    }

    /// What to do so a DKMS module loads, when Secure Boot stands in the way.
    pub(crate) fn advice(&self) -> Option<String> {
        if self.enabled != Some(true) || self.key_enrolled == Some(true) {
            return None;
        }
        let key = self.dkms_key.as_deref().unwrap_or("/var/lib/dkms/mok.pub");
        Some(format!(
            "Secure Boot is on: a DKMS amdgpu loads only when signed by an enrolled key (else `modprobe amdgpu` says \"Key was rejected by service\" and the kernel's own amdgpu stays): sudo mokutil --import {key}, reboot and enroll it in MokManager"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_state_and_finds_the_key_in_the_mok_list() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(read(root, &mut Vec::new()), SecureBoot::default());
        std::fs::create_dir_all(root.join(EFIVARS)).unwrap();
        std::fs::write(root.join(EFIVARS).join(SECURE_BOOT), [6, 0, 0, 0, 1]).unwrap();
        std::fs::create_dir_all(root.join("var/lib/dkms")).unwrap();
        std::fs::write(root.join(DKMS_KEY), b"\x30\x82DER-KEY").unwrap();
        let sb = read(root, &mut Vec::new());
        assert_eq!(sb.enabled, Some(true));
        assert_eq!(sb.key_enrolled, None);
        assert!(sb
            .advice()
            .unwrap()
            .contains("mokutil --import /var/lib/dkms/mok.pub"));
        std::fs::write(
            root.join(EFIVARS).join(MOK_LIST),
            b"\x07\0\0\0sigs\x30\x82DER-KEY..",
        )
        .unwrap();
        let sb = read(root, &mut Vec::new());
        assert_eq!(sb.key_enrolled, Some(true));
        assert_eq!(sb.advice(), None);
        std::fs::write(root.join(EFIVARS).join(MOK_LIST), b"\x07\0\0\0other").unwrap();
        assert_eq!(read(root, &mut Vec::new()).key_enrolled, Some(false));
        std::fs::write(root.join(EFIVARS).join(SECURE_BOOT), [6, 0, 0, 0, 0]).unwrap();
        assert_eq!(read(root, &mut Vec::new()).advice(), None);
    }
}
