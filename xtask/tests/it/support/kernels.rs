//! The kernels installed on this machine that the slow tests build for,
//! boot and look into.

use std::path::Path;

/// The installed kernel releases of the 6.12 series that have headers,
/// oldest first.
pub(crate) fn debian_612_releases() -> Vec<String> {
    let mut releases: Vec<(xtask::input::kernel::KernelVersion, String)> =
        std::fs::read_dir("/lib/modules")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|r| {
                r.starts_with("6.12.") && Path::new("/lib/modules").join(r).join("build").is_dir()
            })
            .filter_map(|r| Some((xtask::input::kernel::KernelVersion::from_release(&r)?, r)))
            .collect();
    releases.sort();
    releases.into_iter().map(|(_, r)| r).collect()
}

/// The newest installed kernel release of the 6.12 series that has headers.
pub(crate) fn debian_612_headers() -> Option<String> {
    debian_612_releases().pop()
}
