//! doctor reads the trap handler from real modules: Debian's own
//! `amdgpu.ko.xz` of 6.12 (fixed) and of 6.1 (no gfx12 handler, from the
//! linux-image .deb `.ci/setup` downloads), an object gcc compiles from a
//! tree carrying the unfixed handler's words, and broken files (cannot
//! tell, with the reason). Through `doctor --root`, content wins over the
//! kernel version, and `--json` carries the path, sha256 and verdict.

use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::doctor::module::{self, TrapHandler};

use crate::support::doctor::{fault, rdna4_614_with, FakeMachine};
use crate::support::{ci, have_tool, Run};

/// Where `.ci/setup` keeps the 6.1 linux-image .deb (downloaded, not installed).
const IMAGE_CACHE: &str = "/var/cache/rocm-patchkit/linux-image";

/// Debian's own amdgpu of the installed 6.12 kernel.
fn debian_612_amdgpu() -> Option<PathBuf> {
    let kernel = crate::support::kernels::debian_612_headers()?;
    Path::new("/lib/modules")
        .join(&kernel)
        .is_dir()
        .then(|| crate::support::qemu::kernels_own_amdgpu(&kernel))
}

/// Debian's own amdgpu of 6.1, unpacked from the cached linux-image .deb into `dir`.
fn debian_61_amdgpu(dir: &Path) -> Option<PathBuf> {
    let deb = std::fs::read_dir(IMAGE_CACHE)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy().starts_with("linux-image-6.1.")
                    && n.to_string_lossy().ends_with(".deb")
            })
        })?;
    let run = Run::of(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(dir)
            .output()
            .unwrap(),
    );
    run.success();
    let found = Run::of(
        Command::new("find")
            .arg(dir)
            .args(["-name", "amdgpu.ko*"])
            .output()
            .unwrap(),
    );
    found.stdout.lines().next().map(PathBuf::from)
}

fn judge_file(path: &Path) -> module::ModuleFile {
    module::read(Path::new("/"), path.strip_prefix("/").unwrap())
}

#[test]
fn debian_612_amdgpu_carries_the_fixed_handler() {
    let Some(path) = debian_612_amdgpu() else {
        assert!(!ci(), "CI must install the 6.12 kernel image");
        return;
    };
    let file = judge_file(&path);
    assert_eq!(file.trap_handler, TrapHandler::Fixed, "{file:?}");
    assert_eq!(
        file.sha256.as_deref().unwrap(),
        xtask::shared::hash::sha256_file(&path).unwrap()
    );
}

#[test]
fn debian_61_amdgpu_has_no_gfx12_handler() {
    let dir = tempfile::tempdir().unwrap();
    let Some(path) = debian_61_amdgpu(dir.path()) else {
        assert!(
            !ci(),
            "CI must download the 6.1 linux-image into {IMAGE_CACHE} (.ci/setup does)"
        );
        return;
    };
    let file = judge_file(&path);
    assert_eq!(file.trap_handler, TrapHandler::NoGfx12, "{file:?}");
    assert!(file.why.contains("6.1."), "{file:?}");
}

