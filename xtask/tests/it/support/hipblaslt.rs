//! Fixtures for the build-hipblaslt tests: a real git monorepo laid out like
//! rocm-libraries (`projects/hipblaslt` a tiny CMake project that builds
//! and installs a shared library, `shared/`, and a project that must not be
//! extracted), upstream fix commits on a branch, and a fake ROCm prefix whose
//! `bin/hipcc` is the system C++ compiler.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::upstream::Upstream;
use crate::support::{Project, Run};

pub(crate) const EPOCH: &str = "1763150400";

const CMAKE: &str = r#"cmake_minimum_required(VERSION 3.16)
project(hipblaslt VERSION 1.1.0 LANGUAGES CXX)

option(HIPBLASLT_ENABLE_CLIENT "Build the clients" ON)
if(HIPBLASLT_ENABLE_CLIENT)
  message(FATAL_ERROR "fixture: the clients were not turned off")
endif()
if(NOT GPU_TARGETS)
  message(FATAL_ERROR "fixture: GPU_TARGETS is not set")
endif()

add_library(hipblaslt SHARED library/src/hipblaslt.cpp)
target_include_directories(hipblaslt PUBLIC library/include)
string(REPLACE ";" "," targets "${GPU_TARGETS}")
target_compile_definitions(hipblaslt PRIVATE "HIPBLASLT_GPU_TARGETS=\"targets:${targets}\"")
set_target_properties(hipblaslt PROPERTIES VERSION 1.1.0 SOVERSION 1)

install(TARGETS hipblaslt LIBRARY DESTINATION lib)
install(FILES library/include/hipblaslt/hipblaslt.h DESTINATION include/hipblaslt)

# The kernel library: the code objects whose expert scheduling matches the
# source (a real build generates them; the fixture picks the prebuilt ones).
if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/library/kernels")
  file(READ library/src/hipblaslt.cpp src)
  if(src MATCHES "gfx < 1300")
    set(sched off)
  else()
    set(sched on)
  endif()
  install(DIRECTORY library/kernels/${sched}/ DESTINATION lib/hipblaslt/library)
endif()
"#;

const HEADER: &str = "#pragma once\n\
extern \"C\" int hipblaslt_sched_mode(int gfx);\n\
extern \"C\" const char* hipblaslt_gpu_targets();\n";

const SOURCE: &str = "#include \"hipblaslt/hipblaslt.h\"\n\
\n\
// Whether generated kernels switch on expert scheduling.\n\
extern \"C\" int hipblaslt_sched_mode(int gfx) {\n\
    return gfx >= 1200 ? 1 : 0;\n\
}\n\
\n\
extern \"C\" const char* hipblaslt_gpu_targets() {\n\
    return HIPBLASLT_GPU_TARGETS;\n\
}\n";

/// The fixed line the upstream fix commit brings.
pub(crate) const FIXED: &str = "return gfx >= 1200 && gfx < 1300 ? 0 : (gfx >= 1200 ? 1 : 0);";

/// A rocm-libraries look-alike: `base` is the release (tag `rocm-7.1.1`),
/// `fix` the upstream fix on branch `develop`, `bad_configure` and
/// `bad_build` commits on their own branches that break CMake and the
/// compiler.
pub(crate) struct Monorepo {
    pub(crate) up: Upstream,
    pub(crate) base: String,
    pub(crate) fix: String,
    pub(crate) bad_configure: String,
    pub(crate) bad_build: String,
}

impl Monorepo {
    pub(crate) fn new() -> Monorepo {
        Self::build(false)
    }

    /// Like [`Monorepo::new`], with a kernel library: compressed gfx12 code
    /// objects that switch expert scheduling on, or (once the fix is
    /// applied) do not.
    pub(crate) fn with_kernels() -> Monorepo {
        Self::build(true)
    }

