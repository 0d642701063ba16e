//! doctor's judgement of the knobs people set (environment, modprobe.d,
//! kernel command line, amdgpu parameters) and of comgr's cache fault, on
//! fake machines; and the links of the knowledge files.

use crate::support::doctor::{fault, knob, FakeMachine};
use crate::support::repo_root;

/// A gfx1201 machine on an unfixed kernel with ROCm 7.2 (hipBLASLt 1.2).
fn rdna4() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1)
        .rocm("7.2.1-81", "1.2.1");
    m
}

#[test]
fn each_knob_of_the_guides_gets_its_judgement_and_source() {
    let mut m = rdna4();
    for (k, v) in [
        ("HSA_OVERRIDE_GFX_VERSION", "10.3.0"),
        ("PYTORCH_NO_HIP_MEMORY_CACHING", "1"),
        ("HSA_USE_SVM", "0"),
        ("HSA_XNACK", "0"),
        ("HSA_DISABLE_FRAGMENT_ALLOCATOR", "1"),
        ("AMD_SERIALIZE_KERNEL", "3"),
        ("HIP_LAUNCH_BLOCKING", "1"),
        ("HIPBLAS_WORKSPACE_CONFIG", ":4096:8"),
        ("MIOPEN_DEBUG_CONV_WINOGRAD", "0"),
        ("ROCBLAS_USE_HIPBLASLT", "0"),
        ("TORCH_BLAS_PREFER_HIPBLASLT", "0"),
        ("HSA_FOO", "1"),
    ] {
        m.env(k, v);
    }
    m.file(
        "etc/modprobe.d/amdgpu.conf",
        "# from a guide\noptions amdgpu noretry=0 vm_fragment_size=9 vm_update_mode=3\noptions amdgpu gttsize=65536 gtt_size=65536\n",
    )
    .cmdline("BOOT_IMAGE=/vmlinuz root=/dev/sda1 amdgpu.cwsr_enable=0 quiet")
    .file("sys/module/amdgpu/parameters/cwsr_enable", "0\n")
    .file("sys/module/amdgpu/parameters/noretry", "0\n");
    let (_, report) = m.report();
    let want = [
        (
            "HSA_OVERRIDE_GFX_VERSION",
            "harmful",
            "rocm-systems/pull/3461",
        ),
        (
            "PYTORCH_NO_HIP_MEMORY_CACHING",
            "mitigates",
            "legacy-rocm-build/issues/6647",
        ),
        ("HSA_USE_SVM", "no-effect", "env-variables.html"),
        ("HSA_XNACK", "no-effect", "env-variables.html"),
        (
            "HSA_DISABLE_FRAGMENT_ALLOCATOR",
            "no-effect",
            "env-variables.html",
        ),
        ("AMD_SERIALIZE_KERNEL", "diagnosis", "env-variables.html"),
        ("HIP_LAUNCH_BLOCKING", "diagnosis", "env-variables.html"),
        ("HIPBLAS_WORKSPACE_CONFIG", "no-effect", "pytorch/pull/1716"),
        (
            "MIOPEN_DEBUG_CONV_WINOGRAD",
            "no-effect",
            "MIOpen/issues/3540",
        ),
        ("ROCBLAS_USE_HIPBLASLT", "unconfirmed", "rocBLAS"),
        (
            "TORCH_BLAS_PREFER_HIPBLASLT",
            "unconfirmed",
            "pytorch/pull/2125",
        ),
        ("cwsr_enable", "mitigates", "module-parameters.html"),
        ("noretry", "no-effect", "module-parameters.html"),
        ("vm_fragment_size", "no-effect", "module-parameters.html"),
        ("vm_update_mode", "no-effect", "module-parameters.html"),
        ("gttsize", "no-effect", "module-parameters.html"),
        ("gtt_size", "no-effect", "module-parameters.html"),
    ];
    for (name, judgement, source) in want {
        let k = knob(&report, name);
        assert_eq!(k["judgement"], judgement, "{name}: {k:#}");
        assert!(
            k["links"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l.as_str().unwrap().contains(source)),
            "{name}: {k:#}"
        );
    }
    let over = knob(&report, "HSA_OVERRIDE_GFX_VERSION");
    assert!(
        over["why"].as_str().unwrap().contains("gfx1030 on gfx1201"),
        "{over:#}"
    );
    assert_eq!(knob(&report, "cwsr_enable")["fault"], "cwsr-expert-sched");
    assert_eq!(knob(&report, "cwsr_enable")["from"], "kernel command line");
    assert_eq!(
        knob(&report, "noretry")["from"],
        "/etc/modprobe.d/amdgpu.conf"
    );
    assert_eq!(
        knob(&report, "ROCBLAS_USE_HIPBLASLT")["fault"],
        "tensile-gltr-dtvb1"
    );
    assert!(knob(&report, "AMD_SERIALIZE_KERNEL")["cost"]
        .as_str()
        .unwrap()
        .contains("slower"));
    let foo = knob(&report, "HSA_FOO");
    assert_eq!(foo["judgement"], "no-known-effect", "{foo:#}");
    assert!(foo["links"].as_array().unwrap().is_empty());
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "mitigated");

    let text = m.doctor(&[]);
    text.stdout_has("HSA_FOO=1 (environment): no known effect\n")
        .stdout_has("HSA_XNACK=0 (environment): no effect on any known fault here\n")
        .stdout_has("HSA_OVERRIDE_GFX_VERSION=10.3.0 (environment): HARMFUL here\n")
        .stdout_has("cwsr_enable=0 (kernel command line): mitigates cwsr-expert-sched\n");
}

