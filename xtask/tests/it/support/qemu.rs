//! Debian's kernel booted under `qemu-system-x86_64` with an initramfs of
//! our own (a static busybox, an `/init` that runs `modprobe amdgpu`, the
//! amdgpu given and the modules it needs), and what came back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::have_tool;
use crate::support::tools::stdout;

/// How long a VM may take before the test calls it hung (TCG is slow, and
/// this machine is shared).
const TIMEOUT: Duration = Duration::from_secs(480);

/// What came back from one boot.
#[derive(Debug)]
pub(crate) struct Boot {
    /// The whole serial console.
    pub(crate) console: String,
    /// Where the console log is kept.
    pub(crate) log: PathBuf,
    pub(crate) modprobe_status: Option<i32>,
    /// `/sys/module/amdgpu/version`, when the module has one.
    pub(crate) version: Option<String>,
    /// `/sys/module/amdgpu/initstate` (`live` once loaded).
    pub(crate) initstate: Option<String>,
    /// The kernel log lines about symbols that would not resolve.
    pub(crate) symbol_errors: Vec<String>,
    pub(crate) took: Duration,
}

/// Whether qemu, busybox and the 6.12 kernel image are here; in CI their
/// absence is a failure.
pub(crate) fn can_boot(kernel: &str) -> bool {
    let ci = crate::support::ci();
    let image = vmlinuz(kernel);
    let have = [
        "qemu-system-x86_64",
        "busybox",
        "cpio",
        "depmod",
        "modinfo",
        "xz",
        "zstd",
    ]
    .iter()
    .all(|t| have_tool(t))
        && image.is_file()
        && busybox_is_static();
    assert!(
        have || !ci,
        "CI must boot {}: .ci/setup installs qemu-system-x86, busybox-static and linux-image-{kernel}",
        image.display()
    );
    if !have {
        eprintln!(
            "skipping the boot: needs qemu-system-x86_64, a static busybox and {}",
            image.display()
        );
    }
    have
}

pub(crate) fn vmlinuz(kernel: &str) -> PathBuf {
    Path::new("/boot").join(format!("vmlinuz-{kernel}"))
}

fn busybox_is_static() -> bool {
    Command::new("sh")
        .args([
            "-c",
            "ldd \"$(command -v busybox)\" 2>&1 | grep -q 'not a dynamic'",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// The module file `modprobe` would load for `name` on this machine's
/// `kernel`, from its modules.dep (updates/ before the kernel's own).
fn resolve(kernel: &str, name: &str) -> PathBuf {
    PathBuf::from(
        stdout(Command::new("modinfo").args(["-k", kernel, "-F", "filename", name])).trim(),
    )
}

/// The module files amdgpu needs, `amdgpu` (that file) first: its
/// dependency closure as this machine's modules.dep resolves it.
fn closure(kernel: &str, amdgpu: &Path) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut todo = vec!["amdgpu".to_owned()];
    let mut files = Vec::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.replace('-', "_")) {
            continue;
        }
        let file = if name == "amdgpu" {
            amdgpu.to_path_buf()
        } else {
            resolve(kernel, &name)
        };
        if !file.is_file() {
            continue; // built in
        }
        let depends = stdout(Command::new("modinfo").args(["-F", "depends"]).arg(&file));
        todo.extend(
            depends
                .trim()
                .split(',')
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
        );
        files.push(file);
    }
    files
}

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo PATCHKIT-BOOTED
modprobe amdgpu
echo "PATCHKIT-MODPROBE $?"
if [ -r /sys/module/amdgpu/version ]; then
	echo "PATCHKIT-VERSION $(cat /sys/module/amdgpu/version)"
fi
if [ -r /sys/module/amdgpu/initstate ]; then
	echo "PATCHKIT-INITSTATE $(cat /sys/module/amdgpu/initstate)"
fi
echo PATCHKIT-DMESG-BEGIN
dmesg
echo PATCHKIT-DMESG-END
poweroff -f
"#;

/// The amdgpu `modprobe` would load on this machine for `kernel`: ours
/// (updates/dkms) once our package installed it.
pub(crate) fn installed_amdgpu(kernel: &str) -> PathBuf {
    resolve(kernel, "amdgpu")
}

