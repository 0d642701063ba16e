//! The places TheRock installs hipBLASLt, each holding a sample of Debian's
//! real libhipblaslt1 7.1.1 (gfx1200/gfx1201 kernel files that switch
//! expert scheduling on, copied from what `.ci/setup` unpacks): the
//! `rocm[libraries]` wheel of a venv
//! (`site-packages/_rocm_sdk_libraries_gfx120X_all/lib`, with
//! `_rocm_sdk_core/lib` and `rocm_sdk` beside it), ROCm 7.13+ system
//! packages (`/opt/rocm/core-7.13` behind update-alternatives' links) and
//! a tarball unpacked into `/opt/rocm/core-10.0` with no `/opt/rocm/lib`.
//! doctor finds each (judged "on", with the file, and the ROCm release the
//! layout names); `rewrite-hipblaslt --python VENV` and
//! `rewrite-hipblaslt PATH` rewrite them, doctor then says mitigated, and
//! `--undo` puts every byte back.

use std::path::{Path, PathBuf};

use crate::support::codeobj;
use crate::support::doctor::{fault, next, FakeMachine};
use crate::support::inplace::{debian, digests, kernel_digests, place, rewrite};

const VENV: &str = "home/user/venv";
const SITE: &str = "home/user/venv/lib/python3.12/site-packages";
const WHEEL_LIB: &str =
    "home/user/venv/lib/python3.12/site-packages/_rocm_sdk_libraries_gfx120X_all/lib";

/// RDNA4 (gfx1201) on an unfixed kernel, amdgpu loaded with CWSR on.
fn rdna4() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1);
    m
}

/// A venv holding TheRock's wheels as pip installs them: the platform
/// package with Debian's library and kernel sample, the dist-info of the
/// `rocm-sdk-libraries-gfx120X-all` wheel, `_rocm_sdk_core` with comgr, and
/// the `rocm_sdk` package.
fn therock_venv(sid: &Path) -> FakeMachine {
    let m = rdna4();
    place(sid, &m.root().join(WHEEL_LIB), "libhipblaslt.so.1");
    m.file(
        &format!("{SITE}/rocm_sdk_libraries_gfx120x_all-7.10.0.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: rocm-sdk-libraries-gfx120X-all\nVersion: 7.10.0\n",
    )
    .file(
        &format!("{SITE}/rocm_sdk_core-7.10.0.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: rocm-sdk-core\nVersion: 7.10.0\n",
    )
    .file(
        &format!("{SITE}/_rocm_sdk_core/lib/libamd_comgr.so.3"),
        "ELF",
    )
    .file(
        &format!("{SITE}/_rocm_sdk_core/lib/libamdhip64.so.7"),
        "ELF",
    )
    .file(
        &format!("{SITE}/rocm_sdk/_dist_info.py"),
        "__version__ = '7.10.0'\n",
    );
    m
}

/// The hipBLASLt of a `--json` report whose path ends with `path_end`.
fn library<'a>(report: &'a serde_json::Value, path_end: &str) -> &'a serde_json::Value {
    report["machine"]["hipblaslt_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["path"].as_str().unwrap().ends_with(path_end))
        .unwrap_or_else(|| panic!("a hipBLASLt at ...{path_end} in {:#}", report["machine"]))
}

fn report(m: &FakeMachine, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let run = m.doctor(&all);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}\n{}", run.stdout, run.stderr))
}

/// The library is judged "on" with a gfx12 file of `kernels` as proof.
fn judged_on(lib: &serde_json::Value, kernels: &str) {
    assert_eq!(lib["judgement"]["verdict"], "on", "{lib:#}");
    let file = lib["judgement"]["file"].as_str().unwrap();
    assert!(file.starts_with(&format!("{kernels}/")), "{file}");
    assert!(file.contains("_gfx120"), "{file}");
}

