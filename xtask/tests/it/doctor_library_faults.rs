//! A library-side fault (the DTVB1 over-read) decided per hipBLASLt found,
//! each by its own version, with no /opt/rocm: Debian's real 7.2.4
//! (hipBLASLt 1.2, unpacked by `.ci/setup`) under /usr/lib and a
//! `torch-2.10.0+rocm7.2` wheel are affected and named, exit 3; Debian's
//! 7.1.1 (hipBLASLt 1.1) alone is not; a wheel whose ROCm names no known
//! hipBLASLt is "cannot tell", and doctor's last line says so instead of
//! "no known fault".

use std::path::Path;

use crate::support::doctor::{fault, FakeMachine};
use crate::support::inplace::debian;

const TRIPLET_LIB: &str = "usr/lib/x86_64-linux-gnu";
const SITE: &str = "home/user/venv/lib/python3.12/site-packages";
const DTVB: &str = "tensile-gltr-dtvb1";

/// gfx1201 on a kernel that carries the trap-handler fix (so only the
/// library-side faults are in question), no /opt/rocm.
fn rdna4() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.18.5+deb13-amd64")
        .amdgpu(1);
    m
}

/// Hard-links Debian's `libhipblaslt.so.*` of `suite` to `dir/name` below
/// the root, with the package's gfx12 kernel files beside it.
fn place(m: &FakeMachine, suite: &Path, dir: &str, name: &str) {
    let src = suite.join(TRIPLET_LIB);
    let so = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.starts_with("libhipblaslt.so."))
        .max_by_key(|n| n.len())
        .unwrap();
    let link = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if std::fs::hard_link(from, to).is_err() {
            std::fs::copy(from, to).unwrap();
        }
    };
    let dst = m.root().join(dir);
    link(&src.join(so), &dst.join(name));
    for entry in std::fs::read_dir(src.join("hipblaslt/library"))
        .unwrap()
        .flatten()
    {
        let file = entry.file_name().into_string().unwrap();
        if file.contains("gfx120") {
            link(&entry.path(), &dst.join("hipblaslt/library").join(&file));
        }
    }
}

fn venv(m: &FakeMachine, torch: &str, hip: &str) {
    m.file(
        &format!("{SITE}/torch/version.py"),
        &format!("__version__ = '{torch}'\ndebug = False\ncuda = None\nhip = '{hip}'\n"),
    );
}

fn report(m: &FakeMachine, args: &[&str]) -> (crate::support::Run, serde_json::Value) {
    let mut all = vec!["--json"];
    all.extend(args);
    let run = m.doctor(&all);
    let json = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.stderr));
    (run, json)
}

#[test]
fn debians_7_2_4_under_usr_lib_is_affected_naming_it() {
    let Some(exp) = debian("experimental") else {
        return;
    };
    let m = rdna4();
    place(&m, &exp, TRIPLET_LIB, "libhipblaslt.so.1.2");
    let (run, json) = report(&m, &[]);
    run.fails_with(3);
    let dtvb = fault(&json, DTVB);
    assert_eq!(dtvb["status"], "affected", "{dtvb:#}");
    let why = dtvb["why"].as_str().unwrap();
    assert!(
        why.contains("/usr/lib/x86_64-linux-gnu/libhipblaslt.so.1.2: hipBLASLt 1.2 (from its file name) is affected"),
        "{why}"
    );
    m.doctor(&[]).fails_with(3).stdout_has(DTVB);
}

#[test]
fn a_torch_rocm_7_2_wheel_is_affected_and_1_1_alone_is_not() {
    let (Some(exp), Some(sid)) = (debian("experimental"), debian("sid")) else {
        return;
    };
    let m = rdna4();
    venv(&m, "2.10.0+rocm7.2", "7.2.26015");
    place(&m, &exp, &format!("{SITE}/torch/lib"), "libhipblaslt.so");
    let (run, json) = report(&m, &["--python", "/home/user/venv"]);
    run.fails_with(3);
    let dtvb = fault(&json, DTVB);
    assert_eq!(dtvb["status"], "affected", "{dtvb:#}");
    assert!(
        dtvb["why"].as_str().unwrap().contains(
            "torch/lib/libhipblaslt.so: hipBLASLt 1.2 (from ROCm 7.2 read in /home/user/venv/lib/python3.12/site-packages/torch/version.py) is affected"
        ),
        "{dtvb:#}"
    );

    let old = rdna4();
    place(&old, &sid, TRIPLET_LIB, "libhipblaslt.so.1.1");
    let (run, json) = report(&old, &[]);
    let dtvb = fault(&json, DTVB);
    assert_eq!(dtvb["status"], "not-affected", "{dtvb:#}");
    assert!(dtvb["why"]
        .as_str()
        .unwrap()
        .contains("hipBLASLt 1.1 (from its file name) is outside"));
    assert_ne!(run.code, 3, "{}", run.stdout);
}

