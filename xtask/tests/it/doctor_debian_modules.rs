//! doctor on Debian's real amdgpu modules of 6.16, 6.17 and 6.18 from
//! trixie-backports (`.ci/setup` keeps each image's `amdgpu.ko.xz` and
//! `config-*` in `/var/cache/rocm-patchkit/debian-modules/<release>/`):
//! 6.16.12 and 6.17.13 carry the unfixed gfx12 trap handler ("the fix is not
//! in"), 6.18.5 (and every later 6.18) the fixed one. Read directly and
//! through `doctor --root` on an RDNA4 machine running that kernel, its
//! modules below `/usr/lib/modules` with `/lib` a link there (trixie's
//! merged /usr).

use std::path::{Path, PathBuf};

use xtask::doctor::module::{self, TrapHandler};
use xtask::input::kernel::KernelVersion;

use crate::support::ci;
use crate::support::doctor::{fault, FakeMachine};

/// Where `.ci/setup` keeps the modules (`PATCHKIT_DEBIAN_MODULES` moves it).
fn cache() -> PathBuf {
    std::env::var_os("PATCHKIT_DEBIAN_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocm-patchkit/debian-modules"))
}

/// One kept kernel: its release (`6.16.12+deb13-amd64`), its package
/// version and its amdgpu module.
struct Kept {
    release: String,
    version: String,
    amdgpu: PathBuf,
}

/// The file named `name` below `dir`, searched depth first.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if entry.file_name() == name {
            return Some(path);
        }
    }
    None
}

/// The kept kernel of `series` (`6.16`); `None` (a skip) only outside CI.
fn kept(series: &str) -> Option<Kept> {
    let dir = std::fs::read_dir(cache())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(&format!("{series}.")) && p.join("VERSION").is_file()
        });
    let Some(dir) = dir else {
        assert!(
            !ci(),
            "no {series} kernel in {} and CI=true: .ci/setup brings it from trixie-backports",
            cache().display()
        );
        eprintln!(
            "skipping: no {series} kernel in {} (run .ci/setup)",
            cache().display()
        );
        return None;
    };
    let release = dir.file_name().unwrap().to_string_lossy().into_owned();
    let amdgpu = find_file(&dir, "amdgpu.ko.xz").expect("amdgpu.ko.xz kept beside VERSION");
    assert!(
        dir.join(format!("boot/config-{release}")).is_file(),
        "the config of {release} kept"
    );
    let version = std::fs::read_to_string(dir.join("VERSION")).unwrap();
    Some(Kept {
        release,
        version: version.trim().to_owned(),
        amdgpu,
    })
}

/// The verdict the fix's landing says for `release`: upstream's fix is in
/// 6.18.4 and later 6.18 releases, not in any 6.16 or 6.17.
fn fixed_upstream(release: &str) -> bool {
    KernelVersion::from_release(release).unwrap() >= KernelVersion(6, 18, 4)
}

/// An RDNA4 machine running `kept`'s kernel with its module where trixie
/// puts it.
fn machine(kept: &Kept) -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 0x7551)
        .kernel(&kept.release)
        .amdgpu(1)
        .rocm("7.1.1-53", "1.1.0");
    let rel = kept
        .amdgpu
        .to_string_lossy()
        .split_once("/usr/lib/modules/")
        .map(|(_, rest)| rest.to_owned())
        .expect("the module below usr/lib/modules");
    let dest = m.root().join("usr/lib/modules").join(rel);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    if std::fs::hard_link(&kept.amdgpu, &dest).is_err() {
        std::fs::copy(&kept.amdgpu, &dest).unwrap();
    }
    std::os::unix::fs::symlink("usr/lib", m.root().join("lib")).unwrap();
    m
}

/// doctor's reading of the kept module of `series`, directly and on a
/// machine running it; `expect` is the trap handler it must find.
fn judged(series: &str, expect: TrapHandler) {
    let Some(kept) = kept(series) else { return };
    let fixed = fixed_upstream(&kept.release);
    assert_eq!(
        expect == TrapHandler::Fixed,
        fixed,
        "{} {}: the expectation follows the fix's landing in 6.18.4",
        kept.release,
        kept.version
    );
    let file = module::read(Path::new("/"), kept.amdgpu.strip_prefix("/").unwrap());
    assert_eq!(
        file.trap_handler, expect,
        "{} {}: {file:?}",
        kept.release, kept.version
    );
    let words = if fixed {
        "the fix is in"
    } else {
        "the fix is not in"
    };
    assert!(file.why.ends_with(words), "{file:?}");

    let m = machine(&kept);
    let (_, report) = m.report();
    // found through /lib/modules, named where the link leads
    let amdgpu = &report["machine"]["amdgpu_file"];
    assert_eq!(
        amdgpu["path"],
        format!(
            "/usr/lib/modules/{0}/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz",
            kept.release
        ),
        "{amdgpu:#}"
    );
    assert_eq!(
        amdgpu["sha256"].as_str().unwrap(),
        xtask::shared::hash::sha256_file(&kept.amdgpu).unwrap()
    );
    let cwsr = fault(&report, "cwsr-expert-sched");
    let status = if fixed { "fixed" } else { "affected" };
    assert_eq!(cwsr["status"], status, "{}: {cwsr:#}", kept.release);
    let text = m.doctor(&[]).stdout;
    let handler = if fixed { "(fixed)" } else { "(unfixed)" };
    assert!(text.contains(&format!("amdgpu.ko.xz {handler}")), "{text}");
}

#[test]
fn debian_6_16_amdgpu_lacks_the_fix() {
    judged("6.16", TrapHandler::Unfixed);
}

#[test]
fn debian_6_17_amdgpu_lacks_the_fix() {
    judged("6.17", TrapHandler::Unfixed);
}

#[test]
fn debian_6_18_amdgpu_carries_the_fix() {
    judged("6.18", TrapHandler::Fixed);
}