/// The kernel's own amdgpu, whatever DKMS installed beside it.
pub(crate) fn kernels_own_amdgpu(kernel: &str) -> PathBuf {
    let dir = Path::new("/lib/modules")
        .join(kernel)
        .join("kernel/drivers/gpu/drm/amd/amdgpu");
    ["amdgpu.ko.xz", "amdgpu.ko.zst", "amdgpu.ko"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no amdgpu.ko* in {}", dir.display()))
}

/// Assembles, in `work`, an initramfs with `amdgpu` (a module file below
/// `/lib/modules/<kernel>`) and what it needs, and boots `kernel` with it.
/// The console log is also copied to the temp folder as
/// `patchkit-boot-<kernel>.log`, so it outlives `work`.
pub(crate) fn boot_amdgpu(kernel: &str, amdgpu: &Path, work: &Path) -> Boot {
    let root = work.join("initramfs");
    let _ = std::fs::remove_dir_all(&root);
    for dir in ["bin", "proc", "sys", "dev", "tmp"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let busybox = stdout(Command::new("sh").args(["-c", "command -v busybox"]));
    std::fs::copy(busybox.trim(), root.join("bin/busybox")).unwrap();
    let init = root.join("init");
    std::fs::write(&init, INIT).unwrap();
    stdout(Command::new("chmod").arg("755").arg(&init));

    // The modules, where this machine keeps them, decompressed (busybox's
    // modprobe reads plain .ko), then depmod for the VM's own tree.
    let host = Path::new("/lib/modules").join(kernel);
    let vm = root.join("lib/modules").join(kernel);
    for file in closure(kernel, amdgpu) {
        let rel = file
            .strip_prefix(&host)
            .unwrap_or_else(|_| panic!("{} is outside {}", file.display(), host.display()));
        let name = rel.to_string_lossy();
        let (plain, tool) = match name.rsplit_once('.') {
            Some((stem, "xz")) => (stem.to_owned(), Some("xz")),
            Some((stem, "zst")) => (stem.to_owned(), Some("zstd")),
            _ => (name.clone().into_owned(), None),
        };
        let dest = vm.join(&plain);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        match tool {
            Some(tool) => {
                let out = Command::new(tool)
                    .args(["-dc"])
                    .arg(&file)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{tool} -dc {}", file.display());
                std::fs::write(&dest, out.stdout).unwrap();
            }
            None => {
                std::fs::copy(&file, &dest).unwrap();
            }
        }
    }
    for meta in [
        "modules.builtin",
        "modules.builtin.modinfo",
        "modules.order",
    ] {
        if host.join(meta).is_file() {
            std::fs::copy(host.join(meta), vm.join(meta)).unwrap();
        }
    }
    stdout(Command::new("depmod").arg("-b").arg(&root).arg(kernel));

    let image = work.join("initramfs.cpio.gz");
    stdout(
        Command::new("sh")
            .arg("-c")
            .arg("cd \"$1\" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1 > \"$2\"")
            .arg("sh")
            .arg(&root)
            .arg(&image),
    );

    let log = work.join("console.log");
    let started = Instant::now();
    let mut child = Command::new("qemu-system-x86_64")
        .args(["-machine", "q35", "-cpu", "max", "-m", "2048", "-smp", "1"])
        .args(["-nographic", "-no-reboot", "-monitor", "none", "-serial"])
        .arg(format!("file:{}", log.display()))
        .arg("-kernel")
        .arg(vmlinuz(kernel))
        .arg("-initrd")
        .arg(&image)
        .args(["-append", "console=ttyS0 panic=-1 loglevel=4 rdinit=/init"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting qemu-system-x86_64");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let took = started.elapsed();
    let console = std::fs::read_to_string(&log).unwrap_or_default();
    let log = std::env::temp_dir().join(format!("patchkit-boot-{kernel}.log"));
    std::fs::write(&log, &console).unwrap();
    assert!(
        status.is_some(),
        "the VM did not power off within {TIMEOUT:?}; console log kept at {}:\n{}",
        log.display(),
        tail(&console)
    );
    let field = |key: &str| {
        console
            .lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_owned()))
    };
    let dmesg: Vec<&str> = console
        .lines()
        .skip_while(|l| !l.contains("PATCHKIT-DMESG-BEGIN"))
        .take_while(|l| !l.contains("PATCHKIT-DMESG-END"))
        .collect();
    Boot {
        modprobe_status: field("PATCHKIT-MODPROBE ").and_then(|s| s.parse().ok()),
        version: field("PATCHKIT-VERSION "),
        initstate: field("PATCHKIT-INITSTATE "),
        symbol_errors: dmesg
            .iter()
            .filter(|l| {
                l.contains("Unknown symbol") || l.contains("disagrees about version of symbol")
            })
            .map(|l| l.to_string())
            .collect(),
        console,
        log,
        took,
    }
}

/// The last lines of a console log, for a failure message.
pub(crate) fn tail(console: &str) -> String {
    let lines: Vec<&str> = console.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

impl Boot {
    /// Asserts amdgpu loaded cleanly, keeping the console log on failure.
    pub(crate) fn assert_loaded(&self) {
        let ok = self.modprobe_status == Some(0)
            && self.initstate.as_deref() == Some("live")
            && self.symbol_errors.is_empty();
        assert!(
            ok,
            "amdgpu did not load cleanly (modprobe {:?}, initstate {:?}, symbol errors {:?}); console log kept at {}:\n{}",
            self.modprobe_status,
            self.initstate,
            self.symbol_errors,
            self.log.display(),
            tail(&self.console)
        );
    }
}
