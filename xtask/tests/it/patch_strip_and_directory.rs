//! `strip` and `directory` of a `[[patch]]` entry: a rocm-libraries-style
//! monorepo commit (`projects/hipblaslt/...`) applied to a standalone
//! hipBLASLt tree, and a standalone patch applied under the monorepo's
//! folder; small trees written by the test, a real git upstream.

use crate::support::fetch::HEAD;
use crate::support::upstream::Upstream;
use crate::support::Project;

const CAPS: &str = "struct Caps {\n    bool HasSchedMode = true;\n};\n";
const FIXED: &str = "struct Caps {\n    bool HasSchedMode = false;\n};\n";

/// A monorepo with the fix as a commit; returns it and the commit id.
fn monorepo() -> (Upstream, String) {
    let up = Upstream::new();
    up.file("projects/hipblaslt/library/src/caps.hpp", CAPS)
        .file("projects/rocblas/README.md", "another project\n");
    up.commit("release");
    let fix = up
        .file("projects/hipblaslt/library/src/caps.hpp", FIXED)
        .commit("hipblaslt: disable expert scheduling on gfx12");
    (up, fix)
}

fn recipe(source: &str, patch: &str) -> String {
    format!("{HEAD}\n[source]\nlocal = \"{source}\"\n\n[[patch]]\n{patch}")
}

#[test]
fn a_monorepo_commit_applies_to_a_standalone_tree_with_strip() {
    let (up, fix) = monorepo();
    let p = Project::new();
    p.file("standalone/library/src/caps.hpp", CAPS);
    let entry = format!(
        "name = \"0001-fix.patch\"\ngit = \"{}\"\ncommit = \"{fix}\"\n",
        up.url()
    );

    // as written for the monorepo, the patch names files this tree lacks
    p.recipe("plain", &recipe("standalone", &entry));
    p.xtask(&["lock", "plain"]).success();
    p.xtask(&["apply", "plain", "--into", "out-plain"])
        .fails_with(1)
        .stderr_has("0001-fix.patch");
    assert!(!p.root().join("out-plain").exists(), "nothing half-applied");

    p.recipe(
        "stripped",
        &recipe("standalone", &format!("{entry}strip = 2\n")),
    );
    p.xtask(&["lock", "stripped"]).success();
    p.xtask(&["apply", "stripped", "--into", "out"]).success();
    let caps = std::fs::read_to_string(p.root().join("out/library/src/caps.hpp")).unwrap();
    assert_eq!(caps, FIXED);
    // drift places the patch the same way
    p.xtask(&["drift", "stripped", "--against", "standalone"])
        .success();
    p.xtask(&["drift", "plain", "--against", "standalone"])
        .fails_with(1);

    // dropping more folders than a path has is refused, naming the patch
    p.recipe(
        "deep",
        &recipe("standalone", &format!("{entry}strip = 5\n")),
    );
    p.xtask(&["lock", "deep"]).success();
    p.xtask(&["apply", "deep", "--into", "out-deep"])
        .fails_with(1)
        .stderr_has("patch 0001-fix.patch: `projects/hipblaslt/library/src/caps.hpp` has no more than 5 leading folders to drop");
}

#[test]
fn a_standalone_patch_applies_under_a_directory_of_the_monorepo() {
    let p = Project::new();
    p.file("mono/projects/hipblaslt/library/src/caps.hpp", CAPS)
        .file("mono/projects/rocblas/library/src/caps.hpp", CAPS)
        .file(
            "patches/under/0001-standalone.patch",
            "--- a/library/src/caps.hpp\n+++ b/library/src/caps.hpp\n@@ -1,3 +1,3 @@\n struct Caps {\n-    bool HasSchedMode = true;\n+    bool HasSchedMode = false;\n };\n",
        )
        .file("patches/under/series", "0001-standalone.patch\n");
    p.recipe(
        "under",
        &recipe(
            "mono",
            "file = \"0001-standalone.patch\"\ndirectory = \"projects/hipblaslt\"\n",
        ),
    );
    p.xtask(&["apply", "under", "--into", "out"]).success();
    let root = p.root().join("out/projects");
    assert_eq!(
        std::fs::read_to_string(root.join("hipblaslt/library/src/caps.hpp")).unwrap(),
        FIXED
    );
    assert_eq!(
        std::fs::read_to_string(root.join("rocblas/library/src/caps.hpp")).unwrap(),
        CAPS
    );
}

#[test]
fn bad_strip_and_directory_values_are_refused_with_their_place() {
    let p = Project::new();
    p.file("src/a.c", "int a;\n")
        .file(
            "patches/bad/0001-a.patch",
            "--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-int a;\n+int a = 1;\n",
        )
        .file("patches/bad/series", "0001-a.patch\n");
    p.recipe(
        "bad",
        &recipe(
            "src",
            "file = \"0001-a.patch\"\nstrip = -1\ndirectory = \"../outside\"\n",
        ),
    );
    p.xtask(&["plan", "bad"])
        .fails_with(2)
        .stderr_has("`patch[0].strip`: -1 is not a number of leading folders to drop")
        .stderr_has("`patch[0].directory`: `../outside` is not a folder inside the tree");
}
