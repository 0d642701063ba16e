//! The hipBLASLt version of one library found, the one accessor every
//! library-side verdict reads ([`HipblasltLibrary::hipblaslt_version`]):
//! from the version its reader recorded (`libhipblaslt.so.1.2`, a bare
//! `1.2.4`), else from the ROCm release its PyTorch wheel was built for
//! (`+rocm7.2`, `HIP 7.2.x`) through the release table of hipBLASLt's own
//! changelog. A release the changelog does not name gives no version:
//! "cannot tell" for that library, never a guess.

use super::hipblaslt::HipblasltLibrary;
use crate::knowledge::Version;

/// hipBLASLt's release per ROCm release (major, minor), as
/// `projects/hipblaslt/CHANGELOG.md` of rocm-libraries heads its sections
/// ("hipBLASLt 1.2.0 for ROCm 7.2.0", "hipBLASLt 1.4.1 for ROCm 7.14",
/// "hipBLASLt 1.5.0 for ROCm 10.1.0"). TheRock's 7.9 to 7.13 and 10.0 are
/// not named there.
const BY_ROCM: &[((u32, u32), &str)] = &[
    ((7, 0), "1.0"),
    ((7, 1), "1.1"),
    ((7, 2), "1.2"),
    ((7, 14), "1.4.1"),
    ((10, 1), "1.5.0"),
];

impl HipblasltLibrary {
    /// The hipBLASLt version of this library, and where it was read.
    pub fn hipblaslt_version(&self) -> Option<(Version, String)> {
        let text = self.version.as_deref()?;
        if let Some(v) = own_version(text) {
            return Some((v, "its file name".to_owned()));
        }
        let rocm = wheel_rocm(text)?;
        let parts = &rocm.0;
        let key = (*parts.first()?, *parts.get(1)?);
        let (_, hipblaslt) = BY_ROCM.iter().find(|(r, _)| *r == key)?;
        Some((
            Version::parse_prefix(hipblaslt)?,
            format!("its PyTorch wheel's ROCm {}.{}", key.0, key.1),
        ))
    }
}

/// `1.2` of `libhipblaslt.so.1.2` (a part of the recorded text) or of a
/// bare version; a lone major (`libhipblaslt.so.1`) says too little.
fn own_version(text: &str) -> Option<Version> {
    let candidate = text
        .split("; ")
        .find_map(|part| part.trim().strip_prefix("libhipblaslt.so."))
        .or_else(|| {
            text.trim()
                .chars()
                .next()?
                .is_ascii_digit()
                .then_some(text.trim())
        })?;
    Version::parse_prefix(candidate).filter(|v| v.0.len() >= 2)
}

/// The ROCm release a PyTorch wheel names: `+rocm7.2` in its version,
/// else its `HIP 7.2.x`.
fn wheel_rocm(text: &str) -> Option<Version> {
    let after = |marker: &str| {
        text.find(marker)
            .and_then(|at| Version::parse_prefix(&text[at + marker.len()..]))
            .filter(|v| v.0.len() >= 2)
    };
    after("+rocm").or_else(|| after("HIP "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codeobj::Judgement;
    use crate::doctor::hipblaslt::LibraryKind;

    fn lib(version: &str) -> HipblasltLibrary {
        HipblasltLibrary {
            path: "/x/libhipblaslt.so".into(),
            kind: LibraryKind::Pytorch,
            version: Some(version.into()),
            rocm: None,
            kernels: "/x/hipblaslt/library".into(),
            ours: None,
            rewritten: None,
            judgement: Judgement::CannotTell { why: "-".into() },
        }
    }

    fn version(text: &str) -> Option<String> {
        lib(text).hipblaslt_version().map(|(v, _)| v.to_string())
    }

    #[test]
    fn versions_come_from_the_file_name_then_the_wheels_rocm() {
        assert_eq!(version("1.2").as_deref(), Some("1.2"));
        assert_eq!(version("1.1.0").as_deref(), Some("1.1.0"));
        assert_eq!(
            version("PyTorch 2.9.1+rocm7.1, HIP 7.1.25424; libhipblaslt.so.1.1").as_deref(),
            Some("1.1")
        );
        assert_eq!(
            version("PyTorch 2.10.0+rocm7.2, HIP 7.2.26015").as_deref(),
            Some("1.2")
        );
        assert_eq!(version("PyTorch 2.11.0+rocm7.14").as_deref(), Some("1.4.1"));
        assert_eq!(
            version("PyTorch 2.10.0, HIP 7.1.25424").as_deref(),
            Some("1.1")
        );
        // TheRock releases its changelog does not name, and a lone major
        assert_eq!(version("PyTorch 2.9.0+rocm7.10.0"), None);
        assert_eq!(version("1"), None);
        assert_eq!(version("PyTorch 2.9.0"), None);
    }
}
