//! The real thing, slow: amdgpu from Debian's `/usr/src/linux-source-6.12.tar.xz`
//! through build-dkms, `dpkg -i`, and DKMS building amdgpu.ko for the
//! installed 6.12 headers (about 7 minutes on 2 cores), then Debian's 6.12
//! kernel booted under qemu loading that very module; then the same package
//! built for an older 6.12 point release's headers (within the series, the
//! tree of the newest release meets an earlier kernel). CI compiles a sample
//! of the tree for that release (the objects of the interface the range's
//! lower bound is about, and ours); the ignored test builds all of it
//! through DKMS (about 7 minutes more). Runs in CI (`CI=true`) or when
//! `PATCHKIT_SLOW_TESTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::dkms::{built_module, install_for};
use crate::support::kernels::{debian_612_headers, debian_612_releases};
use crate::support::tools::run;
use crate::support::{have_tool, is_root, system_lock, Project, Run};

/// Where `dpkg -i` puts the package's tree, as DKMS reads it.
const TREE: &str = "/usr/src/amdgpu-debian-6.12.0.1";

fn enabled() -> bool {
    crate::support::slow_tests_enabled("the amdgpu build")
}

#[test]
fn amdgpu_from_debian_source_installs_and_dkms_builds_it() {
    amdgpu_through_dkms(false);
}

#[test]
#[ignore = "a second whole amdgpu build (about 7 minutes on 2 cores): CI compiles a sample for the older release"]
fn amdgpu_from_debian_source_dkms_builds_it_whole_for_an_older_612_release() {
    amdgpu_through_dkms(true);
}