#[test]
fn a_knob_for_a_fault_the_machine_does_not_have_does_nothing_here() {
    let mut m = FakeMachine::new();
    m.gpu(1, 110000, 29772)
        .kernel("6.14.0-36-generic")
        .amdgpu(1)
        .rocm("7.2.1-81", "1.2.1");
    m.env("ROCBLAS_USE_HIPBLASLT", "0")
        .env("HSA_OVERRIDE_GFX_VERSION", "11.0.0")
        .env("PYTORCH_NO_HIP_MEMORY_CACHING", "0");
    m.cmdline("root=/dev/sda1 amdgpu.cwsr_enable=0");
    let (_, report) = m.report();
    let rocblas = knob(&report, "ROCBLAS_USE_HIPBLASLT");
    assert_eq!(rocblas["judgement"], "no-effect", "{rocblas:#}");
    assert!(rocblas["why"]
        .as_str()
        .unwrap()
        .starts_with("tensile-gltr-dtvb1 does not affect this machine"));
    assert_eq!(knob(&report, "cwsr_enable")["judgement"], "no-effect");
    // the override naming the machine's own GPU changes nothing
    assert_eq!(
        knob(&report, "HSA_OVERRIDE_GFX_VERSION")["judgement"],
        "no-effect"
    );
    // on a GPU ROCm has no kernels for, the remap is the usual workaround
    let m = FakeMachine::new();
    m.gpu(1, 100302, 29695)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    let mut m = m;
    m.env("HSA_OVERRIDE_GFX_VERSION", "10.3.0");
    let (_, gfx1032) = m.report();
    let over = knob(&gfx1032, "HSA_OVERRIDE_GFX_VERSION");
    assert_eq!(over["judgement"], "no-known-effect", "{over:#}");
    assert!(over["why"]
        .as_str()
        .unwrap()
        .contains("remaps gfx1032 to gfx1030"));
    // a value the file has no fact for is not guessed
    let caching = knob(&report, "PYTORCH_NO_HIP_MEMORY_CACHING");
    assert_eq!(caching["judgement"], "no-known-effect", "{caching:#}");
}