    fn build(kernels: bool) -> Monorepo {
        let up = Upstream::new();
        if kernels {
            for (sched, on) in [("on", true), ("off", false)] {
                let path = up.path().join(format!(
                    "projects/hipblaslt/library/kernels/{sched}/TensileLibrary_HH_gfx1201.co"
                ));
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, crate::support::codeobj::gfx12_kernel_file(on)).unwrap();
            }
        }
        up.file("projects/hipblaslt/CMakeLists.txt", CMAKE)
            .file(
                "projects/hipblaslt/library/include/hipblaslt/hipblaslt.h",
                HEADER,
            )
            .file("projects/hipblaslt/library/src/hipblaslt.cpp", SOURCE)
            .file("shared/origami/README.md", "shared code of the monorepo\n")
            .file("projects/rocblas/README.md", "not part of hipblaslt\n")
            .file("README.md", "rocm-libraries fixture\n");
        let base = up.commit("release 7.1.1");
        up.tag("rocm-7.1.1");
        let fixed = SOURCE.replace("return gfx >= 1200 ? 1 : 0;", FIXED);
        let fix = up
            .file("projects/hipblaslt/library/src/hipblaslt.cpp", &fixed)
            .commit("hipblaslt: disable expert scheduling on gfx12");
        up.branch("develop");
        up.git(&["checkout", "-q", "-b", "broken-configure", &base]);
        let bad_configure = up
            .file(
                "projects/hipblaslt/CMakeLists.txt",
                &CMAKE.replace(
                    "add_library(",
                    "message(FATAL_ERROR \"fixture: configure broken on purpose\")\nadd_library(",
                ),
            )
            .commit("break configure");
        up.git(&["checkout", "-q", "-b", "broken-build", &base]);
        let bad_build = up
            .file(
                "projects/hipblaslt/library/src/hipblaslt.cpp",
                &format!("{SOURCE}#error fixture: compile error on purpose\n"),
            )
            .commit("break the build");
        up.git(&["checkout", "-q", "main"]);
        Monorepo {
            up,
            base,
            fix,
            bad_configure,
            bad_build,
        }
    }

    /// A hipblaslt recipe on the release commit with upstream commit
    /// patches (sha256 left for `lock`).
    pub(crate) fn recipe(&self, patches: &[&str]) -> String {
        let mut text = format!(
            r#"[package]
name = "hipblaslt-fixture"
version = "7.1.1"
summary = "fixture hipBLASLt"
description = "A tiny library standing in for hipBLASLt."
license = "MIT"
maintainer = "Test <test@example.invalid>"

[source]
git = "{url}"
commit = "{base}"
ref = "rocm-7.1.1"
paths = ["projects/hipblaslt", "shared"]

[target]
kind = "hipblaslt"
formats = ["deb", "rpm", "arch"]
"#,
            url = self.up.url(),
            base = self.base
        );
        for (i, commit) in patches.iter().enumerate() {
            text.push_str(&format!(
                "\n[[patch]]\nname = \"{:04}-upstream.patch\"\ngit = \"{}\"\ncommit = \"{commit}\"\n",
                i + 1,
                self.up.url()
            ));
        }
        text
    }

    /// Writes the recipe into `p` and pins its patches with `cargo xtask lock`.
    pub(crate) fn locked_recipe(&self, p: &Project, name: &str, patches: &[&str]) {
        p.recipe(name, &self.recipe(patches));
        run(p, &["lock", name], &[]).success();
    }
}

/// A fake ROCm prefix: `.info/version`, `lib/cmake/hip/` and a `bin/hipcc`
/// that hands everything to the system's `c++`.
pub(crate) fn fake_rocm(dir: &Path, version: &str) -> PathBuf {
    let rocm = dir.join("rocm");
    std::fs::create_dir_all(rocm.join("bin")).unwrap();
    std::fs::create_dir_all(rocm.join("lib/cmake/hip")).unwrap();
    std::fs::create_dir_all(rocm.join(".info")).unwrap();
    std::fs::write(rocm.join(".info/version"), format!("{version}\n")).unwrap();
    std::fs::write(
        rocm.join("lib/cmake/hip/hip-config.cmake"),
        "# fake HIP package\n",
    )
    .unwrap();
    let hipcc = rocm.join("bin/hipcc");
    std::fs::write(&hipcc, "#!/bin/sh\nexec c++ \"$@\"\n").unwrap();
    std::fs::set_permissions(&hipcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    rocm
}

/// `cargo xtask` in `p` with a fixed `SOURCE_DATE_EPOCH` and no `ROCM_PATH`
/// from the caller's environment (a missing one points at a folder that
/// does not exist, so that a machine's /opt/rocm is never picked up).
pub(crate) fn run(p: &Project, args: &[&str], env: &[(&str, &str)]) -> Run {
    let nowhere = p.root().join("no-rocm");
    let nowhere = nowhere.to_str().unwrap();
    let mut all = vec![("SOURCE_DATE_EPOCH", EPOCH), ("ROCM_PATH", nowhere)];
    all.extend_from_slice(env);
    p.xtask_with(args, &all)
}

/// Whether the tools a real build needs are here (skips elsewhere, fails in CI).
pub(crate) fn have_build_tools() -> bool {
    crate::support::have_tool("cmake") && crate::support::have_tool("c++")
}

/// The names of the entries of a `.tar.gz`.
pub(crate) fn tar_names(path: &Path) -> Vec<String> {
    let file = std::fs::File::open(path).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect()
}

/// The text of one entry of a `.tar.gz`.
pub(crate) fn tar_text(path: &Path, name: &str) -> String {
    let file = std::fs::File::open(path).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().display().to_string() == name {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            return text;
        }
    }
    panic!("{name} is not in {}", path.display())
}
