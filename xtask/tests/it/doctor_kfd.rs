//! doctor on a real compiled amdkfd object: `kfd_device.o`, the one amdkfd
//! object that includes `cwsr_trap_handler.h`, compiled by kbuild against
//! the installed 6.12 headers from Debian's `/usr/src/linux-source-6.12.tar.xz`,
//! once as shipped (fixed) and once with the gfx12 handler's opening words
//! turned back into the unfixed ones. Slow-gated: runs in CI (`CI=true`)
//! or when `PATCHKIT_SLOW_TESTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::doctor::module::{self, TrapHandler};

use crate::support::doctor::fault;
use crate::support::doctor::rdna4_614_with;
use crate::support::{have_tool, Run};

const TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";
const HEADER: &str = "amdkfd/cwsr_trap_handler.h";
/// The fixed gfx12 handler's first words as the header writes them.
const FIXED_TEXT: &str = "0xbfa00001, 0xbfa002b2,\n\t0xb0804009, 0xb8eef81a,";

fn enabled() -> bool {
    crate::support::slow_tests_enabled("the amdkfd object build")
}

/// The unfixed words in the fixed ones' place: the first stays, then
/// `module::UNFIXED`, so the array keeps its length.
fn unfixed_text() -> String {
    let words: Vec<String> = std::iter::once(module::FIXED[0])
        .chain(module::UNFIXED)
        .map(|w| format!("0x{w:08x}"))
        .collect();
    format!("{}, {},\n\t{}, {},", words[0], words[1], words[2], words[3])
}

/// Our kbuild file for the extracted `amd/amdkfd`: amdgpu's include paths
/// (as `amdgpu/Makefile` sets them) and the one object.
const KBUILD: &str = "\
AMD := $(src)/..
ccflags-y := -I$(AMD)/include/asic_reg -I$(AMD)/include -I$(AMD)/amdgpu \\
\t-I$(AMD)/pm/inc -I$(AMD)/acp/include -I$(AMD)/display \\
\t-I$(AMD)/display/include -I$(AMD)/display/modules/inc \\
\t-I$(AMD)/display/dc -I$(AMD)/display/amdgpu_dm -I$(AMD)/amdkfd
obj-m := kfd_device.o
";

/// Which amdkfd sources include the handler header.
fn includers(amd: &Path) -> Vec<String> {
    let run = Run::of(
        Command::new("grep")
            .args(["-rl", "cwsr_trap_handler.h", "--include=*.c", "amdkfd"])
            .current_dir(amd)
            .output()
            .unwrap(),
    );
    let mut found: Vec<String> = run.stdout.lines().map(str::to_owned).collect();
    found.sort();
    found
}

/// Compiles `kfd_device.o` with kbuild's single-object target and copies
/// it to `out`.
fn compile(amd: &Path, kernel: &str, out: &Path) -> PathBuf {
    let kfd = amd.join("amdkfd");
    let run = Run::of(
        Command::new("make")
            .arg("-C")
            .arg(Path::new("/lib/modules").join(kernel).join("build"))
            .arg(format!("M={}", kfd.display()))
            .arg("kfd_device.o")
            .output()
            .unwrap(),
    );
    run.success();
    std::fs::copy(kfd.join("kfd_device.o"), out).unwrap();
    out.to_path_buf()
}

/// Extracts `drivers/gpu/drm/amd` into `dir` and compiles `kfd_device.o`
/// twice: from the header as Debian ships it, then with its gfx12
/// handler's opening words `0xbfa00001, 0xbfa002b2, 0xb0804009, 0xb8eef81a`
/// turned into `0xbfa00001, 0xbfa002a2, 0xb0804009, 0xb8f8f804`. That
/// second object is not upstream's pre-fix code (no pre-fix amdkfd source
/// is reachable offline: 6.12.117 already has the fix, 6.1 has no gfx12
/// handler), only the shipped handler with the unfixed opening words:
/// the closest real thing. Returns (fixed, unfixed).
fn fixed_and_unfixed(dir: &Path, kernel: &str) -> (PathBuf, PathBuf) {
    Run::of(
        Command::new("tar")
            .arg("-xJf")
            .arg(TARBALL)
            .arg("-C")
            .arg(dir)
            .args(["--wildcards", "linux-source-6.12/drivers/gpu/drm/amd/*"])
            .output()
            .unwrap(),
    )
    .success();
    let amd = dir.join("linux-source-6.12/drivers/gpu/drm/amd");
    assert_eq!(includers(&amd), ["amdkfd/kfd_device.c"]);
    std::fs::write(amd.join("amdkfd/Kbuild"), KBUILD).unwrap();
    let fixed = compile(&amd, kernel, &dir.join("fixed.o"));

    let header = amd.join(HEADER);
    let text = std::fs::read_to_string(&header).unwrap();
    assert_eq!(
        text.matches(FIXED_TEXT).count(),
        1,
        "{HEADER} of {TARBALL} no longer opens its gfx12 handler with the fixed words"
    );
    std::fs::write(&header, text.replace(FIXED_TEXT, &unfixed_text())).unwrap();
    let unfixed = compile(&amd, kernel, &dir.join("unfixed.o"));
    (fixed, unfixed)
}

#[test]
fn a_kbuild_compiled_kfd_object_is_fixed_as_shipped_and_unfixed_with_the_old_words() {
    if !enabled() {
        return;
    }
    let Some(kernel) = crate::support::kernels::debian_612_headers() else {
        panic!("no 6.12 kernel headers under /lib/modules: .ci/setup installs them");
    };
    assert!(
        Path::new(TARBALL).is_file(),
        "apt-get install linux-source-6.12 (.ci/setup does)"
    );
    assert!(have_tool("make") && have_tool("gcc"), "build-essential");
    let dir = tempfile::tempdir().unwrap();
    let (fixed, unfixed) = fixed_and_unfixed(dir.path(), &kernel);
    assert_ne!(
        std::fs::read(&fixed).unwrap(),
        std::fs::read(&unfixed).unwrap()
    );

    for (object, status, handler) in [
        (&fixed, "fixed", TrapHandler::Fixed),
        (&unfixed, "affected", TrapHandler::Unfixed),
    ] {
        let file = module::read(Path::new("/"), object.strip_prefix("/").unwrap());
        assert_eq!(file.trap_handler, handler, "{}: {file:?}", object.display());
        // The object as the module modprobe would load on an RDNA4
        // machine whose kernel version alone says affected.
        let m = rdna4_614_with(object, "updates/amdgpu.ko");
        let (_, report) = m.report();
        assert_eq!(
            report["machine"]["amdgpu_file"]["path"],
            "/lib/modules/6.14.0-36-generic/updates/amdgpu.ko"
        );
        let f = fault(&report, "cwsr-expert-sched");
        assert_eq!(f["status"], status, "{}: {f:#}", object.display());
    }
}