#[test]
fn a_therock_wheel_in_a_venv_is_found_judged_on_and_named_for_its_release() {
    let Some(sid) = debian("sid") else { return };
    let m = therock_venv(&sid);
    let report = report(&m, &["--python", "/home/user/venv"]);
    let lib = library(&report, &format!("{WHEEL_LIB}/libhipblaslt.so.1"));
    assert_eq!(lib["kind"], "rocm-sdk wheel", "{lib:#}");
    judged_on(lib, &format!("/{WHEEL_LIB}/hipblaslt/library"));
    assert_eq!(lib["rocm"]["version"], "7.10.0", "{lib:#}");
    assert!(
        lib["rocm"]["from"]
            .as_str()
            .unwrap()
            .ends_with("rocm_sdk_libraries_gfx120x_all-7.10.0.dist-info/METADATA"),
        "{lib:#}"
    );
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    assert!(
        next(cwsr).contains(&format!("cargo xtask rewrite-hipblaslt /{WHEEL_LIB}")),
        "{cwsr:#}"
    );
    // comgr is the wheel's: AMD's build, not Debian's
    let comgr = &report["machine"]["comgr"];
    assert_eq!(
        comgr["package"],
        format!("/{SITE}/_rocm_sdk_core/lib/libamd_comgr.so.3"),
        "{comgr:#}"
    );
    assert_eq!(comgr["debian"], false);
    // the site-packages folder itself, named as --python, finds it too
    let report = self::report(&m, &["--python", &format!("/{SITE}")]);
    assert_eq!(
        library(&report, "libhipblaslt.so.1")["kind"],
        "rocm-sdk wheel"
    );
    let text = m.doctor(&["--python", "/home/user/venv"]).stdout;
    assert!(
        text.contains(&format!(
            "library    [1] rocm-sdk wheel, 1, ROCm 7.10.0\n               /{WHEEL_LIB}/libhipblaslt.so.1\n"
        )),
        "{text}"
    );
}

#[test]
fn a_rocblas_in_a_therock_wheel_is_judged_too() {
    let m = rdna4();
    m.file(&format!("{WHEEL_LIB}/librocblas.so.5"), "ELF").file(
        &format!("{SITE}/rocm_sdk_libraries_gfx120x_all-7.10.0.dist-info/METADATA"),
        "Version: 7.10.0\n",
    );
    let file = m
        .root()
        .join(WHEEL_LIB)
        .join("rocblas/library/Kernels.so-000-gfx1201.hsaco");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, codeobj::gfx12_kernel_file(true)).unwrap();
    let report = report(&m, &["--python", "/home/user/venv"]);
    let rocblas = &report["machine"]["tensile_libraries"][0];
    assert_eq!(rocblas["path"], format!("/{WHEEL_LIB}/librocblas.so.5"));
    assert_eq!(rocblas["judgement"]["verdict"], "on", "{rocblas:#}");
    assert_eq!(rocblas["rocm"]["version"], "7.10.0", "{rocblas:#}");
}

#[test]
fn a_therock_wheel_is_rewritten_with_python_and_restored_byte_for_byte() {
    let Some(sid) = debian("sid") else { return };
    let m = therock_venv(&sid);
    let home = m.root().join("home/user");
    let venv = m.root().join(VENV).display().to_string();
    let lib_dir = m.root().join(WHEEL_LIB);
    let original = digests(&lib_dir);

    rewrite(&home, &["--python", &venv])
        .success()
        .stdout_has("8 kernel files rewritten");
    assert_ne!(kernel_digests(&lib_dir), original);
    assert!(lib_dir
        .join("hipblaslt/library/.patchkit/inplace.json")
        .is_file());
    let report = report(&m, &["--python", "/home/user/venv"]);
    let lib = library(&report, &format!("{WHEEL_LIB}/libhipblaslt.so.1"));
    assert_eq!(lib["judgement"]["verdict"], "off", "{lib:#}");
    assert!(lib["rewritten"].as_str().is_some(), "{lib:#}");
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "mitigated", "{cwsr:#}");

    rewrite(&home, &["--python", &venv, "--undo"])
        .success()
        .stdout_has("8 kernel files restored");
    assert_eq!(digests(&lib_dir), original);
}

/// `/opt/rocm/core-<version>/lib` holding Debian's sample as
/// `libhipblaslt.so.1.4` (with its `.so.1` link), standing in for what
/// TheRock's packages and tarballs put there.
fn rocm_core(m: &FakeMachine, sid: &Path, prefix: &str) -> PathBuf {
    let lib = m.root().join(prefix).join("lib");
    place(sid, &lib, "libhipblaslt.so.1.4");
    std::os::unix::fs::symlink("libhipblaslt.so.1.4", lib.join("libhipblaslt.so.1")).unwrap();
    lib
}