#[test]
fn debian_comgr_7_0_2_is_flagged_with_the_cache_workaround_and_7_2_4_is_not() {
    let status = |version: &str| {
        format!("Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2\n\nPackage: libamd-comgr3\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n")
    };
    let mut m = rdna4();
    m.file("var/lib/dpkg/status", &status("7.0.2+dfsg-3"));
    let (run, report) = m.report();
    run.fails_with(3);
    let comgr = fault(&report, "comgr-unbundle-cache-key");
    assert_eq!(comgr["status"], "affected", "{comgr:#}");
    assert!(comgr["why"]
        .as_str()
        .unwrap()
        .contains("libamd-comgr3 7.0.2+dfsg-3"));
    let steps = crate::support::doctor::next(comgr);
    assert!(steps.contains("AMD_COMGR_CACHE=0"), "{steps}");
    assert!(steps.contains("rm -rf ~/.cache/comgr"), "{steps}");
    m.env("AMD_COMGR_CACHE", "0");
    let (_, report) = m.report();
    assert_eq!(
        fault(&report, "comgr-unbundle-cache-key")["status"],
        "mitigated"
    );
    assert_eq!(knob(&report, "AMD_COMGR_CACHE")["judgement"], "mitigates");

    for fixed in ["7.2.4+dfsg-1~exp1", "7.2.3+dfsg-1~exp1"] {
        let m = rdna4();
        m.file("var/lib/dpkg/status", &status(fixed));
        let (_, report) = m.report();
        let comgr = fault(&report, "comgr-unbundle-cache-key");
        assert_eq!(comgr["status"], "not-affected", "{fixed}: {comgr:#}");
    }
    // AMD's own build under /opt/rocm is not Debian's patched one
    let m = rdna4();
    m.file("opt/rocm/lib/libamd_comgr.so.3.0.70201", "ELF");
    let (_, report) = m.report();
    assert_eq!(
        fault(&report, "comgr-unbundle-cache-key")["status"],
        "not-affected"
    );
    assert_eq!(report["machine"]["comgr"]["from"], "library");
}

#[test]
fn every_link_of_the_knowledge_files_is_a_well_formed_url() {
    let root = repo_root();
    let knowledge =
        xtask::input::knowledge::Knowledge::load(&root).unwrap_or_else(|e| panic!("{e:#}"));
    let check = |link: &str, whose: &str| {
        let url = url::Url::parse(link).unwrap_or_else(|e| panic!("{whose}: `{link}`: {e}"));
        assert_eq!(url.scheme(), "https", "{whose}: {link}");
        assert!(
            url.host_str().is_some_and(|h| h.contains('.')),
            "{whose}: {link}"
        );
        assert!(!link.contains(char::is_whitespace), "{whose}: {link}");
    };
    let mut count = 0;
    for f in &knowledge.faults {
        assert!(!f.links.is_empty(), "fault {} has no link", f.id);
        for link in &f.links {
            check(link, &f.id);
            count += 1;
        }
    }
    assert!(!knowledge.knobs.knobs.is_empty());
    for k in &knowledge.knobs.knobs {
        assert!(!k.links.is_empty(), "knob {} has no link", k.name);
        for link in &k.links {
            check(link, &k.name);
            count += 1;
        }
    }
    // and every https link written anywhere in the files, comments too
    for file in ["knowledge/faults.toml", "knowledge/knobs.toml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for (at, _) in text.match_indices("https://") {
            let link: String = text[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | ',' | ']' | ')'))
                .collect();
            check(&link, file);
        }
    }
    assert!(count > 20, "{count}");
}