/// build-dkms, `dpkg -i`, DKMS for the newest 6.12 headers, the boot, then
/// the older release: its whole DKMS build when `whole`, else CI's sample.
fn amdgpu_through_dkms(whole: bool) {
    if !enabled() {
        return;
    }
    assert!(
        is_root(),
        "the amdgpu DKMS test installs a package: run it as root"
    );
    for tool in ["dpkg", "dkms", "modinfo"] {
        assert!(have_tool(tool));
    }
    assert!(
        Path::new("/usr/src/linux-source-6.12.tar.xz").is_file(),
        "apt-get install linux-source-6.12 (.ci/setup does)"
    );
    let kernel = debian_612_headers()
        .expect("install linux-headers-6.12.*+deb12-amd64 (.ci/setup looks the version up)");
    let _system = system_lock();
    let p = Project::new();
    p.copy_from_repo(&[
        "recipes/amdgpu-debian-6.12.toml",
        "patches/amdgpu-debian-6.12",
        "templates",
    ]);
    let built = Run::of(
        p.command(&[
            "build-dkms",
            "amdgpu-debian-6.12",
            "--kernel",
            &kernel,
            "--formats",
            "deb",
        ])
        .env("SOURCE_DATE_EPOCH", "1767225600")
        .output()
        .unwrap(),
    );
    built.success();
    let deb = p
        .root()
        .join("dist/amdgpu-debian-6.12/amdgpu-debian-dkms_6.12.0.1-1_all.deb");
    let _cleanup = Cleanup;
    // amdgpu listed for the initramfs, as early-KMS setups have it: the
    // package must put its own build there, and purge the kernel's back.
    let initramfs =
        have_tool("lsinitramfs") && Path::new(&format!("/boot/initrd.img-{kernel}")).is_file();
    let _modules =
        initramfs.then(|| crate::support::initramfs::ListedForInitramfs::add("amdgpu", &kernel));
    let older = older_release(&p, &kernel);
    let older = older.as_deref();
    // For CI's sample the postinst must not build the older release whole:
    // it builds for every kernel with headers when the running one is not
    // installed (a CI machine's case), so that kernel's folder is hidden
    // from it (see `install`).
    let install = install(&deb, older.filter(|_| !whole));
    install.success();
    if let (Some(older), false) = (older, whole) {
        let status = crate::support::dkms::status("amdgpu-debian", "6.12.0.1", older);
        assert!(
            !status.contains("installed"),
            "the postinst built for {older}, whose folder was hidden: {status}"
        );
    }
    let status = install_for("amdgpu-debian", "6.12.0.1", &kernel);
    assert!(
        status.contains(&format!("amdgpu-debian/6.12.0.1, {kernel}"))
            && status.contains("installed"),
        "{status}"
    );
    let ours = format!("lib/modules/{kernel}/updates/dkms/amdgpu.ko");
    let own = format!("lib/modules/{kernel}/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko");
    if initramfs {
        if !install.stdout.contains("regenerating") {
            // The postinst built for other kernels only: configure again.
            Run::of(
                Command::new("dpkg-reconfigure")
                    .arg("amdgpu-debian-dkms")
                    .output()
                    .unwrap(),
            )
            .success();
        }
        let listing = crate::support::initramfs::lsinitramfs(&kernel);
        assert!(
            listing.lines().any(|l| l.contains(&ours)),
            "the initramfs of {kernel} lacks {ours}:\n{}",
            install.stdout
        );
    }
    let module = built_module(&kernel, "amdgpu");
    let version = Run::of(
        Command::new("modinfo")
            .args(["-F", "version"])
            .arg(&module)
            .output()
            .unwrap(),
    );
    assert_eq!(
        version.success().stdout.trim(),
        "6.12.0.1",
        "the DKMS amdgpu carries the package version"
    );
    // doctor reads the fix from the module DKMS built.
    let file = xtask::doctor::module::read(Path::new("/"), module.strip_prefix("/").unwrap());
    assert_eq!(
        file.trap_handler,
        xtask::doctor::module::TrapHandler::Fixed,
        "{file:?}"
    );
    // The running-kernel proof: Debian's 6.12 kernel boots under qemu with
    // the amdgpu modprobe now resolves (ours), loads it, and reports our
    // version with no symbol left unresolved.
    if crate::support::qemu::can_boot(&kernel) {
        let installed = crate::support::qemu::installed_amdgpu(&kernel);
        assert_eq!(installed, module, "modprobe would not load ours");
        let boot = crate::support::qemu::boot_amdgpu(&kernel, &installed, &p.root().join("boot"));
        boot.assert_loaded();
        assert_eq!(
            boot.version.as_deref(),
            Some("6.12.0.1"),
            "/sys/module/amdgpu/version in the VM; console log at {}",
            boot.log.display()
        );
        eprintln!("boot: our amdgpu loaded in {:?}", boot.took);
    }
    // Within the series: the package holds the newest release's tree and
    // must build for an earlier 6.12 kernel of its range too (.ci/setup
    // installs the oldest 6.12 headers at or above the range's lower bound).
    // DKMS builds it against those headers, the module's vermagic naming that
    // kernel (the ignored test); CI compiles the sample.
    let mut older_module = None;
    match older {
        Some(older) if whole => older_module = Some(dkms_builds_for(older)),
        Some(older) => sampled_build_for(older),
        None => {}
    }
    Run::of(
        Command::new("dpkg")
            .args(["--purge", "amdgpu-debian-dkms"])
            .output()
            .unwrap(),
    )
    .success();
    assert!(!module.exists(), "purge left {}", module.display());
    if let Some(built) = older_module {
        assert!(!built.exists(), "purge left {}", built.display());
    }
    if initramfs {
        let listing = crate::support::initramfs::lsinitramfs(&kernel);
        assert!(
            !listing.lines().any(|l| l.contains(&ours))
                && listing.lines().any(|l| l.contains(&own)),
            "after purge the initramfs of {kernel} should hold {own}, not {ours}"
        );
    }
}

/// The oldest 6.12 release with headers here, other than `kernel`, inside
/// the recipe's kernel range (CI must have one: .ci/setup installs it).
fn older_release(p: &Project, kernel: &str) -> Option<String> {
    let recipe = xtask::input::recipe::Recipe::load(p.root(), "amdgpu-debian-6.12").unwrap();
    let range = recipe
        .target
        .kernel
        .expect("amdgpu-debian-6.12 has a kernel range");
    let older = debian_612_releases().into_iter().find(|r| {
        *r != kernel
            && xtask::input::kernel::KernelVersion::from_release(r)
                .is_some_and(|v| range.matches(v))
    });
    if crate::support::ci() {
        assert!(
            older.is_some(),
            "CI must install an older 6.12 point release's headers inside `{}` (.ci/setup does)",
            range.as_str()
        );
    }
    older
}

