//! Where hunks land, on small git-made trees: exact context at another line
//! is taken and recorded, a context matching at two places is refused with
//! both lines named, fuzz only when asked, and the git blob ids of a patch's
//! `index` lines explain a file the patch was not written for or already has.

use xtask::apply::patch::apply::{check, series, PatchState};
use xtask::apply::patch::tree::Tree;
use xtask::apply::patch::{PatchInput, Tolerance};

use crate::support::patch as ps;

/// 0001 of the fixture series, as the engine takes it.
fn first_patch(s: &ps::Series) -> Vec<PatchInput> {
    ps::inputs(&s.patches[..1])
}

#[test]
fn patch_placement_exact_context_at_an_offset_is_taken_and_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, tree) = ps::series_at_base(tmp.path());
    let a = format!("/* one */\n/* two */\n{}", ps::c_file("a", 30));
    std::fs::write(tree.join("drivers/amd/a.c"), &a).unwrap();
    let records = series(
        &mut Tree::writing(&tree),
        &first_patch(&s),
        Tolerance::strict(),
    )
    .unwrap();
    let h = &records[0].hunks;
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!((h[0].hunk, h[0].line, h[0].offset, h[0].fuzz), (1, 9, 2, 0));
    let text = std::fs::read_to_string(tree.join("drivers/amd/a.c")).unwrap();
    assert_eq!(
        text.lines().nth(11),
        Some("int a_value_10 = 1000; /* fixed */")
    );
    // git apply takes the same place: the same bytes from the same tree.
    let by_git = tmp.path().join("by-git");
    std::fs::create_dir_all(by_git.join("drivers/amd")).unwrap();
    std::fs::write(by_git.join("drivers/amd/a.c"), &a).unwrap();
    std::fs::write(tmp.path().join("0001.patch"), &s.patches[0].1).unwrap();
    crate::support::tools::stdout(
        std::process::Command::new("git")
            .args(["apply", "--include=drivers/amd/a.c", "../0001.patch"])
            .current_dir(&by_git),
    );
    assert_eq!(
        std::fs::read_to_string(by_git.join("drivers/amd/a.c")).unwrap(),
        text
    );
}

#[test]
fn patch_placement_context_matching_twice_is_refused_naming_both_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, tree) = ps::series_at_base(tmp.path());
    // Lines 7-13 of a.c twice, below a header that moves both copies away
    // from the hunk's stated line 7.
    let original = ps::c_file("a", 30);
    let block: String = original
        .lines()
        .skip(6)
        .take(7)
        .map(|l| format!("{l}\n"))
        .collect();
    let a = format!("/* header */\n{block}/* between */\n{block}");
    std::fs::write(tree.join("drivers/amd/a.c"), &a).unwrap();
    let before = ps::snapshot(&tree);
    let err = ps::strict_refusal(&mut Tree::writing(&tree), &first_patch(&s));
    for needle in [
        "0001-a.patch",
        "drivers/amd/a.c",
        "hunk #1",
        "line 2 and at line 10",
        "ambiguous",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from: {err}");
    }
    assert_eq!(ps::snapshot(&tree), before, "nothing written");
}

#[test]
fn patch_placement_fuzz_only_when_asked_and_recorded_hunk_by_hunk() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, tree) = ps::series_at_base(tmp.path());
    // The last context line of the hunk (line 13) differs, and three lines
    // above move the hunk: fuzz 1 at offset +3.
    let a = ps::replace_line(&ps::c_file("a", 30), 13, "int a_value_12 = 120;");
    let a = format!("/* 1 */\n/* 2 */\n/* 3 */\n{a}");
    std::fs::write(tree.join("drivers/amd/a.c"), &a).unwrap();
    let err = ps::strict_refusal(&mut Tree::dry(&tree), &first_patch(&s));
    assert!(
        err.contains("--fuzz 1") && err.contains("offset +3"),
        "{err}"
    );
    let records = series(
        &mut Tree::writing(&tree),
        &first_patch(&s),
        Tolerance::fuzz(1),
    )
    .unwrap();
    let h = &records[0].hunks[0];
    assert_eq!((h.offset, h.fuzz), (3, 1));
    // The recipe's per-patch setting does the same as the flag.
    s.repo.checkout(&s.base, &tree);
    std::fs::write(tree.join("drivers/amd/a.c"), &a).unwrap();
    let mut input = first_patch(&s);
    input[0].fuzz = 1;
    let records = series(&mut Tree::writing(&tree), &input, Tolerance::strict()).unwrap();
    assert_eq!(records[0].hunks[0].fuzz, 1);
}

