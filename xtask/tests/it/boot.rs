//! A real boot: Debian's 6.12 kernel under `qemu-system-x86_64` (software
//! emulation) with an initramfs that holds the amdgpu `modprobe` would load
//! on this machine for that kernel (ours when our package installed it) and
//! the modules it needs, a static busybox and an `/init` of our own. Inside,
//! `modprobe amdgpu`; back out, `/sys/module/amdgpu/version` and the kernel
//! log. The console log is kept in the work folder when a check fails.

use crate::support::qemu::{boot_amdgpu, can_boot, kernels_own_amdgpu};

#[test]
fn debian_612_boots_and_its_own_amdgpu_loads() {
    let Some(kernel) = crate::support::kernels::debian_612_headers() else {
        assert!(
            !crate::support::ci(),
            "CI must install the 6.12 headers and image"
        );
        return;
    };
    if !can_boot(&kernel) {
        return;
    }
    let work = tempfile::Builder::new()
        .prefix("patchkit-boot-")
        .tempdir()
        .unwrap();
    // Never ours here: this test holds no lock on the system, so it takes
    // the kernel's own module by path, whatever DKMS has installed.
    let boot = boot_amdgpu(&kernel, &kernels_own_amdgpu(&kernel), work.path());
    boot.assert_loaded();
    assert_eq!(
        boot.version, None,
        "the kernel's own amdgpu has no MODULE_VERSION"
    );
    eprintln!("boot: Debian's own amdgpu loaded in {:?}", boot.took);
}
