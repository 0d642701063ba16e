//! `cargo xtask drift`: the series against newer upstreams given as a git
//! commit, an archive and a folder, with the three verdicts and exit status.

use crate::support::patch as ps;
use crate::support::patch::project_with_series;

#[test]
fn drift_against_git_archive_and_folder() {
    let (project, s) = project_with_series();
    let repo = &s.repo;
    let clean = project.xtask(&[
        "drift",
        "fix",
        "--against",
        &format!("git:{}#{}", repo.path().display(), s.base),
    ]);
    clean
        .success()
        .stdout_has("not applied  0001-a.patch")
        .stdout_has("not applied  0003-c.patch");

    // Upstream v2 merged 0001 and moved the code under 0002.
    let a = ps::replace_line(
        &ps::c_file("a", 30),
        10,
        "int a_value_10 = 1000; /* fixed */",
    );
    repo.file("drivers/amd/a.c", &a);
    repo.file(
        "drivers/amd/b.c",
        &ps::replace_line(&ps::c_file("b", 30), 19, "int moved;"),
    );
    let v2 = repo.commit("upstream v2");
    repo.git(&["tag", "v2"]);

    let spec = format!("{}@v2", repo.path().display());
    let run = project.xtask(&["drift", "fix", "--against", &spec]);
    run.fails_with(1)
        .stdout_has("applied      0001-a.patch")
        .stdout_has("conflicts    0002-b.patch")
        .stdout_has("drivers/amd/b.c: hunk #1")
        .stdout_has("not applied  0003-c.patch")
        .stderr_has("does not apply");

    let json = project.xtask(&[
        "drift",
        "fix",
        "--json",
        "--against",
        &format!("git:{}#{v2}", repo.path().display()),
    ]);
    let value: serde_json::Value = serde_json::from_str(&json.fails_with(1).stdout).unwrap();
    let verdicts: Vec<&str> = value["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["applied", "conflicts", "not-applied"]);

    let folder = project.root().join("v2");
    std::fs::create_dir_all(&folder).unwrap();
    repo.git(&[
        "--work-tree",
        folder.to_str().unwrap(),
        "checkout",
        "-q",
        "v2",
        "--",
        ".",
    ]);
    project
        .xtask(&["drift", "fix", "--against", folder.to_str().unwrap()])
        .fails_with(1)
        .stdout_has("conflicts    0002-b.patch");

    let archive = project.root().join("v2.tar");
    repo.archive("v2", None, &archive);
    project
        .xtask(&["drift", "fix", "--against", archive.to_str().unwrap()])
        .fails_with(1)
        .stdout_has("applied      0001-a.patch");

    project
        .xtask(&[
            "drift",
            "fix",
            "--against",
            "https://example.invalid/x.tar.xz",
        ])
        .fails_with(2)
        .stderr_has("local upstreams only");
}

#[test]
fn drift_and_verify_recipe_name_offsets_and_explain_by_blob_id() {
    let (project, s) = project_with_series();
    let repo = &s.repo;
    // Upstream v3: two lines on top of a.c (0001 lands two lines lower) and
    // a b.c that 0002 was not written for (its changed line is another).
    let a = format!("/* one */\n/* two */\n{}", ps::c_file("a", 30));
    repo.file("drivers/amd/a.c", &a);
    let b = ps::c_file("b", 30).replace("int b_value_19 = 19;", "long b_value_19 = 19;");
    repo.file("drivers/amd/b.c", &b);
    repo.commit("upstream v3");
    let found = xtask::apply::patch::apply::blob_id(b.as_bytes());
    let v3 = project.root().join("v3");
    std::fs::create_dir_all(&v3).unwrap();
    repo.git(&[
        "--work-tree",
        v3.to_str().unwrap(),
        "checkout",
        "-q",
        "HEAD",
        "--",
        ".",
    ]);
    let other_version = format!(
        "this patch was written for another version of amd/b.c (expected blob {}",
        &repo.git(&["rev-parse", &format!("{}:drivers/amd/b.c", s.base)])[..7]
    );
    let has_found = format!("the tree has {}…", &found[..12]);
    for args in [
        vec!["drift", "fix", "--against", v3.to_str().unwrap()],
        vec!["verify", v3.to_str().unwrap(), "--recipe", "fix"],
    ] {
        project
            .xtask(&args)
            .fails_with(1)
            .stdout_has("not applied  0001-a.patch")
            .stdout_has("drivers/amd/a.c: hunk #1 lands at line 9 (offset +2)")
            .stdout_has("conflicts    0002-b.patch")
            .stdout_has(&other_version)
            .stdout_has(&has_found)
            .stdout_has("needs a backport for this series, not an offset");
    }
}
