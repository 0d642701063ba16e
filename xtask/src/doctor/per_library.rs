//! A library-side fault (one with a `hipblaslt` range) decided per
//! hipBLASLt found, each by its own version
//! ([`HipblasltLibrary::hipblaslt_version`]): affected when one is, naming
//! it; "cannot tell" when one cannot be read, naming it, so that one
//! unknown library never becomes "no known fault affects this machine".
//! Pure, like the verdicts it feeds (it lies below them).

use super::hipblaslt::{HipblasltLibrary, LibraryKind};
use super::machine::Machine;
use crate::input::knowledge::{Fault, Version};

/// How the libraries found settle a library-side fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// At least one library is in the affected range.
    Affected,
    /// None is affected, at least one could not be read.
    CannotTell,
    /// Every library carries the fix.
    Fixed,
    /// None is affected, none unread (some outside the range).
    NotAffected,
}

/// One library's standing.
enum Standing {
    Affected,
    Unknown,
    Fixed,
    Outside,
}

/// Decides `fault` (with a `hipblaslt` range) for the hipBLASLt of `m`,
/// saying in `why` what each one is; `None` when no hipBLASLt was found
/// (the caller then judges by the version of /opt/rocm).
pub(crate) fn judge(fault: &Fault, m: &Machine, why: &mut Vec<String>) -> Option<Settled> {
    let range = fault.hipblaslt.as_ref()?;
    let libs: Vec<&HipblasltLibrary> = m.hipblaslt_libraries.iter().collect();
    if libs.is_empty() {
        return None;
    }
    let rocm_libs = libs.iter().filter(|l| l.kind == LibraryKind::Rocm).count();
    let mut said = Vec::new();
    let mut standings = Vec::new();
    for lib in &libs {
        let version = lib
            .hipblaslt_version()
            .or_else(|| sibling_version(lib, &libs))
            .or_else(|| {
                // /opt/rocm's version read from its header, for its one library
                let header = m
                    .hipblaslt_version
                    .as_deref()
                    .and_then(Version::parse_prefix);
                header
                    .filter(|_| lib.kind == LibraryKind::Rocm && rocm_libs == 1)
                    .map(|v| {
                        (
                            v,
                            m.hipblaslt_from
                                .clone()
                                .unwrap_or_else(|| "/opt/rocm".to_owned()),
                        )
                    })
            });
        let (standing, text) = match version {
            _ if ours_fixes(fault, lib) => (
                Standing::Fixed,
                format!("{}: our patched build, which carries the fix", lib.path),
            ),
            None => (
                Standing::Unknown,
                format!("{}: could not read its hipBLASLt version", lib.path),
            ),
            Some((v, from)) => match &fault.hipblaslt_fixed {
                Some(fixed) if fixed.matches(&v) => (
                    Standing::Fixed,
                    format!(
                        "{}: hipBLASLt {v} (from {from}) carries the fix ({fixed})",
                        lib.path
                    ),
                ),
                _ if range.matches(&v) => (
                    Standing::Affected,
                    format!(
                        "{}: hipBLASLt {v} (from {from}) is affected ({range})",
                        lib.path
                    ),
                ),
                _ => (
                    Standing::Outside,
                    format!(
                        "{}: hipBLASLt {v} (from {from}) is outside the affected range {range}",
                        lib.path
                    ),
                ),
            },
        };
        standings.push(standing);
        said.push(text);
    }
    why.push(said.join("; "));
    let any = |s: fn(&Standing) -> bool| standings.iter().any(s);
    Some(if any(|s| matches!(s, Standing::Affected)) {
        Settled::Affected
    } else if any(|s| matches!(s, Standing::Unknown)) {
        Settled::CannotTell
    } else if standings.iter().all(|s| matches!(s, Standing::Fixed)) {
        Settled::Fixed
    } else {
        Settled::NotAffected
    })
}

/// The version of another library of the same folder and kind: the
/// development name (`libhipblaslt.so`) and the soname (`.so.1`) beside
/// `libhipblaslt.so.1.2` are the same library when they are not links.
fn sibling_version(
    lib: &HipblasltLibrary,
    libs: &[&HipblasltLibrary],
) -> Option<(Version, String)> {
    let dir = std::path::Path::new(&lib.path).parent()?;
    libs.iter()
        .filter(|o| o.kind == lib.kind && std::path::Path::new(&o.path).parent() == Some(dir))
        .find_map(|o| o.hipblaslt_version())
        .map(|(v, _)| (v, "the library beside it".to_owned()))
}

/// Whether `lib` is (or resolves to) our patched hipBLASLt built by a fix
/// recipe of `fault` for its ROCm (`/opt/rocm-patchkit/hipblaslt-7.2.4`).
fn ours_fixes(fault: &Fault, lib: &HipblasltLibrary) -> bool {
    let prefix = match (&lib.ours, lib.kind) {
        (Some(prefix), _) => prefix.as_str(),
        (None, LibraryKind::Ours) => lib.path.as_str(),
        _ => return false,
    };
    let version = prefix
        .rsplit_once("hipblaslt-")
        .and_then(|(_, v)| Version::parse_prefix(v));
    fault.fixes.iter().any(|fix| {
        fix.build.is_library()
            && matches!((&fix.rocm, &version), (Some(range), Some(v)) if range.matches(v))
    })
}
