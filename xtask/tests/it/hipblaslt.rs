//! `cargo xtask build-hipblaslt` against a real git monorepo laid out like
//! rocm-libraries: the upstream fix cherry-picked by commit id, CMake
//! configure/build/install run for real with a fake ROCm prefix, packages
//! checked with dpkg-deb, rpm and bsdtar; failures leave `dist/` as it was;
//! and the GitHub workflow names only commands that exist.

use std::path::Path;
use std::process::Command;

use crate::support::hipblaslt::{
    fake_rocm, have_build_tools, run, tar_names, tar_text, Monorepo, FIXED,
};
use crate::support::tools::stdout;
use crate::support::{have_tool, repo_recipes_of_kind, repo_root, Project, Run};

fn manifest(dist: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dist.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn builds_the_patched_library_and_packages_it_with_a_toolchain() {
    if !have_build_tools() {
        return;
    }
    let (p, mono) = fixed();
    let rocm = fake_rocm(p.root(), "7.1.1-0");
    let dist = p.root().join("dist/hip");
    let run = run(
        &p,
        &[
            "build-hipblaslt",
            "hip",
            "--rocm",
            rocm.to_str().unwrap(),
            "--build",
            "always",
            "--jobs",
            "2",
        ],
        &[],
    );
    run.success()
        .stdout_has("built hip for gfx1200;gfx1201: 3 package(s)")
        .stderr_has("configure: done in")
        .stderr_has("build: done in")
        .stderr_has("install: done in");
    assert!(xtask::release::dist::verify(&dist).unwrap().is_empty());

    // Source artifacts: pristine and patched, only the extracted paths.
    let orig = dist.join("source/hipblaslt-fixture_7.1.1.orig.tar.gz");
    let patched = dist.join("source/hipblaslt-fixture-7.1.1-patched.tar.gz");
    let names = tar_names(&patched);
    assert!(names.contains(&"hipblaslt-fixture-7.1.1/shared/origami/README.md".to_owned()));
    assert!(!names
        .iter()
        .any(|n| n.contains("rocblas") || n.contains(".patchkit")));
    let cpp = "hipblaslt-fixture-7.1.1/projects/hipblaslt/library/src/hipblaslt.cpp";
    assert!(tar_text(&patched, cpp).contains(FIXED));
    assert!(!tar_text(&orig, cpp).contains(FIXED));
    let series = std::fs::read_to_string(dist.join("source/patches/series")).unwrap();
    assert_eq!(series, "0001-upstream.patch\n");

    // The manifest says what was built, with what.
    let m = manifest(&dist);
    assert_eq!(m["kind"], "hipblaslt");
    assert_eq!(m["source"]["pin"], format!("commit {}", mono.base));
    assert_eq!(m["build"]["binary"], "built");
    assert_eq!(m["build"]["gpu_targets"], "gfx1200;gfx1201");
    assert_eq!(m["build"]["rocm_version"], "7.1.1-0");
    assert_eq!(
        m["build"]["install_prefix"],
        "/opt/rocm-patchkit/hipblaslt-7.1.1"
    );

    // The library in the packages was compiled for the GPU targets given.
    let lib = "opt/rocm-patchkit/hipblaslt-7.1.1/lib/libhipblaslt.so.1.1.0";
    let staged = p.root().join("target/patchkit/work/hip/root").join(lib);
    let bytes = std::fs::read(&staged).unwrap();
    let compiled_in = b"targets:gfx1200,gfx1201";
    assert!(bytes.windows(compiled_in.len()).any(|w| w == compiled_in));
    let runpath = format!("$ORIGIN/../lib:{0}/lib:{0}/llvm/lib", rocm.display());
    assert!(
        bytes
            .windows(runpath.len())
            .any(|w| w == runpath.as_bytes()),
        "the library's RUNPATH does not name the ROCm it was built against"
    );
    assert!(p
        .root()
        .join("target/patchkit/work/hip/build.log")
        .is_file());

    let arch = std::env::consts::ARCH;
    let deb_arch = if arch == "x86_64" { "amd64" } else { "arm64" };
    let deb = dist.join(format!("hipblaslt-fixture_7.1.1-1_{deb_arch}.deb"));
    let rpm = dist.join(format!("hipblaslt-fixture-7.1.1-1.{arch}.rpm"));
    let pkg = dist.join(format!("hipblaslt-fixture-7.1.1-1-{arch}.pkg.tar.zst"));
    if have_tool("dpkg-deb") {
        let info = stdout(Command::new("dpkg-deb").args(["-I", deb.to_str().unwrap()]));
        assert!(
            info.contains(&format!("Architecture: {deb_arch}")),
            "{info}"
        );
        assert!(info.contains("Section: libs"), "{info}");
        let files = stdout(Command::new("dpkg-deb").args(["-c", deb.to_str().unwrap()]));
        assert!(files.contains(&format!("./{lib}")), "{files}");
        assert!(
            files.contains("libhipblaslt.so -> libhipblaslt.so.1"),
            "{files}"
        );
        assert!(
            files.contains("./opt/rocm-patchkit/hipblaslt-7.1.1/include/hipblaslt/hipblaslt.h"),
            "{files}"
        );
        assert!(!files.contains("./opt/rocm/"), "{files}");
    }
    if have_tool("rpm") {
        let q = stdout(Command::new("rpm").args([
            "-qp",
            "--qf",
            "%{NAME} %{ARCH}\\n",
            rpm.to_str().unwrap(),
        ]));
        assert_eq!(q.trim(), format!("hipblaslt-fixture {arch}"));
        let files = stdout(Command::new("rpm").args(["-qpl", rpm.to_str().unwrap()]));
        assert!(files.contains(&format!("/{lib}")), "{files}");
        assert!(
            !files.lines().any(|l| l == "/opt"),
            "rpm owns /opt:\n{files}"
        );
    }
    if have_tool("bsdtar") {
        let files = stdout(Command::new("bsdtar").args(["-tf", pkg.to_str().unwrap()]));
        assert!(files.contains(lib), "{files}");
        let info = stdout(Command::new("bsdtar").args(["-xOf", pkg.to_str().unwrap(), ".PKGINFO"]));
        assert!(info.contains(&format!("arch = {arch}")), "{info}");
    }
}

#[test]
fn two_builds_give_byte_identical_dist_folders() {
    if !have_build_tools() {
        return;
    }
    let (p, _mono) = fixed();
    let rocm = fake_rocm(p.root(), "7.1.1-0");
    let rocm = rocm.to_str().unwrap();
    for out in ["dist/a", "dist/b"] {
        run(
            &p,
            &["build-hipblaslt", "hip", "--rocm", rocm, "--out", out],
            &[],
        )
        .success();
    }
    let a = xtask::release::dist::hash_tree(&p.root().join("dist/a"), &[]).unwrap();
    let b = xtask::release::dist::hash_tree(&p.root().join("dist/b"), &[]).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 9, "{:#?}", a.keys());
}

