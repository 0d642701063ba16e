//! The Debian-source recipe against the real `/usr/src/linux-source-6.12.tar.xz`
//! (apt-get install linux-source-6.12): `apply` builds the patched amd tree
//! and `verify` finds it exactly as recorded; `verify --recipe` gives the
//! three verdicts on a pristine extraction, with patches derived here from
//! that very tree (the upstream fix needs the network; on a networked
//! machine `verify <tree> --recipe amdgpu-expert-sched-6.12` says `applied`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{ci, have_tool, Project};

const TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";
const AMDKFD: &str = "drivers/gpu/drm/amd/amdkfd";
const ASM: &str = "drivers/gpu/drm/amd/amdkfd/cwsr_trap_handler_gfx12.asm";
const HEADER: &str = "drivers/gpu/drm/amd/amdkfd/cwsr_trap_handler.h";

/// Whether Debian's kernel source is here; in CI it must be.
fn have_debian_source() -> bool {
    if Path::new(TARBALL).is_file() {
        return true;
    }
    if ci() {
        panic!("{TARBALL} is missing and CI=true: .ci/setup installs linux-source-6.12");
    }
    eprintln!("skipping: {TARBALL} is missing (apt-get install linux-source-6.12)");
    false
}

#[test]
fn the_debian_recipe_applies_to_the_real_source_and_verifies() {
    if !have_debian_source() {
        return;
    }
    let p = Project::new();
    p.copy_from_repo(&[
        "recipes/amdgpu-debian-6.12.toml",
        "patches/amdgpu-debian-6.12",
    ]);
    let tree = p.root().join("tree");
    p.xtask(&[
        "apply",
        "amdgpu-debian-6.12",
        "--into",
        tree.to_str().unwrap(),
    ])
    .success()
    .stdout_has("applied 2 patches of amdgpu-debian-6.12");
    let trace =
        std::fs::read_to_string(tree.join("drivers/gpu/drm/amd/amdgpu/amdgpu_trace.h")).unwrap();
    assert!(trace.contains("#define TRACE_INCLUDE_PATH .\n"));
    // The module version comes from an object of ours added from the
    // Makefile's head; amdgpu_drv.c is Debian's as it was.
    let amdgpu = tree.join("drivers/gpu/drm/amd/amdgpu");
    let version = std::fs::read_to_string(amdgpu.join("patchkit_version.c")).unwrap();
    assert!(version.ends_with("MODULE_VERSION(PATCHKIT_VERSION);\n"));
    let makefile = std::fs::read_to_string(amdgpu.join("Makefile")).unwrap();
    assert!(makefile.contains("\namdgpu-objs += patchkit_version.o\n"));
    let drv = std::fs::read_to_string(amdgpu.join("amdgpu_drv.c")).unwrap();
    assert!(!drv.contains("MODULE_VERSION"));
    p.xtask(&["verify", tree.to_str().unwrap()])
        .success()
        .stdout_has("applied              0001-dkms-trace-include-path.patch")
        .stdout_has("applied              0002-dkms-module-version.patch")
        .stdout_has("ok: the tree is exactly as recorded");
    // The tree carries what Debian's 6.12.117 carries: the expert-scheduling
    // fix of the gfx12 trap handler (SCHED_MODE saved in ttmp11).
    let asm = std::fs::read_to_string(tree.join(ASM)).unwrap();
    assert!(
        asm.contains("TTMP11_SCHED_MODE_SHIFT"),
        "{ASM} lacks the fix"
    );
}

/// `amdkfd/` of the tarball, untouched, by the system's own tar.
fn pristine_amdkfd(dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    let status = Command::new("tar")
        .arg("-xJf")
        .arg(TARBALL)
        .arg("-C")
        .arg(dest)
        .arg("--strip-components=1")
        .arg("--wildcards")
        .arg(format!("*/{AMDKFD}/*"))
        .status()
        .expect("tar");
    assert!(status.success(), "extracting {AMDKFD} of {TARBALL}");
}

