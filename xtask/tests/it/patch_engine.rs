//! The patch engine through the library: every patch format against a real
//! git-made tree, the failure that names patch, hunk and line, every path
//! trick refused, and the three verdicts of `check`.

use std::path::Path;

use xtask::apply::patch::apply::{check, series};
use xtask::apply::patch::tree::Tree;
use xtask::apply::patch::{PatchInput, PatchState, Tolerance};

use crate::support::patch as ps;

#[test]
fn patch_format_patch_series_gives_the_committed_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, tree) = ps::series_at_base(tmp.path());
    let records = series(
        &mut Tree::writing(&tree),
        &ps::inputs(&s.patches),
        Tolerance::strict(),
    )
    .unwrap();
    let expected = tmp.path().join("expected");
    s.repo.checkout("work", &expected);
    assert_eq!(ps::snapshot(&tree), ps::snapshot(&expected));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(tree.join("drivers/amd/tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "the mode change applied");
    let third: Vec<_> = records[2]
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.before.is_some(), f.after.is_some()))
        .collect();
    assert!(
        third.contains(&("drivers/amd/gone.c", true, false)),
        "{third:?}"
    );
    assert!(
        third.contains(&("drivers/amd/renamed.c", false, true)),
        "{third:?}"
    );
    assert!(
        third.contains(&("drivers/amd/c.c", true, false)),
        "{third:?}"
    );
}

#[test]
fn patch_plain_unified_diffs_from_diff_urn_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (tmp.path().join("a"), tmp.path().join("b"));
    ps::write_tree(&old, &ps::upstream_files());
    ps::write_tree(&new, &ps::upstream_files());
    std::fs::write(
        new.join("drivers/amd/a.c"),
        ps::replace_line(&ps::c_file("a", 30), 5, "int five;"),
    )
    .unwrap();
    std::fs::write(new.join("drivers/amd/added.c"), "int added;\n").unwrap();
    std::fs::remove_file(new.join("docs/README")).unwrap();
    let out = std::process::Command::new("diff")
        .args(["-urN", "a", "b"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "diff found differences");
    let tree = tmp.path().join("tree");
    ps::write_tree(&tree, &ps::upstream_files());
    let patch = vec![PatchInput::new("quilt.patch", out.stdout)];
    series(&mut Tree::writing(&tree), &patch, Tolerance::strict()).unwrap();
    assert_eq!(ps::snapshot(&tree), ps::snapshot(&new));
}

#[test]
fn patch_failure_names_patch_file_hunk_line_and_blob() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, tree) = ps::series_at_base(tmp.path());
    // Line 7 is the first context line of 0001's only hunk: changed, the
    // context matches nowhere, and fuzz 1 would ignore it.
    let a = ps::replace_line(&ps::c_file("a", 30), 7, "int a_value_6 = 60;");
    std::fs::write(tree.join("drivers/amd/a.c"), &a).unwrap();
    let err = ps::strict_refusal(&mut Tree::dry(&tree), &ps::inputs(&s.patches[..1]));
    for needle in [
        "0001-a.patch",
        "drivers/amd/a.c",
        "hunk #1",
        "line 7",
        "int a_value_6 = 6;",
        "written for another version of amd/a.c",
        "--fuzz 1",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from: {err}");
    }
}

fn one_file_patch(path: &str) -> PatchInput {
    let text = format!("--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+owned\n");
    PatchInput::new("evil.patch", text.into_bytes())
}

#[test]
fn patch_refuses_absolute_and_parent_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let git_abs = "diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ /etc/patchkit-owned\n@@ -0,0 +1 @@\n+owned\n";
    let cases = [
        (one_file_patch("../outside.txt"), "`..`"),
        (one_file_patch("sub/../../outside.txt"), "`..`"),
        (
            PatchInput::new("abs.patch", git_abs.as_bytes().to_vec()),
            "absolute",
        ),
        (one_file_patch(".patchkit/state.json"), ".patchkit"),
    ];
    for (patch, why) in cases {
        let err = series(&mut Tree::writing(&tree), &[patch], Tolerance::strict()).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains(why) && text.contains("refused") || text.contains("absolute"),
            "{text}"
        );
    }
    assert!(!tmp.path().join("outside.txt").exists());
    assert!(!Path::new("/etc/patchkit-owned").exists());
    assert!(ps::entries(&tree).is_empty());
}

#[test]
fn patch_refuses_writing_through_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("f.c"), "int x;\n").unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("f.c"), tree.join("file-link.c")).unwrap();
    let modify = |p: &str| {
        PatchInput::new(
            "m.patch",
            format!("--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-int x;\n+int y;\n").into_bytes(),
        )
    };
    for patch in [
        one_file_patch("link/new.c"),
        modify("link/f.c"),
        modify("file-link.c"),
    ] {
        let err = series(&mut Tree::writing(&tree), &[patch], Tolerance::strict()).unwrap_err();
        assert!(format!("{err:#}").contains("symlink"), "{err:#}");
    }
    assert_eq!(ps::entries(&outside), vec!["f.c"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("f.c")).unwrap(),
        "int x;\n"
    );
}

#[test]
fn patch_check_gives_the_three_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, tree) = ps::series_at_base(tmp.path());
    // The tree carries 0001 already and b.c moved under 0002.
    series(
        &mut Tree::writing(&tree),
        &ps::inputs(&s.patches[..1]),
        Tolerance::strict(),
    )
    .unwrap();
    let b = ps::replace_line(
        &ps::c_file("b", 30),
        19,
        "int b_value_19 = -19; /* upstream */",
    );
    std::fs::write(tree.join("drivers/amd/b.c"), b).unwrap();
    let before = ps::snapshot(&tree);
    let checks = check(&tree, &ps::inputs(&s.patches), Tolerance::strict()).unwrap();
    let verdicts: Vec<PatchState> = checks.iter().map(|c| c.verdict).collect();
    assert_eq!(
        verdicts,
        [
            PatchState::Applied,
            PatchState::Conflicts,
            PatchState::NotApplied
        ]
    );
    let failure = &checks[1].failures[0];
    assert_eq!(failure.file, "drivers/amd/b.c");
    assert_eq!(failure.hunks[0].hunk, 1);
    assert_eq!(ps::snapshot(&tree), before, "a check writes nothing");
}
