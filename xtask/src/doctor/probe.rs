//! Reads the machine below a root folder (`/`, or a fake tree in tests):
//! GPU targets, kernel, CWSR switch, KFD ABI, ROCm and hipBLASLt versions,
//! MIOpen, the loaded amdgpu and our DKMS packages. Reads only, through
//! [`super::fsread`] (inside the root, each file within the size expected of
//! it); never needs root; whatever it cannot read is recorded with the reason.
//! The gathering sits on top: it calls the readers of each part and, for
//! `--pid`, puts what the process uses in place ([`apply_process`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::comgr;
use super::fsread::{self, Root, Unread};
use super::hipblaslt::{self, HipblasltLibrary, Places};
use super::machine::{AmdgpuModule, Gpu, Machine};
use super::maps::Mapped;
use super::pid::Process;
use crate::gpu::codeobj::VerdictCache;

/// Where the machine is read from, and which DKMS packages are ours.
pub(crate) struct Probe<'a> {
    pub(crate) root: &'a Path,
    pub(crate) ours: &'a BTreeSet<String>,
    /// Environment variables whose values matter (workarounds).
    pub(crate) env_names: &'a BTreeSet<String>,
    /// doctor's own environment, read once by `main`.
    pub(crate) env: &'a crate::shared::settings::Environment,
}

const TOPOLOGY: &str = "sys/class/kfd/kfd/topology/nodes";

