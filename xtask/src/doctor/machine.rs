//! What doctor read of a machine, as values: the [`Machine`] and the parts
//! of it that have no reader of their own (GPUs, the loaded amdgpu, DKMS
//! packages). Below every judge; `probe.rs` fills it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::fsread::Unread;

/// What doctor knows about a machine. `None` means "could not read": the
/// reason is in `unread`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Machine {
    pub root: PathBuf,
    /// AMD GPUs of the KFD topology (CPU nodes left out).
    pub gpus: Option<Vec<Gpu>>,
    /// The distribution (`/etc/os-release`), for the commands it runs.
    pub os: Option<super::os_release::OsRelease>,
    /// The running kernel release (`6.14.0-36-generic`).
    pub kernel_release: Option<String>,
    pub cmdline: Option<String>,
    /// `amdgpu`'s `cwsr_enable` parameter as the loaded module reports it.
    pub cwsr_enable: Option<i64>,
    /// The KFD ioctl ABI (major, minor), read from /dev/kfd (root `/` only).
    pub kfd_abi: Option<(u32, u32)>,
    /// `/opt/rocm/.info/version` (`7.1.1-53`).
    pub rocm_version: Option<String>,
    pub hipblaslt_version: Option<String>,
    /// Where the hipBLASLt version was read.
    pub hipblaslt_from: Option<String>,
    /// Every hipBLASLt found (ROCm, distribution, ours, PyTorch wheels), each
    /// judged by its kernels; filled by [`super::hipblaslt::find`].
    pub hipblaslt_libraries: Vec<super::hipblaslt::HipblasltLibrary>,
    /// rocBLAS and hipSPARSELt with gfx12 kernels, judged like hipBLASLt;
    /// filled by [`super::tensile::find`].
    pub tensile_libraries: Vec<super::hipblaslt::HipblasltLibrary>,
    /// Patched hipBLASLt builds of ours (`/opt/rocm-patchkit/hipblaslt-7.1.1`).
    pub patched_hipblaslt: Vec<String>,
    /// The MIOpen library found below /opt/rocm/lib.
    pub miopen: Option<String>,
    pub amdgpu: Option<AmdgpuModule>,
    /// The amdgpu module file `modprobe` would load for the running kernel,
    /// and what its gfx12 trap handler says.
    pub amdgpu_file: Option<super::module::ModuleFile>,
    /// Secure Boot and whether DKMS's signing key is enrolled.
    pub secure_boot: super::secure_boot::SecureBoot,
    /// DKMS modules registered in /var/lib/dkms.
    pub dkms: Vec<DkmsPackage>,
    /// The workaround environment variables set for this process.
    pub env: BTreeMap<String, String>,
    /// The knobs set (environment, modprobe.d, command line, sysfs); filled
    /// by [`super::knobs::read`]; the JSON carries them judged, in the
    /// report's `knobs`.
    #[serde(skip)]
    pub knob_settings: Vec<super::knobs::Setting>,
    /// How the knobs were read: files read lossily (not UTF-8), settings
    /// not kept past the bounds of [`super::knobs`].
    pub knob_notes: Vec<String>,
    /// The comgr programs load; filled by [`super::comgr::find`].
    pub comgr: Option<super::comgr::Comgr>,
    /// The running program judged (`doctor --pid`), if any.
    pub process: Option<super::pid::Process>,
    /// `/dev/kfd` and the render nodes, and whether the user can open them.
    pub access: super::access::Access,
    /// The firmware versions amdgpu publishes, per card.
    pub firmware: Vec<super::firmware::GpuFirmware>,
    pub unread: Vec<Unread>,
}

/// One GPU node of the KFD topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    pub node: String,
    /// `gfx1201`.
    pub gfx: String,
    /// As KFD reports it: major*10000 + minor*100 + stepping.
    pub gfx_target_version: u32,
    pub device_id: Option<u32>,
}

/// The amdgpu kernel module, when loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AmdgpuModule {
    /// MODULE_VERSION: set by our DKMS builds to the package version; the
    /// in-tree module has none.
    pub version: Option<String>,
    pub srcversion: Option<String>,
}

/// One version of one DKMS module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DkmsPackage {
    pub name: String,
    pub version: String,
    /// Whether it is one of rocm-patchkit's packages.
    pub ours: bool,
    /// Kernel releases it was built for.
    pub built_for: Vec<String>,
    /// Whether the loaded amdgpu is this build.
    pub loaded: bool,
    /// How that was told: `version` (MODULE_VERSION) or `srcversion` (the
    /// loaded module's srcversion against the build for the running kernel).
    pub loaded_by: Option<String>,
}
