//! Which comgr (`libamd_comgr`) programs load, and from which build: the
//! distribution's package (dpkg status, or rpm when the root is `/`) or
//! AMD's own: under /opt/rocm (`lib`, TheRock's `core*/lib`) or in TheRock's
//! wheels (`site-packages/_rocm_sdk_core*/lib`). The unbundle cache fault of
//! the knowledge file is in Debian's patched builds only, so where it came
//! from matters.

use std::path::Path;

use super::layouts::Places;

use serde::Serialize;

/// The comgr found, and where its version was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Comgr {
    /// `libamd-comgr3`, `rocm-comgr`, or the library file of AMD's build.
    pub(crate) package: String,
    /// The package version (`7.0.2+dfsg-3`), or the library's file name version.
    pub(crate) version: String,
    /// `dpkg`, `rpm`, or `library` (AMD's build under /opt/rocm).
    pub(crate) from: String,
    /// A Debian or Ubuntu build (dpkg, a `+dfsg` version): the one whose
    /// cache key the knowledge file judges.
    pub(crate) debian: bool,
}

/// The dpkg status file below the root.
const DPKG_STATUS: &str = "var/lib/dpkg/status";

/// The text of a file below the root, read through doctor's one bounded
/// reader (inside the root, a regular file, at most [`fsread::LIST`]).
fn read_text(root: &Path, rel: &str) -> Option<String> {
    super::fsread::Root::new(root)
        .read_text(Path::new(rel), super::fsread::LIST)
        .ok()
}

/// The installed `libamd-comgr*` package of the dpkg status file.
pub(crate) fn from_dpkg_status(text: &str) -> Option<Comgr> {
    text.split("\n\n").find_map(|stanza| {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(|v| v.trim().to_owned())
            })
        };
        let package = field("Package")?;
        let installed = field("Status").is_some_and(|s| s.ends_with(" installed"));
        (package.starts_with("libamd-comgr") && !package.ends_with("-dev") && installed).then(
            || Comgr {
                package,
                version: field("Version").unwrap_or_default(),
                from: "dpkg".to_owned(),
                debian: true,
            },
        )
    })
}

/// comgr as the machine below `root` has it: dpkg's package first, then
/// rpm's (root `/` only), then AMD's library in the first folder of
/// [`super::layouts::comgr_dirs`] that holds one (`/opt/rocm/lib` first).
pub(crate) fn find(root: &Path, places: &Places) -> Option<Comgr> {
    if let Some(c) = read_text(root, DPKG_STATUS).and_then(|t| from_dpkg_status(&t)) {
        return Some(c);
    }
    if root == Path::new("/") {
        if let Some(c) = from_rpm() {
            return Some(c);
        }
    }
    super::layouts::comgr_dirs(root, places)
        .iter()
        .find_map(|dir| library(root, dir))
}

/// `rpm -q` of the comgr package names distributions use.
fn from_rpm() -> Option<Comgr> {
    let out = std::process::Command::new("rpm")
        .args(["-q", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\\n"])
        .args(["rocm-comgr", "comgr", "libamd_comgr3"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| !l.contains("not installed"))
        .find_map(|l| l.split_once(' '))
        .map(|(name, version)| Comgr {
            package: name.to_owned(),
            version: version.to_owned(),
            from: "rpm".to_owned(),
            debian: false,
        })
}

/// AMD's comgr in a library folder (a machine path).
fn library(root: &Path, dir: &Path) -> Option<Comgr> {
    let name = super::fsread::Root::new(root)
        .list(dir)
        .ok()?
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| n.starts_with("libamd_comgr.so"))
        .max_by_key(|n| (n.len(), n.clone()))?;
    Some(Comgr {
        version: name
            .split_once(".so.")
            .map_or(String::new(), |(_, v)| v.to_owned()),
        package: dir.join(&name).display().to_string(),
        from: "library".to_owned(),
        debian: false,
    })
}

/// The comgr of a library path a process mapped: the dpkg package when the
/// file is the distribution's, else AMD's build at that path.
pub(crate) fn of_mapped(root: &Path, path: &str) -> Comgr {
    let distribution = path.starts_with("/usr/lib") || path.starts_with("/lib");
    if distribution {
        if let Some(c) = read_text(root, DPKG_STATUS).and_then(|t| from_dpkg_status(&t)) {
            return c;
        }
    }
    let file = path.rsplit('/').next().unwrap_or(path);
    Comgr {
        package: path.to_owned(),
        version: file
            .split_once(".so.")
            .map_or(String::new(), |(_, v)| v.to_owned()),
        from: "library".to_owned(),
        debian: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_comgr_package_is_read_from_dpkg_status() {
        let status = "Package: libamd-comgr-dev\nStatus: install ok installed\nVersion: 7.0.2+dfsg-3\n\nPackage: libamd-comgr3\nStatus: deinstall ok config-files\nVersion: 6.4.3+dfsg-1~exp1\n\nPackage: libamd-comgr3\nArchitecture: amd64\nStatus: install ok installed\nVersion: 7.0.2+dfsg-3\n";
        let c = from_dpkg_status(status).unwrap();
        assert_eq!(
            (c.package.as_str(), c.version.as_str()),
            ("libamd-comgr3", "7.0.2+dfsg-3")
        );
        assert!(c.debian);
        assert_eq!(
            from_dpkg_status("Package: bash\nStatus: install ok installed\n"),
            None
        );
    }
}
