//! The hipBLASLt version of one library found, the one accessor every
//! library-side verdict reads ([`HipblasltLibrary::hipblaslt_version`]):
//! from the version its file name carries (`libhipblaslt.so.1.2`, a bare
//! `1.2.4`), else from the ROCm release the library came with
//! ([`HipblasltLibrary::rocm`]: its layout's dist-info, `.info/version` or
//! folder name, or the ROCm its PyTorch wheel was built for) through the
//! release table of hipBLASLt's own changelog. A release the changelog
//! does not name gives no version: "cannot tell" for that library, never a
//! guess.

use super::hipblaslt::HipblasltLibrary;
use crate::input::knowledge::Version;

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
    pub(crate) fn hipblaslt_version(&self) -> Option<(Version, String)> {
        if let Some(v) = self.version.as_deref().and_then(own_version) {
            return Some((v, "its file name".to_owned()));
        }
        // the release as a stream names it: 7.1.1-53, 7.10.0, 10.1
        let rocm = self.rocm.as_ref()?;
        let parts = Version::parse_prefix(&rocm.version)?.0;
        let key = (*parts.first()?, *parts.get(1)?);
        let (_, hipblaslt) = BY_ROCM.iter().find(|(r, _)| *r == key)?;
        Some((
            Version::parse_prefix(hipblaslt)?,
            format!("ROCm {}.{} read in {}", key.0, key.1, rocm.from),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::hipblaslt::{LibraryKind, RocmRelease};
    use crate::gpu::codeobj::Judgement;

    fn lib(version: Option<&str>, rocm: Option<&str>) -> HipblasltLibrary {
        HipblasltLibrary {
            path: "/x/libhipblaslt.so".into(),
            kind: LibraryKind::Pytorch,
            version: version.map(Into::into),
            rocm: rocm.map(|r| RocmRelease {
                version: r.into(),
                from: "/x/torch/version.py".into(),
            }),
            kernels: "/x/hipblaslt/library".into(),
            ours: None,
            rewritten: None,
            record_refused: None,
            judgement: Judgement::CannotTell { why: "-".into() },
        }
    }

    fn version(text: Option<&str>, rocm: Option<&str>) -> Option<String> {
        lib(text, rocm)
            .hipblaslt_version()
            .map(|(v, _)| v.to_string())
    }

    #[test]
    fn versions_come_from_the_file_name_then_the_librarys_rocm_release() {
        assert_eq!(version(Some("1.2"), None).as_deref(), Some("1.2"));
        assert_eq!(
            version(Some("1.1.0"), Some("7.2")).as_deref(),
            Some("1.1.0")
        );
        assert_eq!(
            version(
                Some("PyTorch 2.9.1+rocm7.1, HIP 7.1.25424; libhipblaslt.so.1.1"),
                Some("7.1")
            )
            .as_deref(),
            Some("1.1")
        );
        let (v, from) = lib(Some("PyTorch 2.10.0+rocm7.2, HIP 7.2.26015"), Some("7.2"))
            .hipblaslt_version()
            .unwrap();
        assert_eq!(v.to_string(), "1.2");
        assert_eq!(from, "ROCm 7.2 read in /x/torch/version.py");
        // releases as their layouts name them
        assert_eq!(version(None, Some("7.1.1-53")).as_deref(), Some("1.1"));
        assert_eq!(version(None, Some("7.14.0")).as_deref(), Some("1.4.1"));
        assert_eq!(version(None, Some("10.1.0")).as_deref(), Some("1.5.0"));
        // TheRock releases its changelog does not name, a lone major, nothing
        assert_eq!(version(None, Some("7.10.0")), None);
        assert_eq!(version(None, Some("10.0")), None);
        assert_eq!(version(Some("1"), None), None);
        assert_eq!(version(Some("PyTorch 2.9.0"), None), None);
        assert_eq!(version(None, Some("nightly")), None);
    }
}