/// `dpkg -i deb`; with `hide`, in a mount namespace of its own where an
/// empty tmpfs covers `/lib/modules/<hide>`: Debian's DKMS postinst then
/// finds no headers for that kernel and skips it, as on a machine where
/// they are not installed. Nothing outside the namespace sees the mount.
fn install(deb: &Path, hide: Option<&str>) -> Run {
    let mut cmd = match hide {
        None => Command::new("dpkg"),
        Some(kernel) => {
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
                .arg(r#"mount -t tmpfs patchkit-hidden "$1" && exec dpkg "$2" "$3""#)
                .arg("sh")
                .arg(Path::new("/lib/modules").join(kernel));
            cmd
        }
    };
    Run::of(cmd.arg("-i").arg(deb).output().unwrap())
}

/// The package's whole DKMS build for `older`: installed, its vermagic
/// naming that kernel, the fix read back by doctor. Returns the module.
fn dkms_builds_for(older: &str) -> PathBuf {
    let status = install_for("amdgpu-debian", "6.12.0.1", older);
    assert!(
        status.contains(&format!("amdgpu-debian/6.12.0.1, {older}"))
            && status.contains("installed"),
        "the 6.12.117 tree did not build for {older}: {status}"
    );
    let built = built_module(older, "amdgpu");
    let info = Run::of(
        Command::new("modinfo")
            .args(["-F", "vermagic"])
            .arg(&built)
            .output()
            .unwrap(),
    );
    let vermagic = info.success().stdout.trim().to_owned();
    assert!(
        vermagic.starts_with(&format!("{older} ")),
        "{} was built for `{vermagic}`, not {older}",
        built.display()
    );
    let file = xtask::doctor::module::read(Path::new("/"), built.strip_prefix("/").unwrap());
    assert_eq!(
        file.trap_handler,
        xtask::doctor::module::TrapHandler::Fixed,
        "{file:?}"
    );
    built
}

/// CI's share of the build for `older`: kbuild compiles, against its
/// headers, the objects of the package's tree whose source calls
/// `drm_sched_init` (the interface the range's lower bound is about: below
/// 6.12.115 amdgpu_device.c stops at its initialiser) and our version
/// object, in a copy of the tree `dpkg -i` installed.
fn sampled_build_for(older: &str) {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("amd");
    run(Command::new("cp").arg("-a").arg(TREE).arg(&tree)).success();
    let amdgpu = tree.join("amdgpu");
    let mut objects: Vec<String> = std::fs::read_dir(&amdgpu)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let text = std::fs::read_to_string(e.path()).ok()?;
            let stem = name.strip_suffix(".c")?;
            text.contains("drm_sched_init(&")
                .then(|| format!("{stem}.o"))
        })
        .collect();
    objects.sort();
    assert!(
        objects.iter().any(|o| o == "amdgpu_device.o"),
        "amdgpu_device.c no longer calls drm_sched_init: {objects:?}"
    );
    objects.push("patchkit_version.o".to_owned());
    run(Command::new("make")
        .arg("-C")
        .arg(Path::new("/lib/modules").join(older).join("build"))
        .arg(format!("M={}", amdgpu.display()))
        .arg("PATCHKIT_VERSION=6.12.0.1")
        .args(&objects))
    .success();
    for object in &objects {
        assert!(
            amdgpu.join(object).is_file(),
            "{object} not compiled for {older}"
        );
    }
    let version = std::fs::read(amdgpu.join("patchkit_version.o")).unwrap();
    assert!(
        version
            .windows(b"version=6.12.0.1".len())
            .any(|w| w == b"version=6.12.0.1"),
        "patchkit_version.o carries no version=6.12.0.1"
    );
    eprintln!("the 6.12.117 tree compiled for {older}: {objects:?}");
}

struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("dpkg")
            .args(["--purge", "amdgpu-debian-dkms"])
            .output();
        let _ = Command::new("dkms")
            .args(["remove", "-m", "amdgpu-debian", "-v", "6.12.0.1", "--all"])
            .output();
        let _ = std::fs::remove_dir_all("/usr/src/amdgpu-debian-6.12.0.1");
    }
}
