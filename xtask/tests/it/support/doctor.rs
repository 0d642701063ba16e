//! Fake machine trees for `doctor --root`: the sysfs, procfs, /opt/rocm and
//! /var/lib/dkms files doctor reads, written by the test, and the real
//! binary run against them with the repository's knowledge file.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{repo_root, Run};

const TOPOLOGY: &str = "sys/class/kfd/kfd/topology/nodes";

/// A machine tree in a temp dir, built step by step like the scenario reads.
pub(crate) struct FakeMachine {
    pub(crate) dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl FakeMachine {
    /// A machine with a CPU node in the KFD topology and nothing else.
    pub(crate) fn new() -> FakeMachine {
        let dir = tempfile::Builder::new()
            .prefix("patchkit-machine-")
            .tempdir()
            .expect("temp dir");
        let m = FakeMachine {
            dir,
            env: Vec::new(),
        };
        m.file(
            &format!("{TOPOLOGY}/0/properties"),
            "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\ndevice_id 0\n",
        );
        m
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `rel` below the root, creating parents.
    pub(crate) fn file(&self, rel: &str, text: &str) -> &FakeMachine {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    /// A GPU node as KFD writes it (gfx_target_version 120001 = gfx1201).
    pub(crate) fn gpu(&self, node: u32, gfx_target_version: u32, device_id: u32) -> &FakeMachine {
        self.file(
            &format!("{TOPOLOGY}/{node}/properties"),
            &format!(
                "cpu_cores_count 0\nsimd_count 128\nmem_banks_count 1\ngfx_target_version {gfx_target_version}\nvendor_id 4098\ndevice_id {device_id}\nlocation_id 768\ndrm_render_minor 128\n"
            ),
        )
    }

    /// The running kernel and its command line.
    pub(crate) fn kernel(&self, release: &str) -> &FakeMachine {
        self.file("proc/sys/kernel/osrelease", &format!("{release}\n"))
            .file(
                "proc/cmdline",
                &format!("BOOT_IMAGE=/boot/vmlinuz-{release} root=/dev/nvme0n1p2 ro quiet\n"),
            )
    }

    pub(crate) fn cmdline(&self, text: &str) -> &FakeMachine {
        self.file("proc/cmdline", &format!("{text}\n"))
    }

    /// amdgpu loaded with this cwsr_enable (the kernel's own module: no version).
    pub(crate) fn amdgpu(&self, cwsr_enable: i32) -> &FakeMachine {
        self.file(
            "sys/module/amdgpu/parameters/cwsr_enable",
            &format!("{cwsr_enable}\n"),
        )
        .file("sys/module/amdgpu/srcversion", "5D1F0E2A3B4C6D7E8F90A1B\n")
    }

    /// The loaded amdgpu reports MODULE_VERSION `version` (a DKMS build).
    pub(crate) fn amdgpu_version(&self, version: &str) -> &FakeMachine {
        self.file("sys/module/amdgpu/version", &format!("{version}\n"))
    }

    /// ROCm `version` (`7.1.1-53`) with hipBLASLt `hipblaslt` (`1.1.0`).
    pub(crate) fn rocm(&self, version: &str, hipblaslt: &str) -> &FakeMachine {
        let major = hipblaslt.split('.').next().unwrap();
        self.file("opt/rocm/.info/version", &format!("{version}\n"))
            .file(&format!("opt/rocm/lib/libhipblaslt.so.{hipblaslt}"), "ELF")
            .file(&format!("opt/rocm/lib/libhipblaslt.so.{major}"), "ELF")
            .file("opt/rocm/lib/libhipblaslt.so", "ELF")
    }

    pub(crate) fn miopen(&self) -> &FakeMachine {
        self.file("opt/rocm/lib/libMIOpen.so.1.0.60401", "ELF")
    }

    /// A DKMS module version registered and built for `kernel`.
    pub(crate) fn dkms(&self, name: &str, version: &str, kernel: &str) -> &FakeMachine {
        self.file(
            &format!("var/lib/dkms/{name}/{version}/{kernel}/x86_64/module/amdgpu.ko.xz"),
            "xz",
        )
        .file(
            &format!("var/lib/dkms/{name}/{version}/build/Makefile"),
            "obj-m += amdgpu.o\n",
        )
        .file(
            &format!("usr/src/{name}-{version}/dkms.conf"),
            &format!("PACKAGE_NAME=\"{name}\"\nPACKAGE_VERSION=\"{version}\"\n"),
        )
    }

    /// Like [`FakeMachine::dkms`], with an xz-compressed amdgpu.ko whose
    /// modinfo carries `srcversion`.
    pub(crate) fn dkms_built(
        &self,
        name: &str,
        version: &str,
        kernel: &str,
        srcversion: &str,
    ) -> &FakeMachine {
        use std::io::Write;
        self.dkms(name, version, kernel);
        let mut ko = b"\x7fELF".to_vec();
        ko.extend(std::iter::repeat_n(0u8, 100_000));
        ko.extend_from_slice(
            format!("license=GPL and additional rights\0srcversion={srcversion}\0depends=drm\0")
                .as_bytes(),
        );
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 1);
        xz.write_all(&ko).unwrap();
        let path = self.root().join(format!(
            "var/lib/dkms/{name}/{version}/{kernel}/x86_64/module/amdgpu.ko.xz"
        ));
        std::fs::write(path, xz.finish().unwrap()).unwrap();
        self
    }

    /// doctor's verdict cache for this machine: the fake user's, in the tree.
    pub(crate) fn cache_home(&self) -> std::path::PathBuf {
        self.root().join("home/user/.cache")
    }

    /// An environment variable for the doctor run.
    pub(crate) fn env(&mut self, name: &str, value: &str) -> &mut FakeMachine {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// `cargo xtask doctor --root <tree> <args>` with the repository's
    /// knowledge file and recipes, each item of the text on one line
    /// (`COLUMNS=1000`): what doctor says; `doctor_text.rs` holds how it
    /// is laid out at 60, 80 and 200 columns.
    pub(crate) fn doctor(&self, args: &[&str]) -> Run {
        Run::of(
            self.doctor_command(args)
                .env("COLUMNS", "1000")
                .output()
                .expect("running xtask doctor"),
        )
    }

    /// The command [`FakeMachine::doctor`] runs, to run it another way.
    pub(crate) fn doctor_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
        cmd.arg("doctor")
            .arg("--root")
            .arg(self.root())
            .args(args)
            .env("PATCHKIT_ROOT", repo_root())
            .env("CI", "true")
            .env_remove("MIOPEN_DEBUG_CONV_GEMM")
            .env_remove("MIOPEN_DEBUG_CONV_DIRECT_OCL_WRW2")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("VIRTUAL_ENV")
            .env_remove("CONDA_PREFIX")
            .env_remove("COLUMNS")
            .env_remove("NO_COLOR")
            .env("HOME", "/home/user")
            .env("XDG_CACHE_HOME", self.cache_home());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// The `--json` report, parsed.
    pub(crate) fn report(&self) -> (Run, serde_json::Value) {
        self.report_with(&[])
    }

    /// The `--json` report of a run with these arguments too, parsed.
    pub(crate) fn report_with(&self, args: &[&str]) -> (Run, serde_json::Value) {
        let mut all = vec!["--json"];
        all.extend(args);
        let run = self.doctor(&all);
        let json = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}\n{}", run.stdout, run.stderr));
        (run, json)
    }
}

/// The verdict of fault `id` in a `--json` report.
pub(crate) fn fault<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["faults"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("fault {id} in {report:#}"))
}

/// The `next` steps of a fault, joined by newlines: each step's command
/// lines (program and arguments joined by spaces), then its text.
pub(crate) fn next(fault: &serde_json::Value) -> String {
    let mut lines = Vec::new();
    for step in fault["next"].as_array().unwrap() {
        for c in step["commands"].as_array().unwrap() {
            let mut words = vec![c["command"].as_str().unwrap()];
            words.extend(
                c["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap()),
            );
            lines.push(words.join(" "));
        }
        lines.push(step["text"].as_str().unwrap().to_owned());
    }
    lines.join("\n")
}

/// The judged knob `name` of a `--json` report.
pub(crate) fn knob<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name)
        .unwrap_or_else(|| panic!("knob {name} in {:#}", report["knobs"]))
}