/// A tree of our own: a header with a u32 array as amdkfd's
/// `cwsr_trap_handler.h` holds one, the unfixed gfx12 words at its start,
/// and a source that includes it with a module's `.modinfo`; compiled by
/// gcc into a real relocatable ELF object.
fn compiled_unfixed(dir: &Path) -> PathBuf {
    let mut words = vec![0xbfa00001u32];
    words.extend(module::UNFIXED);
    words.extend([0xbe8001ff_u32, 0x00000000, 0xbf9f0000]);
    let array: Vec<String> = words.iter().map(|w| format!("0x{w:08x}")).collect();
    std::fs::write(
        dir.join("trap_handler.h"),
        format!(
            "static const unsigned int gfx12_trap_hex[] = {{\n\t{},\n}};\n",
            array.join(", ")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("kfd_device.c"),
        "#include \"trap_handler.h\"\n\
         const void *gfx12_trap(void) { return gfx12_trap_hex; }\n\
         static const char vermagic[] __attribute__((section(\".modinfo\"), used)) =\n\
         \t\"vermagic=6.14.0-36-generic SMP preempt mod_unload modversions \";\n",
    )
    .unwrap();
    let obj = dir.join("amdgpu.ko");
    Run::of(
        Command::new("gcc")
            .args(["-c", "-O2", "-o"])
            .arg(&obj)
            .arg(dir.join("kfd_device.c"))
            .output()
            .unwrap(),
    )
    .success();
    obj
}

#[test]
fn an_object_compiled_with_the_unfixed_handler_is_unfixed() {
    if !have_tool("gcc") {
        assert!(!ci(), "CI must have gcc (build-essential)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let obj = compiled_unfixed(dir.path());
    let file = judge_file(&obj);
    assert_eq!(file.trap_handler, TrapHandler::Unfixed, "{file:?}");
}

#[test]
fn broken_modules_cannot_tell_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = d.join("amdgpu.ko");
    std::fs::write(&text, "this is a text file, not a kernel module at all\n").unwrap();
    let file = judge_file(&text);
    assert_eq!(file.trap_handler, TrapHandler::CannotTell);
    assert!(file.why.contains("no ELF header"), "{file:?}");

    if have_tool("gcc") {
        let obj = compiled_unfixed(d);
        let bytes = std::fs::read(&obj).unwrap();
        let cut = d.join("cut/amdgpu.ko");
        std::fs::create_dir_all(cut.parent().unwrap()).unwrap();
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let file = judge_file(&cut);
        assert_eq!(file.trap_handler, TrapHandler::CannotTell);
        assert!(file.why.contains("truncated"), "{file:?}");

        let misnamed = d.join("amdgpu.ko.zst");
        std::fs::write(&misnamed, &bytes).unwrap();
        let file = judge_file(&misnamed);
        assert_eq!(file.trap_handler, TrapHandler::CannotTell);
        assert!(file.why.contains("named for zstd"), "{file:?}");

        // A real xz stream cut short.
        let xz = Run::of(
            Command::new("xz")
                .args(["-k", "-f"])
                .arg(&obj)
                .output()
                .unwrap(),
        );
        xz.success();
        let packed = std::fs::read(d.join("amdgpu.ko.xz")).unwrap();
        std::fs::write(d.join("amdgpu.ko.xz"), &packed[..packed.len() - 12]).unwrap();
        let file = judge_file(&d.join("amdgpu.ko.xz"));
        assert_eq!(file.trap_handler, TrapHandler::CannotTell);
        assert!(file.why.contains("does not decompress as xz"), "{file:?}");
    }
}

#[test]
fn a_fixed_module_in_the_affected_range_is_fixed_and_json_names_it() {
    let Some(path) = debian_612_amdgpu() else {
        assert!(!ci(), "CI must install the 6.12 kernel image");
        return;
    };
    let m = rdna4_614_with(&path, "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz");
    let (_, report) = m.report();
    let f = fault(&report, "cwsr-expert-sched");
    assert_eq!(f["status"], "fixed", "{f:#}");
    let file = &report["machine"]["amdgpu_file"];
    assert_eq!(
        file["path"],
        "/lib/modules/6.14.0-36-generic/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz"
    );
    assert_eq!(file["trap_handler"], "fixed");
    assert_eq!(
        file["sha256"].as_str().unwrap(),
        xtask::shared::hash::sha256_file(&path).unwrap()
    );
    let text = m.doctor(&[]).stdout;
    assert!(text.contains("amdgpu.ko.xz (fixed)"), "{text}");
}

#[test]
fn modprobe_order_puts_updates_before_the_kernels_own() {
    if !have_tool("gcc") {
        assert!(!ci(), "CI must have gcc (build-essential)");
        return;
    }
    let Some(fixed) = debian_612_amdgpu() else {
        assert!(!ci(), "CI must install the 6.12 kernel image");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let unfixed = compiled_unfixed(dir.path());
    // The kernel's own module is fixed; an unfixed one in updates/ wins,
    // and the version range (6.12.117: fixed) loses to it.
    let m = FakeMachine::new();
    m.gpu(1, 120001, 0x7551)
        .kernel("6.12.117+deb12-amd64")
        .cmdline("BOOT_IMAGE=/vmlinuz ro quiet")
        .rocm("7.1.1-53", "1.1.0");
    let base = m.root().join("lib/modules/6.12.117+deb12-amd64");
    for (from, rel) in [
        (&fixed, "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz"),
        (&unfixed, "updates/dkms/amdgpu.ko"),
    ] {
        std::fs::create_dir_all(base.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(from, base.join(rel)).unwrap();
    }
    let (_, report) = m.report();
    assert_eq!(
        report["machine"]["amdgpu_file"]["path"],
        "/lib/modules/6.12.117+deb12-amd64/updates/dkms/amdgpu.ko"
    );
    let f = fault(&report, "cwsr-expert-sched");
    assert_eq!(f["status"], "affected", "{f:#}");
    // modules.dep, when there is one, is what modprobe follows.
    std::fs::write(
        base.join("modules.dep"),
        "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz: kernel/drivers/gpu/drm/drm.ko.xz\n",
    )
    .unwrap();
    let (_, report) = m.report();
    assert_eq!(report["machine"]["amdgpu_file"]["trap_handler"], "fixed");
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "fixed");
}

#[test]
fn secure_boot_on_with_the_dkms_key_not_enrolled_says_what_to_do() {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 0x7551).kernel("6.14.0-36-generic");
    let vars = m.root().join("sys/firmware/efi/efivars");
    std::fs::create_dir_all(&vars).unwrap();
    std::fs::write(
        vars.join("SecureBoot-8be4df61-93ca-11d2-aa0d-e0800e4c9796"),
        [6, 0, 0, 0, 1],
    )
    .unwrap();
    std::fs::write(
        vars.join("MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23"),
        b"\x07\0\0\0someone else's key",
    )
    .unwrap();
    m.file("var/lib/dkms/mok.pub", "0\u{82} our DER key");
    let (_, report) = m.report();
    let sb = &report["machine"]["secure_boot"];
    assert_eq!(sb["enabled"], true, "{sb:#}");
    assert_eq!(sb["key_enrolled"], false, "{sb:#}");
    let text = m.doctor(&[]).stdout;
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("on; DKMS key /var/lib/dkms/mok.pub NOT enrolled")
            && words.contains("sudo mokutil --import /var/lib/dkms/mok.pub, reboot"),
        "{text}"
    );
}