#[test]
fn auto_without_a_toolchain_publishes_the_source_and_says_why() {
    let (p, _mono) = fixed();
    let run = run(&p, &["build-hipblaslt", "hip"], &[]);
    run.success()
        .stdout_has("binary build skipped: no usable ROCm toolchain at")
        .stderr_has("warning: binary build skipped")
        .stderr_has("(from ROCM_PATH): the folder does not exist");
    let dist = p.root().join("dist/hip");
    assert!(xtask::release::dist::verify(&dist).unwrap().is_empty());
    let m = manifest(&dist);
    let binary = m["build"]["binary"].as_str().unwrap();
    assert!(
        binary.starts_with("skipped: no usable ROCm toolchain"),
        "{binary}"
    );
    let outputs: Vec<&String> = m["outputs"].as_object().unwrap().keys().collect();
    assert_eq!(
        outputs,
        [
            "source/hipblaslt-fixture-7.1.1-patched.tar.gz",
            "source/hipblaslt-fixture_7.1.1.orig.tar.gz",
            "source/patches/0001-upstream.patch",
            "source/patches/series",
        ]
    );
}

/// Publishes a good source-only build, then returns the project, the
/// monorepo and the bytes of its manifest for a failing run to keep.
/// A project whose recipe `hip` carries the monorepo's upstream fix, locked.
fn fixed() -> (Project, Monorepo) {
    let mono = Monorepo::new();
    let p = Project::new();
    mono.locked_recipe(&p, "hip", &[&mono.fix]);
    (p, mono)
}