impl Probe<'_> {
    pub(crate) fn read(&self) -> Machine {
        let mut m = Machine {
            root: self.root.to_path_buf(),
            ..Machine::default()
        };
        m.gpus = self.gpus(&mut m.unread);
        m.os = super::os_release::read(self.root, &mut m.unread);
        m.kernel_release = self
            .text("proc/sys/kernel/osrelease", fsread::LINE, &mut m.unread)
            .map(|s| s.trim().to_owned());
        m.cmdline = self
            .text("proc/cmdline", fsread::CMDLINE, &mut m.unread)
            .map(|s| s.trim().to_owned());
        if self.fs().is_dir(Path::new("sys/module/amdgpu")) {
            m.cwsr_enable = self
                .text(
                    "sys/module/amdgpu/parameters/cwsr_enable",
                    fsread::LINE,
                    &mut m.unread,
                )
                .and_then(|s| {
                    self.parsed(
                        &s,
                        "sys/module/amdgpu/parameters/cwsr_enable",
                        &mut m.unread,
                    )
                });
            m.amdgpu = Some(AmdgpuModule {
                version: self.optional_text("sys/module/amdgpu/version", &mut m.unread),
                srcversion: self.optional_text("sys/module/amdgpu/srcversion", &mut m.unread),
            });
        } else {
            m.unread.push(self.unread(
                "sys/module/amdgpu",
                "does not exist: the amdgpu module is not loaded",
            ));
        }
        if let Some(release) = m.kernel_release.clone() {
            match super::module::find(self.root, &release, &mut m.unread) {
                Some(rel) => m.amdgpu_file = Some(super::module::read(self.root, &rel)),
                None => m.unread.push(self.unread(
                    &format!("lib/modules/{release}"),
                    "no amdgpu.ko, .ko.xz or .ko.zst (modules.dep, updates/, extra/, kernel/)",
                )),
            }
        }
        m.secure_boot = super::secure_boot::read(self.root, &mut m.unread);
        m.kfd_abi = self.kfd_abi(&mut m.unread);
        let rocm = self.rocm_dir();
        m.rocm_version = self
            .text(
                &format!("{rocm}/.info/version"),
                fsread::LINE,
                &mut m.unread,
            )
            .map(|s| s.trim().to_owned());
        self.hipblaslt(&rocm, &mut m);
        m.patched_hipblaslt = self.patched_hipblaslt();
        m.miopen = self.library(&format!("{rocm}/lib"), "libMIOpen.so");
        if m.miopen.is_none() {
            m.unread.push(self.unread(
                &format!("{rocm}/lib/libMIOpen.so*"),
                "no MIOpen library found",
            ));
        }
        m.dkms = self.dkms(
            m.amdgpu.as_ref(),
            m.kernel_release.as_deref(),
            &mut m.unread,
        );
        m.env = self
            .env_names
            .iter()
            .filter_map(|name| {
                let value = self.env.get(name)?;
                Some((name.clone(), value.to_string_lossy().into_owned()))
            })
            .collect();
        m
    }

    pub(super) fn unread(&self, rel: &str, why: impl Into<String>) -> Unread {
        Unread {
            path: format!("/{}", rel.trim_start_matches('/')),
            why: why.into(),
        }
    }

    /// The machine below the root, read the one bounded way.
    pub(super) fn fs(&self) -> Root {
        Root::new(self.root)
    }

    /// The text of a file that should exist, of at most `limit` bytes; a
    /// miss is recorded.
    fn text(&self, rel: &str, limit: u64, unread: &mut Vec<Unread>) -> Option<String> {
        match self.fs().read_text(Path::new(rel), limit) {
            Ok(text) => Some(text),
            Err(u) => {
                unread.push(u);
                None
            }
        }
    }

    /// The text of a one-line file that may be missing; anything else that
    /// keeps it unread is recorded.
    fn optional_text(&self, rel: &str, unread: &mut Vec<Unread>) -> Option<String> {
        match self.fs().read_text(Path::new(rel), fsread::LINE) {
            Ok(text) => Some(text.trim().to_owned()).filter(|s| !s.is_empty()),
            Err(u) if u.why == "does not exist" => None,
            Err(u) => {
                unread.push(u);
                None
            }
        }
    }

    fn parsed<T: std::str::FromStr>(
        &self,
        text: &str,
        rel: &str,
        unread: &mut Vec<Unread>,
    ) -> Option<T> {
        let value = text.trim().parse().ok();
        if value.is_none() {
            unread.push(self.unread(rel, format!("`{}` is not a number", text.trim())));
        }
        value
    }

    fn gpus(&self, unread: &mut Vec<Unread>) -> Option<Vec<Gpu>> {
        let entries = match self.fs().list(Path::new(TOPOLOGY)) {
            Ok(entries) => entries,
            Err(u) => {
                let why = if u.why == "does not exist" {
                    "does not exist: no AMD GPU found (amdgpu not loaded, or no KFD device)"
                        .to_owned()
                } else {
                    u.why
                };
                unread.push(self.unread(TOPOLOGY, why));
                return None;
            }
        };
        let mut nodes: Vec<String> = entries
            .into_iter()
            .filter_map(|e| e.name.into_string().ok())
            .collect();
        nodes.sort_by_key(|n| (n.parse::<u64>().unwrap_or(u64::MAX), n.clone()));
        let mut gpus = Vec::new();
        let mut failed = false;
        for node in nodes {
            let rel = format!("{TOPOLOGY}/{node}/properties");
            let Some(text) = self.text(&rel, fsread::SMALL, unread) else {
                failed = true;
                continue;
            };
            let props: BTreeMap<&str, &str> = text
                .lines()
                .filter_map(|l| l.split_once(char::is_whitespace))
                .map(|(k, v)| (k, v.trim()))
                .collect();
            let Some(version) = props
                .get("gfx_target_version")
                .and_then(|v| v.parse::<u32>().ok())
            else {
                unread.push(self.unread(&rel, "no numeric `gfx_target_version` line"));
                failed = true;
                continue;
            };
            if version == 0 {
                continue; // a CPU node
            }
            gpus.push(Gpu {
                node,
                gfx: gfx_name(version),
                gfx_target_version: version,
                device_id: props.get("device_id").and_then(|v| v.parse().ok()),
            });
        }
        (!failed || !gpus.is_empty()).then_some(gpus)
    }

    /// `opt/rocm`, or the folder its absolute symlink names, taken below the root.
    fn rocm_dir(&self) -> String {
        match self.fs().read_link(Path::new("opt/rocm")) {
            Some(target) if target.is_absolute() => {
                target.to_string_lossy().trim_start_matches('/').to_owned()
            }
            _ => "opt/rocm".to_owned(),
        }
    }

    fn hipblaslt(&self, rocm: &str, m: &mut Machine) {
        if let Some(lib) = self.library(&format!("{rocm}/lib"), "libhipblaslt.so") {
            let version = lib.rsplit_once(".so.").map(|(_, v)| v.to_owned());
            if let Some(version) = version.filter(|v| v.split('.').count() >= 2) {
                m.hipblaslt_version = Some(version);
                m.hipblaslt_from = Some(lib);
                return;
            }
        }
        let rel = format!("{rocm}/include/hipblaslt/hipblaslt-version.h");
        let header = match self.fs().read_text(Path::new(&rel), fsread::SMALL) {
            Ok(header) => header,
            Err(u) => {
                let header = match u.why.as_str() {
                    "does not exist" => format!("no /{rel}"),
                    why => format!("/{rel} {why}"),
                };
                m.unread.push(self.unread(
                    &format!("{rocm}/lib/libhipblaslt.so.*"),
                    format!("no versioned hipBLASLt library, and {header}"),
                ));
                return;
            }
        };
        let define = |name: &str| {
            header.lines().find_map(|l| {
                let mut words = l.split_whitespace();
                (words.next() == Some("#define") && words.next() == Some(name))
                    .then(|| words.next()?.parse::<u32>().ok())
                    .flatten()
            })
        };
        match (
            define("hipblasltVersionMajor"),
            define("hipblasltVersionMinor"),
            define("hipblasltVersionPatch"),
        ) {
            (Some(major), Some(minor), patch) => {
                m.hipblaslt_version = Some(format!("{major}.{minor}.{}", patch.unwrap_or(0)));
                m.hipblaslt_from = Some(format!("/{rel}"));
            }
            _ => m
                .unread
                .push(self.unread(&rel, "no hipblasltVersionMajor/Minor defines")),
        }
    }

    /// `/opt/rocm-patchkit/hipblaslt-<version>` folders that hold a library.
    fn patched_hipblaslt(&self) -> Vec<String> {
        let base = "opt/rocm-patchkit";
        let mut found: Vec<String> = self
            .fs()
            .list(Path::new(base))
            .into_iter()
            .flatten()
            .filter_map(|e| e.name.into_string().ok())
            .filter(|n| n.starts_with("hipblaslt-"))
            .filter(|n| {
                self.library(&format!("{base}/{n}/lib"), "libhipblaslt.so")
                    .is_some()
            })
            .map(|n| format!("/{base}/{n}"))
            .collect();
        found.sort();
        found
    }

    /// The path (from `/`) of the most specific `<name>*` file in `dir`.
    fn library(&self, dir: &str, name: &str) -> Option<String> {
        let entries = self.fs().list(Path::new(dir)).ok()?;
        entries
            .into_iter()
            .filter_map(|e| e.name.into_string().ok())
            .filter(|f| f.starts_with(name))
            .max_by_key(|f| (f.len(), f.clone()))
            .map(|f| format!("/{}/{f}", dir.trim_matches('/')))
    }

    /// The KFD ioctl ABI, asked of /dev/kfd only when the root is `/`.
    fn kfd_abi(&self, unread: &mut Vec<Unread>) -> Option<(u32, u32)> {
        if self.root != Path::new("/") {
            unread.push(self.unread(
                "dev/kfd",
                "not asked below --root: the KFD ABI is judged from the kernel version",
            ));
            return None;
        }
        match kfd_ioctl_version() {
            Ok(v) => Some(v),
            Err(why) => {
                unread.push(self.unread(
                    "dev/kfd",
                    format!("{why}: the KFD ABI is judged from the kernel version"),
                ));
                None
            }
        }
    }
}

