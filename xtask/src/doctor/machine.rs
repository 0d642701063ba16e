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
pub(crate) struct Machine {
    pub(crate) root: PathBuf,
    /// AMD GPUs of the KFD topology (CPU nodes left out).
    pub(crate) gpus: Option<Vec<Gpu>>,
    /// The distribution (`/etc/os-release`), for the commands it runs.
    pub(crate) os: Option<super::os_release::OsRelease>,
    /// The running kernel release (`6.14.0-36-generic`).
    pub(crate) kernel_release: Option<String>,
    pub(crate) cmdline: Option<String>,
    /// `amdgpu`'s `cwsr_enable` parameter as the loaded module reports it.
    pub(crate) cwsr_enable: Option<i64>,
    /// The KFD ioctl ABI (major, minor), read from /dev/kfd (root `/` only).
    pub(crate) kfd_abi: Option<(u32, u32)>,
    /// `/opt/rocm/.info/version` (`7.1.1-53`).
    pub(crate) rocm_version: Option<String>,
    pub(crate) hipblaslt_version: Option<String>,
    /// Where the hipBLASLt version was read.
    pub(crate) hipblaslt_from: Option<String>,
    /// Every hipBLASLt found (ROCm, distribution, ours, PyTorch wheels), each
    /// judged by its kernels; filled by [`super::hipblaslt::find`].
    pub(crate) hipblaslt_libraries: Vec<super::hipblaslt::HipblasltLibrary>,
    /// rocBLAS and hipSPARSELt with gfx12 kernels, judged like hipBLASLt;
    /// filled by [`super::tensile::find`].
    pub(crate) tensile_libraries: Vec<super::hipblaslt::HipblasltLibrary>,
    /// Patched hipBLASLt builds of ours (`/opt/rocm-patchkit/hipblaslt-7.1.1`).
    pub(crate) patched_hipblaslt: Vec<String>,
    /// The MIOpen library found below /opt/rocm/lib.
    pub(crate) miopen: Option<String>,
    pub(crate) amdgpu: Option<AmdgpuModule>,
    /// The amdgpu module file `modprobe` would load for the running kernel,
    /// and what its gfx12 trap handler says.
    pub(crate) amdgpu_file: Option<super::module::ModuleFile>,
    /// Secure Boot and whether DKMS's signing key is enrolled.
    pub(crate) secure_boot: super::secure_boot::SecureBoot,
    /// DKMS modules registered in /var/lib/dkms.
    pub(crate) dkms: Vec<DkmsPackage>,
    /// The workaround environment variables set for this process.
    pub(crate) env: BTreeMap<String, String>,
    /// The knobs set (environment, modprobe.d, command line, sysfs); filled
    /// by [`super::knobs::read`]; the JSON carries them judged, in the
    /// report's `knobs`.
    #[serde(skip)]
    pub(crate) knob_settings: Vec<super::knobs::Setting>,
    /// How the knobs were read: files read lossily (not UTF-8), settings
    /// not kept past the bounds of [`super::knobs`].
    pub(crate) knob_notes: Vec<String>,
    /// The comgr programs load; filled by [`super::comgr::find`].
    pub(crate) comgr: Option<super::comgr::Comgr>,
    /// The running program judged (`doctor --pid`), if any.
    pub(crate) process: Option<super::pid::Process>,
    /// `/dev/kfd` and the render nodes, and whether the user can open them.
    pub(crate) access: super::access::Access,
    /// The firmware versions amdgpu publishes, per card.
    pub(crate) firmware: Vec<super::firmware::GpuFirmware>,
    pub(crate) unread: Vec<Unread>,
}

/// One GPU node of the KFD topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Gpu {
    pub(crate) node: String,
    /// `gfx1201`.
    pub(crate) gfx: String,
    /// As KFD reports it: major*10000 + minor*100 + stepping.
    pub(crate) gfx_target_version: u32,
    pub(crate) device_id: Option<u32>,
}

/// The amdgpu kernel module, when loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AmdgpuModule {
    /// MODULE_VERSION: set by our DKMS builds to the package version; the
    /// in-tree module has none.
    pub(crate) version: Option<String>,
    pub(crate) srcversion: Option<String>,
}

/// One version of one DKMS module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DkmsPackage {
    pub(crate) name: String,
    pub(crate) version: String,
    /// Whether it is one of rocm-patchkit's packages.
    pub(crate) ours: bool,
    /// Kernel releases it was built for.
    pub(crate) built_for: Vec<String>,
    /// Whether the loaded amdgpu is this build.
    pub(crate) loaded: bool,
    /// How that was told: `version` (MODULE_VERSION) or `srcversion` (the
    /// loaded module's srcversion against the build for the running kernel).
    pub(crate) loaded_by: Option<String>,
}