fn published() -> (Project, Monorepo, Vec<u8>) {
    let (p, mono) = fixed();
    run(&p, &["build-hipblaslt", "hip", "--build", "never"], &[]).success();
    let before = std::fs::read(p.root().join("dist/hip/manifest.json")).unwrap();
    (p, mono, before)
}

#[track_caller]
fn assert_untouched(p: &Project, before: &[u8]) {
    let dist = p.root().join("dist/hip");
    assert!(xtask::release::dist::verify(&dist).unwrap().is_empty());
    assert_eq!(std::fs::read(dist.join("manifest.json")).unwrap(), before);
    let leftovers: Vec<_> = std::fs::read_dir(p.root().join("dist"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(leftovers, ["hip"], "staging folders left behind");
}

#[test]
fn build_always_without_a_toolchain_fails_at_once_naming_what_is_missing() {
    let (p, _mono, before) = published();
    std::fs::remove_dir_all(p.root().join("target/patchkit/work")).unwrap();
    let empty = p.root().join("empty-rocm");
    std::fs::create_dir_all(&empty).unwrap();
    let run = run(
        &p,
        &[
            "build-hipblaslt",
            "hip",
            "--build",
            "always",
            "--rocm",
            empty.to_str().unwrap(),
        ],
        &[],
    );
    run.fails_with(1)
        .stderr_has("--build always needs a ROCm toolchain")
        .stderr_has("(from --rocm)")
        .stderr_has("neither bin/amdclang++ nor bin/hipcc")
        .stderr_has("neither lib/cmake/hip nor lib/<triplet>/cmake/hip exists");
    assert!(
        !p.root().join("target/patchkit/work/hip").exists(),
        "work started before the toolchain check"
    );
    assert_untouched(&p, &before);
}

/// `build-hipblaslt` of the published fixture with one breaking commit of
/// the monorepo (`pick`) as its patch, against a fake ROCm 7.1.1: it must
/// fail and leave `dist/` as it was. `None` without the build tools.
fn build_broken(pick: fn(&Monorepo) -> &String) -> Option<Run> {
    if !have_build_tools() {
        return None;
    }
    let (p, mono, before) = published();
    mono.locked_recipe(&p, "hip", &[pick(&mono)]);
    let rocm = fake_rocm(p.root(), "7.1.1-0");
    let run = run(
        &p,
        &["build-hipblaslt", "hip", "--rocm", rocm.to_str().unwrap()],
        &[],
    );
    run.fails_with(1);
    assert_untouched(&p, &before);
    Some(run)
}

#[test]
fn a_failing_configure_shows_the_log_tail_and_keeps_dist() {
    let Some(run) = build_broken(|mono| &mono.bad_configure) else {
        return;
    };
    run.stderr_has("configure failed")
        .stderr_has("fixture: configure broken on purpose")
        .stderr_has("build.log");
}

#[test]
fn a_failing_build_shows_the_log_tail_and_keeps_dist() {
    let Some(run) = build_broken(|mono| &mono.bad_build) else {
        return;
    };
    run.stderr_has("build failed")
        .stderr_has("fixture: compile error on purpose");
    assert!(!run.stderr.contains("configure failed"));
}

#[test]
fn without_a_recipe_the_one_for_the_found_rocm_release_is_built() {
    let mono = Monorepo::new();
    let p = Project::new();
    p.recipe("hip-a", &mono.recipe(&[]));
    p.recipe(
        "hip-b",
        &mono
            .recipe(&[])
            .replace("version = \"7.1.1\"", "version = \"7.2.0\""),
    );
    let rocm = fake_rocm(p.root(), "7.2.0-0");
    run(&p, &["build-hipblaslt", "--build", "never"], &[])
        .fails_with(2)
        .stderr_has("name a recipe: no ROCm release to choose one by")
        .stderr_has("hipblaslt recipes: hip-a, hip-b");
    run(
        &p,
        &[
            "build-hipblaslt",
            "--build",
            "never",
            "--rocm",
            rocm.to_str().unwrap(),
        ],
        &[],
    )
    .success()
    .stdout_has("published the source of hip-b in dist/hip-b");
}

#[test]
fn refuses_recipes_of_another_kind_and_bad_gpu_targets() {
    let p = Project::new();
    p.recipe(
        "dk",
        &format!(
            "{}\n[source]\ngit = \"https://example.invalid/x.git\"\nref = \"main\"\n",
            crate::support::fetch::HEAD
        ),
    );
    run(&p, &["build-hipblaslt", "dk", "--build", "never"], &[])
        .fails_with(2)
        .stderr_has("recipe dk is of kind `dkms`")
        .stderr_has("cargo xtask build-dkms dk");
    let mono = Monorepo::new();
    p.recipe("hip", &mono.recipe(&[]));
    run(
        &p,
        &["build-hipblaslt", "hip", "--gpu-targets", "gfx1200;sm_90"],
        &[],
    )
    .fails_with(2)
    .stderr_has("not a target: sm_90");
}

#[test]
fn the_workflow_parses_and_names_only_existing_xtask_commands() {
    let path = repo_root().join(".github/workflows/hipblaslt.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: serde_json::Value = serde_norway::from_str(&text).expect("valid YAML");
    let job = &doc["jobs"]["build"];
    assert!(job["container"]["image"].is_string(), "runs in a container");
    let steps = job["steps"].as_array().expect("steps");
    let mut commands = Vec::new();
    for step in steps {
        let Some(run) = step["run"].as_str() else {
            continue;
        };
        if step["id"] == "deps" {
            assert!(run.trim_start().starts_with("apt-get "), "{run}");
            continue;
        }
        for line in run.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let rest = line
                .strip_prefix("cargo xtask ")
                .unwrap_or_else(|| panic!("a run step that is not `cargo xtask`: {line}"));
            commands.push(rest.split_whitespace().next().unwrap().to_owned());
        }
    }
    assert!(commands.contains(&"build-hipblaslt".to_owned()));
    let p = Project::new();
    for command in &commands {
        p.xtask(&[command, "--help"]).success();
    }
    assert!(text.contains("--build always"));
    assert!(text.contains("upload-artifact"));

    // The matrix builds every hipblaslt recipe, and only those.
    let mut matrix: Vec<String> = job["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["recipe"].as_str().unwrap().to_owned())
        .collect();
    matrix.sort();
    let recipes: Vec<String> = repo_recipes_of_kind(xtask::input::recipe::KindName::Hipblaslt);
    assert_eq!(matrix, recipes);
}

#[test]
fn ci_builds_pinned_recipes_only_and_an_unpinned_one_names_the_lock_command() {
    let text =
        std::fs::read_to_string(repo_root().join(".github/workflows/hipblaslt.yml")).unwrap();
    assert!(
        !text.contains("run: cargo xtask lock"),
        "CI must not pin what it builds"
    );
    assert!(text.contains("cargo xtask plan ${{ matrix.recipe }} --require-pinned"));

    let mono = Monorepo::new();
    let p = Project::new();
    p.recipe("hip", &mono.recipe(&[&mono.fix]));
    run(&p, &["plan", "hip", "--require-pinned"], &[])
        .fails_with(2)
        .stderr_has("recipe `hip` is not pinned (")
        .stderr_has("run `cargo xtask lock hip` on a maintainer's machine");
    run(&p, &["lock", "hip"], &[]).success();
    run(&p, &["plan", "hip", "--require-pinned"], &[]).success();
}

/// A recipe of `mono` named `name` with `patches`, requiring `expert_sched`.
fn requiring(p: &Project, mono: &Monorepo, name: &str, patches: &[&str], expert_sched: &str) {
    let text = mono.recipe(patches).replace(
        "formats = [\"deb\", \"rpm\", \"arch\"]\n",
        &format!("formats = [\"deb\", \"rpm\", \"arch\"]\nexpert_sched = \"{expert_sched}\"\n"),
    );
    p.recipe(name, &text);
    run(p, &["lock", name], &[]).success();
}

fn build_always(p: &Project, name: &str) -> crate::support::Run {
    let rocm = fake_rocm(p.root(), "7.1.1-0");
    run(
        p,
        &[
            "build-hipblaslt",
            name,
            "--rocm",
            rocm.to_str().unwrap(),
            "--build",
            "always",
        ],
        &[],
    )
}

#[test]
fn the_built_kernels_must_show_the_fix_or_nothing_is_published() {
    if !have_build_tools() {
        return;
    }
    let mono = Monorepo::with_kernels();
    let p = Project::new();

    // with the fix: the staged gfx12 kernels keep expert scheduling off
    requiring(&p, &mono, "fixed", &[&mono.fix], "off");
    build_always(&p, "fixed")
        .success()
        .stderr_has("gfx12 kernels: expert scheduling off (1 gfx12 kernel files read");
    let dist = p.root().join("dist/fixed");
    let params = &manifest(&dist)["build"];
    assert!(
        params["gfx12_expert_sched"]
            .as_str()
            .unwrap()
            .starts_with("expert scheduling off"),
        "{params:#}"
    );
    let deb = std::fs::read_dir(&dist)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .unwrap();
    let listing = stdout(Command::new("dpkg-deb").args(["-c", deb.to_str().unwrap()]));
    assert!(
        listing.contains("/lib/hipblaslt/library/TensileLibrary_HH_gfx1201.co"),
        "{listing}"
    );

    // without it: the kernels switch it on, the build is refused, dist/ untouched
    requiring(&p, &mono, "unfixed", &[], "off");
    build_always(&p, "unfixed")
        .fails_with(1)
        .stderr_has("recipe unfixed requires gfx12 expert scheduling `off` (target.expert_sched)")
        .stderr_has("expert scheduling on for gfx12 (gfx1200 s_setreg of SCHED_MODE = 2")
        .stderr_has("TensileLibrary_HH_gfx1201.co")
        .stderr_has("nothing was published");
    assert!(!p.root().join("dist/unfixed").exists());

    // a recipe that requires a verdict other than off or on is refused at once
    p.recipe(
        "typo",
        &mono.recipe(&[]).replace(
            "kind = \"hipblaslt\"\n",
            "kind = \"hipblaslt\"\nexpert_sched = \"of\"\n",
        ),
    );
    run(&p, &["plan", "typo"], &[])
        .fails_with(2)
        .stderr_has("`target.expert_sched`: `of` is not `off` or `on`");
}

#[test]
fn a_toolchain_in_a_distribution_layout_builds_too() {
    if !have_build_tools() {
        return;
    }
    // Debian's layout: /usr/bin/hipcc, /usr/lib/<triplet>/cmake/hip, no .info/version
    let p = Project::new();
    let usr = p.root().join("usr");
    std::fs::create_dir_all(usr.join("bin")).unwrap();
    let cmake = usr.join("lib/x86_64-linux-gnu/cmake/hip");
    std::fs::create_dir_all(&cmake).unwrap();
    std::fs::write(cmake.join("hip-config.cmake"), "# the distribution's HIP\n").unwrap();
    std::fs::write(
        cmake.join("hip-config-version.cmake"),
        "set(PACKAGE_VERSION \"7.1.1\")\n",
    )
    .unwrap();
    let hipcc = usr.join("bin/hipcc");
    std::fs::write(&hipcc, "#!/bin/sh\nexec c++ \"$@\"\n").unwrap();
    std::fs::set_permissions(&hipcc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mono = Monorepo::new();
    mono.locked_recipe(&p, "hip", &[&mono.fix]);
    run(
        &p,
        &[
            "build-hipblaslt",
            "hip",
            "--rocm",
            usr.to_str().unwrap(),
            "--build",
            "always",
        ],
        &[],
    )
    .success()
    .stdout_has("built hip for gfx1200;gfx1201: 3 package(s)");
    let m = manifest(&p.root().join("dist/hip"));
    assert_eq!(
        m["build"]["rocm_version"], "7.1.1",
        "read from the HIP CMake package"
    );
    assert_eq!(m["build"]["rocm_path"], usr.to_str().unwrap());
}