/// `gfx1201` from KFD's 120001: major*10000 + minor*100 + stepping, minor
/// and stepping in hex as the gfx names write them (`gfx90a`).
pub(crate) fn gfx_name(version: u32) -> String {
    let (major, minor, stepping) = (version / 10000, (version / 100) % 100, version % 100);
    format!("gfx{major}{minor:x}{stepping:x}")
}

/// AMDKFD_IOC_GET_VERSION on /dev/kfd, opened read-only.
fn kfd_ioctl_version() -> Result<(u32, u32), String> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct Args {
        major: u32,
        minor: u32,
    }
    // _IOR('K', 0x01, struct kfd_ioctl_get_version_args): 8 bytes read.
    const AMDKFD_IOC_GET_VERSION: u64 = (2 << 30) | (8 << 16) | ((b'K' as u64) << 8) | 0x01;
    let file = std::fs::File::open("/dev/kfd").map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_owned(),
        _ => format!("cannot open: {e}"),
    })?;
    let mut args = Args { major: 0, minor: 0 };
    // SAFETY: the request reads 8 bytes into `args`, which lives across the call.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            AMDKFD_IOC_GET_VERSION as _,
            &mut args as *mut Args,
        )
    };
    if rc != 0 {
        return Err(format!(
            "AMDKFD_IOC_GET_VERSION failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok((args.major, args.minor))
}

/// Puts what `process` uses in place of what the machine could load: the
/// hipBLASLt it mapped (judged by the kernel folder beside it, its version
/// from its file name), the comgr it mapped, and its environment for the
/// workaround variables of the faults. Its files are read as it sees them
/// (below [`Process::files`]); a library deleted since it was mapped is
/// not judged by the file now at its path.
pub(crate) fn apply_process(
    process: &Process,
    env: &BTreeMap<String, String>,
    names: &std::collections::BTreeSet<String>,
    m: &mut Machine,
    places: &Places,
    cache: &mut VerdictCache,
) {
    let hipblaslt = process.libraries.get("libhipblaslt");
    m.hipblaslt_libraries = hipblaslt
        .into_iter()
        .flatten()
        .map(|lib| match (&process.files, lib.deleted) {
            (Some(files), false) => hipblaslt::in_use(files, &lib.path, places, cache),
            (Some(_), true) => not_judged(lib, format!(
                "process {} maps {lib}, which was deleted or replaced after it was loaded: the files now at that path are not the ones it runs; restart the program, then run doctor --pid again",
                process.pid
            )),
            (None, _) => not_judged(lib, format!(
                "the files process {} sees could not be read (/proc/{}/root, below)",
                process.pid, process.pid
            )),
        })
        .collect();
    if let Some(lib) = hipblaslt.and_then(|l| l.first()) {
        if let Some(version) = so_version(lib) {
            m.hipblaslt_version = Some(version);
            m.hipblaslt_from = Some(format!("{lib}, mapped by process {}", process.pid));
        }
    }
    if let Some(lib) = process
        .libraries
        .get("libamd_comgr")
        .and_then(|l| l.first())
    {
        m.comgr = Some(match &process.files {
            Some(files) if !lib.deleted => comgr::of_mapped(files, &lib.to_string()),
            _ => comgr::Comgr {
                package: lib.to_string(),
                version: so_version(lib).unwrap_or_default(),
                from: "library".to_owned(),
                debian: false,
            },
        });
    }
    m.env = env
        .iter()
        .filter(|(k, _)| names.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
}

/// `1.1` of `libhipblaslt.so.1.1`.
fn so_version(lib: &Mapped) -> Option<String> {
    let file = String::from_utf8_lossy(super::maps::file_name(&lib.path)).into_owned();
    file.split_once(".so.").map(|(_, v)| v.to_owned())
}

/// A hipBLASLt a process mapped whose kernels are not read, and why.
fn not_judged(lib: &Mapped, why: String) -> HipblasltLibrary {
    let kernels = lib
        .path
        .parent()
        .unwrap_or(Path::new("/"))
        .join("hipblaslt/library");
    HipblasltLibrary {
        path: lib.to_string(),
        kind: hipblaslt::LibraryKind::InUse,
        version: so_version(lib),
        rocm: None,
        kernels: kernels.display().to_string(),
        ours: None,
        rewritten: None,
        record_refused: None,
        judgement: crate::gpu::codeobj::Judgement::CannotTell { why },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_names_follow_the_kfd_encoding() {
        assert_eq!(gfx_name(120001), "gfx1201");
        assert_eq!(gfx_name(120000), "gfx1200");
        assert_eq!(gfx_name(110000), "gfx1100");
        assert_eq!(gfx_name(100300), "gfx1030");
        assert_eq!(gfx_name(100100), "gfx1010");
        assert_eq!(gfx_name(90010), "gfx90a");
        assert_eq!(gfx_name(90402), "gfx942");
    }
}