/// `diff -u` of two versions of `rel`, labelled as a `-p1` patch of it.
fn derive(work: &Path, rel: &str, old: &str, new: &str) -> String {
    let (a, b) = (work.join("old"), work.join("new"));
    std::fs::write(&a, old).unwrap();
    std::fs::write(&b, new).unwrap();
    let out = Command::new("diff")
        .arg("-u")
        .arg(format!("--label=a/{rel}"))
        .arg(format!("--label=b/{rel}"))
        .arg(&a)
        .arg(&b)
        .output()
        .expect("diff");
    assert_eq!(
        out.status.code(),
        Some(1),
        "diff found no difference in {rel}"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Lines `from..to` of `text` removed.
fn without(text: &str, from: usize, to: usize) -> String {
    text.split_inclusive('\n')
        .enumerate()
        .filter(|(i, _)| !(from..to).contains(i))
        .map(|(_, l)| l)
        .collect()
}

/// `line` inserted before line `at` of `text`.
fn with(text: &str, at: usize, line: &str) -> String {
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    lines.insert(at, line);
    lines.concat()
}

#[test]
fn verify_against_a_series_says_applied_not_applied_and_conflicts() {
    if !have_debian_source() || !have_tool("diff") || !have_tool("tar") {
        return;
    }
    let p = Project::new();
    let pristine: PathBuf = p.root().join("pristine");
    pristine_amdkfd(&pristine);
    let asm = std::fs::read_to_string(pristine.join(ASM)).unwrap();
    let header = std::fs::read_to_string(pristine.join(HEADER)).unwrap();
    let work = p.root().join("derive");
    std::fs::create_dir_all(&work).unwrap();

    // (a) Carried: the tree has the lines that save SCHED_MODE; a patch that
    // adds them to a tree without them is one this tree already carries.
    let lines: Vec<&str> = asm.split_inclusive('\n').collect();
    let save = lines
        .iter()
        .position(|l| l.contains("Save SCHED_MODE[1:0] into ttmp11"))
        .expect("Debian's 6.12 gfx12 trap handler saves SCHED_MODE (the fix of 6.12.64)");
    let carried = derive(&work, ASM, &without(&asm, save, save + 3), &asm);
    // (c) Conflicts: the patch's context is a line the tree does not have.
    let first_define = header
        .split_inclusive('\n')
        .position(|l| l.starts_with("static const uint32_t"))
        .expect("an array in cwsr_trap_handler.h");
    let mut moved: Vec<String> = header.split_inclusive('\n').map(str::to_owned).collect();
    moved[first_define + 1] = "\t0xdeadbeef, 0xdeadbeef, 0xdeadbeef, 0xdeadbeef,\n".to_owned();
    let moved = moved.concat();
    let conflicting = derive(
        &work,
        HEADER,
        &moved,
        &with(&moved, first_define + 2, "\t0x00000000,\n"),
    );
    // (b) Not carried: a line the tree does not have yet.
    let end = lines.len() - 1;
    let added = derive(
        &work,
        ASM,
        &asm,
        &with(&asm, end, "// rocm-patchkit: a line this tree lacks\n"),
    );

    let dir = p.root().join("patches/debian-verdicts");
    std::fs::create_dir_all(&dir).unwrap();
    let names = [
        "0001-carried.patch",
        "0002-conflicting.patch",
        "0003-not-carried.patch",
    ];
    for (name, text) in names.iter().zip([&carried, &conflicting, &added]) {
        std::fs::write(dir.join(name), text).unwrap();
    }
    std::fs::write(dir.join("series"), names.join("\n") + "\n").unwrap();
    let patches: String = names
        .iter()
        .map(|n| format!("[[patch]]\nfile = \"{n}\"\n\n"))
        .collect();
    p.recipe(
        "debian-verdicts",
        &format!(
            r#"[package]
name = "debian-verdicts"
version = "6.12.0"
summary = "verdicts on Debian's amdkfd"
description = "test"
license = "GPL-2.0-only"
maintainer = "t <t@patchkit.invalid>"

[source]
local = "{TARBALL}"
strip = 1
include = ["{AMDKFD}/**"]

{patches}[target]
kind = "dkms"
kernel = ">=6.12, <6.13"
"#
        ),
    );
    let run = p.xtask(&[
        "verify",
        pristine.to_str().unwrap(),
        "--recipe",
        "debian-verdicts",
        "--json",
    ]);
    run.fails_with(1);
    let checks: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let verdicts: Vec<(&str, &str)> = checks
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["patch"].as_str().unwrap(), c["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("0001-carried.patch", "applied"),
            ("0002-conflicting.patch", "conflicts"),
            ("0003-not-carried.patch", "not-applied"),
        ]
    );
    p.xtask(&[
        "verify",
        pristine.to_str().unwrap(),
        "--recipe",
        "debian-verdicts",
    ])
    .fails_with(1)
    .stdout_has("applied      0001-carried.patch")
    .stdout_has("conflicts    0002-conflicting.patch")
    .stdout_has(&format!("    {HEADER}: "))
    .stdout_has("not applied  0003-not-carried.patch")
    .stderr_has("1 patches of debian-verdicts conflict with");
}