#[test]
fn rocm_core_packages_are_found_through_the_alternatives_links() {
    let Some(sid) = debian("sid") else { return };
    let m = rdna4();
    rocm_core(&m, &sid, "opt/rocm/core-7.13");
    // update-alternatives' links, as TheRock's amdrocm-core postinst makes them
    let alternatives = m.root().join("etc/alternatives");
    std::fs::create_dir_all(&alternatives).unwrap();
    let link = |target: &str, alt: &str, at: &str| {
        std::os::unix::fs::symlink(target, alternatives.join(alt)).unwrap();
        std::os::unix::fs::symlink(format!("/etc/alternatives/{alt}"), m.root().join(at)).unwrap();
    };
    link("/opt/rocm/core-7.13", "core", "opt/rocm/core");
    link("/opt/rocm/core-7.13", "core-7", "opt/rocm/core-7");
    link("/opt/rocm/core-7.13/lib", "rocm-lib", "opt/rocm/lib");
    let report = report(&m, &[]);
    let libs = report["machine"]["hipblaslt_libraries"].as_array().unwrap();
    assert_eq!(libs.len(), 1, "one real file, one entry: {libs:#?}");
    let lib = &libs[0];
    assert_eq!(lib["path"], "/opt/rocm/lib/libhipblaslt.so.1.4", "{lib:#}");
    assert_eq!(lib["kind"], "rocm");
    assert_eq!(lib["version"], "1.4");
    assert_eq!(lib["kernels"], "/opt/rocm/core-7.13/lib/hipblaslt/library");
    judged_on(lib, "/opt/rocm/core-7.13/lib/hipblaslt/library");
    assert_eq!(lib["rocm"]["version"], "7.13", "{lib:#}");
    assert_eq!(lib["rocm"]["from"], "/opt/rocm/core-7.13", "{lib:#}");
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["status"], "affected", "{cwsr:#}");
    assert!(
        next(cwsr).contains("xtask rewrite-hipblaslt /opt/rocm/lib\n")
            && next(cwsr).contains("(as root: a package's files"),
        "{cwsr:#}"
    );
}

#[test]
fn a_tarball_in_opt_rocm_core_is_rewritten_by_path_and_restored() {
    let Some(sid) = debian("sid") else { return };
    let m = rdna4();
    let lib_dir = rocm_core(&m, &sid, "opt/rocm/core-10.0");
    // no /opt/rocm/lib: a tarball unpacked there makes none
    let report = report(&m, &[]);
    let lib = library(&report, "/opt/rocm/core-10.0/lib/libhipblaslt.so.1.4");
    judged_on(lib, "/opt/rocm/core-10.0/lib/hipblaslt/library");
    assert_eq!(lib["rocm"]["version"], "10.0", "{lib:#}");
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "affected");

    // the user's own link to it, named as the path
    std::os::unix::fs::symlink("core-10.0", m.root().join("opt/rocm/core")).unwrap();
    let home = m.root().join("home/user");
    let original = digests(&lib_dir);
    let named = m.root().join("opt/rocm/core/lib").display().to_string();
    rewrite(&home, &[&named])
        .success()
        .stdout_has("8 kernel files rewritten");
    let report = self::report(&m, &[]);
    // found first through the link now, one entry for the one real file
    let lib = library(&report, "/opt/rocm/core/lib/libhipblaslt.so.1.4");
    assert_eq!(lib["kernels"], "/opt/rocm/core-10.0/lib/hipblaslt/library");
    assert_eq!(lib["judgement"]["verdict"], "off", "{lib:#}");
    assert!(lib["rewritten"].as_str().is_some(), "{lib:#}");
    assert_eq!(fault(&report, "cwsr-expert-sched")["status"], "mitigated");
    rewrite(&home, &["--undo", &named])
        .success()
        .stdout_has("8 kernel files restored");
    assert_eq!(digests(&lib_dir), original);
}