#[test]
fn a_therock_wheel_is_judged_by_the_release_its_dist_info_names() {
    let Some(exp) = debian("experimental") else {
        return;
    };
    let m = rdna4();
    let lib = format!("{SITE}/_rocm_sdk_libraries_gfx120X_all/lib");
    place(&m, &exp, &lib, "libhipblaslt.so.1");
    m.file(
        &format!("{SITE}/rocm_sdk_libraries_gfx120x_all-7.14.0.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: rocm-sdk-libraries-gfx120X-all\nVersion: 7.14.0\n",
    );
    let (run, json) = report(&m, &["--python", "/home/user/venv"]);
    run.fails_with(3);
    let dtvb = fault(&json, DTVB);
    assert_eq!(dtvb["status"], "affected", "{dtvb:#}");
    assert!(
        dtvb["why"].as_str().unwrap().contains(&format!(
            "/{lib}/libhipblaslt.so.1: hipBLASLt 1.4.1 (from ROCm 7.14 read in /{SITE}/rocm_sdk_libraries_gfx120x_all-7.14.0.dist-info/METADATA) is affected"
        )),
        "{dtvb:#}"
    );
}

#[test]
fn one_library_doctor_cannot_read_is_cannot_tell_never_all_clear() {
    let Some(exp) = debian("experimental") else {
        return;
    };
    let m = rdna4();
    // TheRock's 7.10: its hipBLASLt release is not in hipBLASLt's changelog
    venv(&m, "2.9.0+rocm7.10.0", "7.10.25461");
    place(&m, &exp, &format!("{SITE}/torch/lib"), "libhipblaslt.so");
    let (_, json) = report(&m, &["--python", "/home/user/venv"]);
    let dtvb = fault(&json, DTVB);
    assert_eq!(dtvb["status"], "cannot-tell", "{dtvb:#}");
    assert!(dtvb["why"]
        .as_str()
        .unwrap()
        .contains("torch/lib/libhipblaslt.so: could not read its hipBLASLt version"));
    m.doctor(&["--python", "/home/user/venv"])
        .stdout_has("cannot tell: tensile-gltr-dtvb1");
}

#[test]
fn hipblaslt_1_5_0_fixes_the_free_dimension_and_not_the_k_tail() {
    let m = rdna4();
    m.rocm("10.1.0", "1.5.0");
    let (run, json) = report(&m, &[]);
    run.fails_with(3);
    assert_eq!(fault(&json, DTVB)["status"], "fixed");
    let ktail = fault(&json, "tensile-dtvb-ktail");
    assert_eq!(ktail["status"], "affected", "{ktail:#}");
    assert!(ktail["summary"].as_str().unwrap().contains("#11719"));
    assert!(ktail["summary"].as_str().unwrap().contains("is not merged"));
    assert!(ktail["why"]
        .as_str()
        .unwrap()
        .contains("hipBLASLt 1.5.0 (from its file name) is affected"));
}

#[test]
fn pytorchs_caching_switch_mitigates_both_dtvb_faults_at_its_cost() {
    let mut m = rdna4();
    m.rocm("7.2.1-81", "1.2.1");
    m.env("PYTORCH_NO_HIP_MEMORY_CACHING", "1");
    let (run, json) = report(&m, &[]);
    for id in [DTVB, "tensile-dtvb-ktail"] {
        let f = fault(&json, id);
        assert_eq!(f["status"], "mitigated", "{f:#}");
        assert!(f["why"]
            .as_str()
            .unwrap()
            .contains("PYTORCH_NO_HIP_MEMORY_CACHING=1 set"));
    }
    assert_ne!(run.code, 3, "{}", run.stdout);
    let knob = crate::support::doctor::knob(&json, "PYTORCH_NO_HIP_MEMORY_CACHING");
    assert_eq!(knob["judgement"], "mitigates", "{knob:#}");
    assert!(knob["cost"].as_str().unwrap().contains("slower allocation"));
}