#[test]
fn a_rocblas_with_gfx12_kernels_is_judged_for_expert_scheduling_like_hipblaslt() {
    use crate::support::codeobj;
    let lib = "usr/lib/x86_64-linux-gnu";
    let kernels = format!("{lib}/rocblas/5/library");
    let with = |expert_sched: bool| {
        let m = FakeMachine::new();
        m.gpu(1, 120001, 30032)
            .kernel("6.14.0-36-generic")
            .amdgpu(1);
        m.file(&format!("{lib}/librocblas.so.5.2"), "ELF")
            .file(&format!("{lib}/librocblas.so.5"), "ELF");
        let file = m.root().join(&kernels).join("Kernels.so-000-gfx1201.hsaco");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, codeobj::gfx12_kernel_file(expert_sched)).unwrap();
        // a hipBLASLt that keeps it off: only rocBLAS can switch it on
        m.file(&format!("{lib}/libhipblaslt.so.1.2"), "ELF");
        let hb = m.root().join(lib).join("hipblaslt/library/k_gfx1201.co");
        std::fs::create_dir_all(hb.parent().unwrap()).unwrap();
        std::fs::write(&hb, codeobj::gfx12_kernel_file(false)).unwrap();
        m.report().1
    };
    let report = with(true);
    let rocblas = &report["machine"]["tensile_libraries"][0];
    assert_eq!(
        rocblas["path"],
        format!("/{lib}/librocblas.so.5.2"),
        "{rocblas:#}"
    );
    assert_eq!(rocblas["kind"], "rocblas");
    assert_eq!(rocblas["judgement"]["verdict"], "on", "{rocblas:#}");
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    assert!(cwsr["why"]
        .as_str()
        .unwrap()
        .contains("librocblas.so.5.2 (rocblas) switches expert scheduling on"));

    let report = with(false);
    assert_eq!(
        report["machine"]["tensile_libraries"][0]["judgement"]["verdict"],
        "off"
    );
    assert_eq!(
        fault(&report, "cwsr-expert-sched")["status"],
        "not-affected"
    );
}

/// The changelog of Debian's libamd-comgr3 of `suite`, from `.ci/setup`, as
/// (version, entry text) pairs, newest first; `None` (a skip) only outside CI.
fn comgr_changelog(suite: &str) -> Option<Vec<(String, String)>> {
    use std::io::Read;
    let base = std::env::var_os("PATCHKIT_DEBIAN_COMGR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/var/cache/rocm-patchkit/debian-comgr".into());
    let file = base
        .join(suite)
        .join("usr/share/doc/libamd-comgr3/changelog.Debian.gz");
    if !file.is_file() {
        assert!(
            !crate::support::ci(),
            "{} is missing and CI=true: run .ci/setup",
            file.display()
        );
        eprintln!("skipping: {} is missing (run .ci/setup)", file.display());
        return None;
    }
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("rocm-llvm (") {
            let version = rest.split(')').next().unwrap().to_owned();
            entries.push((version, String::new()));
        } else if let Some((_, body)) = entries.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    assert!(!entries.is_empty(), "no entries in {}", file.display());
    Some(entries)
}

#[test]
fn the_comgr_range_follows_the_debian_changelogs() {
    let (Some(sid), Some(experimental)) = (comgr_changelog("sid"), comgr_changelog("experimental"))
    else {
        return;
    };
    let knowledge = xtask::input::knowledge::Knowledge::load(&repo_root()).unwrap();
    let f = knowledge
        .faults
        .iter()
        .find(|f| f.id == "comgr-unbundle-cache-key")
        .unwrap();
    let range = f.comgr.as_ref().unwrap();
    let affected =
        |v: &str| range.matches(xtask::input::knowledge::Version::parse_prefix(v).unwrap());
    // sid's package (the one measured) has no fix and is in the range
    assert!(sid.iter().all(|(_, body)| !body.contains("2142813")));
    assert!(affected(&sid[0].0), "sid {} outside {range}", sid[0].0);
    // the fix lands in experimental's entry that names LP: #2142813
    let at = experimental
        .iter()
        .position(|(_, b)| b.contains("LP: #2142813"))
        .unwrap();
    let (fixed, body) = &experimental[at];
    assert!(body.contains("offload compression issue"), "{body}");
    assert!(
        !affected(fixed),
        "{fixed} is where the fix landed, but inside {range}"
    );
    assert!(!affected(&experimental[0].0));
    // the entry before the fix is affected; the broken cast came with LLVM 21
    assert!(
        affected(&experimental[at + 1].0),
        "{}",
        experimental[at + 1].0
    );
    let llvm21 = experimental
        .iter()
        .position(|(_, b)| b.contains("from LLVM 20 to LLVM 21"))
        .unwrap();
    assert!(
        affected(&experimental[llvm21].0),
        "{}",
        experimental[llvm21].0
    );
    assert!(
        !affected(&experimental[llvm21 + 1].0),
        "{}",
        experimental[llvm21 + 1].0
    );
}
