//! `cargo xtask verify`: a tree against its record (applied, not applied,
//! changed after apply, extra changes; `--json`), and a tree without a
//! record against a recipe's series.

use std::path::PathBuf;

use xtask::fetch::FetchedSource;
use xtask::input::recipe::Recipe;

use crate::support::patch as ps;
use crate::support::Project;

/// The series applied through the library into `<root>/tree`.
fn applied_tree(project: &Project, s: &ps::Series) -> PathBuf {
    let recipe = Recipe::load(project.root(), "fix").unwrap();
    let src = project.root().join("pristine");
    std::fs::create_dir_all(&src).unwrap();
    s.repo.checkout(&s.base, &src);
    let fetched = ps::fetched(
        FetchedSource::Dir { path: src },
        ps::fetched_patches(&project.root().join("p"), &s.patches),
    );
    let dest = project.root().join("tree");
    ps::apply_strict(&recipe, &fetched, &dest).unwrap();
    dest
}

#[test]
fn verify_a_tree_exactly_as_recorded() {
    let (project, s) = ps::project_with_series();
    let tree = applied_tree(&project, &s);
    let run = project.xtask(&["verify", tree.to_str().unwrap()]);
    run.success()
        .stdout_has("applied              0001-a.patch")
        .stdout_has("ok: the tree is exactly as recorded");
    let json: serde_json::Value = serde_json::from_str(
        &project
            .xtask(&["verify", "--json", tree.to_str().unwrap()])
            .success()
            .stdout,
    )
    .unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["patches"][2]["status"], "applied");
}

#[test]
fn verify_reports_changed_not_applied_and_extra_changes() {
    let (project, s) = ps::project_with_series();
    let tree = applied_tree(&project, &s);
    let amd = tree.join("drivers/amd");
    std::fs::write(amd.join("a.c"), "edited by hand\n").unwrap();
    std::fs::write(amd.join("b.c"), ps::c_file("b", 30)).unwrap();
    std::fs::remove_file(amd.join("new.c")).unwrap();
    std::fs::write(tree.join("docs/README"), "edited\n").unwrap();
    std::fs::write(tree.join("docs/stray.txt"), "added\n").unwrap();
    let run = project.xtask(&["verify", "--json", tree.to_str().unwrap()]);
    run.fails_with(1)
        .stderr_has("differs from its state record");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["patches"][0]["status"], "changed-after-apply");
    assert_eq!(json["patches"][0]["files"][0], "drivers/amd/a.c");
    assert_eq!(json["patches"][1]["status"], "not-applied");
    assert_eq!(json["patches"][2]["status"], "applied");
    let extra: Vec<(String, String)> = json["extra"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().into(),
                e["change"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        extra,
        [
            ("docs/README".into(), "modified".into()),
            ("docs/stray.txt".into(), "added".into())
        ]
    );
    let text = project.xtask(&["verify", tree.to_str().unwrap()]);
    text.fails_with(1)
        .stdout_has("changed after apply  0001-a.patch")
        .stdout_has("not applied          0002-b.patch");
}

#[test]
fn verify_a_tree_without_record_against_the_recipe() {
    let (project, s) = ps::project_with_series();
    let tree = project.root().join("kernel");
    std::fs::create_dir_all(&tree).unwrap();
    s.repo.git(&[
        "--work-tree",
        tree.to_str().unwrap(),
        "checkout",
        "-q",
        &s.base,
        "--",
        ".",
    ]);
    // The user's kernel carries 0001; its b.c moved under 0002.
    let a = ps::replace_line(
        &ps::c_file("a", 30),
        10,
        "int a_value_10 = 1000; /* fixed */",
    );
    std::fs::write(tree.join("drivers/amd/a.c"), a).unwrap();
    std::fs::write(
        tree.join("drivers/amd/b.c"),
        ps::replace_line(&ps::c_file("b", 30), 21, "int moved;"),
    )
    .unwrap();
    let run = project.xtask(&["verify", tree.to_str().unwrap(), "--recipe", "fix"]);
    run.fails_with(1)
        .stdout_has("applied      0001-a.patch")
        .stdout_has("conflicts    0002-b.patch")
        .stdout_has("hunk #1")
        .stdout_has("not applied  0003-c.patch")
        .stderr_has("1 patches of fix conflict");
    let plain = project.xtask(&["verify", tree.to_str().unwrap()]);
    plain.fails_with(1).stderr_has("--recipe");
}