#[test]
fn patch_placement_blob_ids_explain_another_version_and_an_applied_change() {
    let tmp = tempfile::tempdir().unwrap();
    let s = ps::series(tmp.path());
    let tree = tmp.path().join("tree");
    let blob = |rev: &str| {
        s.repo
            .git(&["rev-parse", &format!("{rev}:drivers/amd/a.c")])
    };
    let (pre, post) = (blob(&s.base), blob("work~2"));
    // The patch names the pre-image by git's abbreviation of its blob id.
    let patch_text = String::from_utf8_lossy(&s.patches[0].1).into_owned();
    let index = patch_text
        .lines()
        .find(|l| l.starts_with("index "))
        .unwrap();
    let abbrev = index["index ".len()..]
        .split("..")
        .next()
        .unwrap()
        .to_owned();
    assert!(pre.starts_with(&abbrev), "{index} names {pre}");

    // Another version of a.c: the hunk's lines are not there at all.
    s.repo.checkout(&s.base, &tree);
    let other = ps::c_file("a", 30).replace("int a_value_9 = 9;", "long a_value_9 = 9;");
    std::fs::write(tree.join("drivers/amd/a.c"), &other).unwrap();
    let found = xtask::apply::patch::apply::blob_id(other.as_bytes());
    let err = ps::strict_refusal(&mut Tree::dry(&tree), &first_patch(&s));
    let expected = format!(
        "written for another version of amd/a.c (expected blob {}…, the tree has {}…): \
         it needs a backport for this series, not an offset",
        abbrev,
        &found[..12]
    );
    assert!(err.contains(&expected), "{expected:?} missing from: {err}");

    // The post-image: the change is already there.
    s.repo.checkout("work~2", &tree);
    let err = ps::strict_refusal(&mut Tree::dry(&tree), &first_patch(&s));
    let expected = format!(
        "the change is already there: amd/a.c is the patch's post-image (blob {}…)",
        &post[..12]
    );
    assert!(err.contains(&expected), "{expected:?} missing from: {err}");
    let checks = check(&tree, &first_patch(&s), Tolerance::strict()).unwrap();
    assert_eq!(checks[0].verdict, PatchState::Applied);
}

#[test]
fn patch_placement_an_offset_is_reported_and_goes_into_the_build_manifest() {
    let p = crate::support::demo::demo_project();
    // Two lines on top of the demo module: both hunks of its patch land two
    // lines lower than they say.
    let c = p.root().join("examples/demo-hello/patchkit_hello.c");
    let text = std::fs::read_to_string(&c).unwrap();
    std::fs::write(&c, format!("/* one */\n/* two */\n{text}")).unwrap();
    crate::support::demo::build(&p, &["--formats", "tar"])
        .success()
        .stderr_has("hunk #1 at line 10 (offset +2)");
    let dist = crate::support::demo::dist(&p);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("manifest.json")).unwrap()).unwrap();
    let placement = &manifest["patches"][0]["placement"];
    let lines: Vec<(u64, u64, i64)> = placement
        .as_array()
        .unwrap_or_else(|| panic!("no placement in {manifest}"))
        .iter()
        .map(|h| {
            assert_eq!(h["file"], "patchkit_hello.c");
            assert_eq!(h["fuzz"], 0);
            (
                h["hunk"].as_u64().unwrap(),
                h["line"].as_u64().unwrap(),
                h["offset"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(lines, [(1, 10, 2), (2, 24, 2)]);
    p.xtask(&["verify", dist.to_str().unwrap()]).success();
}