/// An RDNA4 machine on Ubuntu's 6.14.0-36 (in the affected range by
/// version) whose amdgpu modprobe would load is `module`.
pub(crate) fn rdna4_614_with(module: &Path, rel: &str) -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 0x7551)
        .kernel("6.14.0-36-generic")
        .cmdline("BOOT_IMAGE=/vmlinuz ro quiet")
        .rocm("7.1.1-53", "1.1.0");
    let dest = m.root().join("lib/modules/6.14.0-36-generic").join(rel);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(module, dest).unwrap();
    m
}

/// A process holding a file memory-mapped (python3's `mmap`) until dropped,
/// for `doctor --pid`.
pub(crate) struct Holder(std::process::Child);

impl Holder {
    /// The python3 script a holder runs: maps `argv[1]`, says `mapped`,
    /// waits for its stdin to close.
    pub(crate) const SCRIPT: &'static str = "import mmap, sys\nf = open(sys.argv[1], 'rb')\nm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\nprint('mapped', flush=True)\nsys.stdin.read()\n";

    /// `python3 -c SCRIPT lib`, to start with [`Holder::start`].
    pub(crate) fn python(lib: &Path) -> Command {
        let mut cmd = Command::new("python3");
        cmd.arg("-c").arg(Holder::SCRIPT).arg(lib);
        cmd
    }

    /// Starts `cmd` (which ends in running [`Holder::SCRIPT`] in its own
    /// process, by `exec`) and returns once the file is mapped.
    pub(crate) fn start(cmd: &mut Command) -> Holder {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the holder");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "mapped", "the holder did not map its file");
        Holder(child)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// Virtual memory a bounded doctor run may take (address space, not resident).
pub(crate) const ADDRESS_SPACE: u64 = 1 << 30;
/// Resident memory a doctor run may peak at, KiB (issue #30: 256 MiB).
pub(crate) const PEAK_KIB: u64 = 256 << 10;
/// A run longer than this has hung.
pub(crate) const HANG: u64 = 60;

/// `cmd` (a `doctor --json` run) under the memory and time limits of
/// [`crate::support::bounded`]: it must end by itself with 0 or 3
/// (affected), print a report and peak under [`PEAK_KIB`]; its time and
/// peak are printed (reported, not asserted).
#[track_caller]
pub(crate) fn bounded_report(
    cmd: &mut Command,
    what: &str,
) -> (super::bounded::Bounded, serde_json::Value) {
    cmd.env("MALLOC_ARENA_MAX", "2");
    let run = super::bounded::run(cmd, ADDRESS_SPACE, HANG);
    run.ended_with(&[0, 3]);
    eprintln!(
        "doctor on {what}: {:.2}s, peak {} KiB",
        run.seconds, run.peak_kib
    );
    assert!(
        run.peak_kib <= PEAK_KIB,
        "doctor on {what} peaked at {} KiB, over {PEAK_KIB} KiB",
        run.peak_kib
    );
    let report = serde_json::from_str(&run.run.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}", run.run.stdout));
    (run, report)
}
