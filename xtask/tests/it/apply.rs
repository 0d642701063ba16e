//! Extraction and atomic apply through the library: archives (tar.gz,
//! tar.xz, tar.zst, plain tar), git commits and folders, every hostile
//! entry refused, a failed series leaving the target untouched, and the
//! same series giving the same record twice.

use std::path::{Path, PathBuf};

use xtask::apply::extract::{self, Limits, Selection};
use xtask::fetch::FetchedSource;
use xtask::input::recipe::Recipe;
use xtask::shared::report::Reporter;

use crate::support::patch::{self as ps, TarEntry as E};
use crate::support::upstream::Upstream;
use crate::support::Project;

/// A project with a recipe whose source is an archive with `strip = 1` and
/// `include = ["drivers/amd"]`, and the fixture series' patches.
fn recipe(project: &Project) -> Recipe {
    project.recipe(
        "amd-test",
        &ps::recipe_text(
            "amd-test",
            "1.2.3",
            "[source]\nlocal = \"upstream.tar.gz\"\nstrip = 1\ninclude = [\"drivers/amd\"]\n",
        ),
    );
    Recipe::load(project.root(), "amd-test").unwrap()
}

/// The fixture upstream as `linux-x/…` in an archive at `path`.
fn upstream_archive(repo: &Upstream, commit: &str, path: &Path) {
    let tar = repo.git_bytes(&["archive", "--format=tar", "--prefix=linux-x/", commit]);
    ps::write_compressed(path, tar);
}

fn archive_source(path: &Path) -> FetchedSource {
    FetchedSource::Archive {
        path: path.to_path_buf(),
        sha256: xtask::shared::hash::sha256_hex(&std::fs::read(path).unwrap()),
    }
}

/// The head of a state record of this tool (of any format): what makes a
/// folder a tree apply may replace.
const OURS: &str = r#"{"format": 1, "tool": {"name": "rocm-patchkit", "version": "0.0.1"}}"#;

#[test]
fn apply_archive_gives_a_tree_with_a_reproducible_record() {
    let project = Project::new();
    let recipe = recipe(&project);
    let s = ps::series(project.root());
    let patches = ps::fetched_patches(&project.root().join("p"), &s.patches);
    for ext in ["tar.xz", "tar.zst", "tar"] {
        let archive = project.root().join(format!("upstream.{ext}"));
        upstream_archive(&s.repo, &s.base, &archive);
        let fetched = ps::fetched(archive_source(&archive), patches.clone());
        let (one, two) = (
            project.root().join(format!("one-{ext}")),
            project.root().join(format!("two-{ext}")),
        );
        let report = ps::apply_strict(&recipe, &fetched, &one).unwrap();
        ps::apply_strict(&recipe, &fetched, &two).unwrap();
        assert_eq!(report.state.patches().len(), 3);
        assert_eq!(
            ps::entries(&one),
            vec![".patchkit", "drivers"],
            "only `include` was extracted"
        );
        for file in ["state.json", "manifest"] {
            let a = std::fs::read(one.join(".patchkit").join(file)).unwrap();
            let b = std::fs::read(two.join(".patchkit").join(file)).unwrap();
            assert_eq!(a, b, "{file} differs between two applies ({ext})");
        }
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(one.join(".patchkit/state.json")).unwrap())
                .unwrap();
        assert_eq!(state["recipe"]["version"], "1.2.3");
        assert_eq!(state["source"]["kind"], "archive");
        assert_eq!(state["tool"]["name"], "rocm-patchkit");
        assert_eq!(state["patches"][0]["name"], "0001-a.patch");
        assert_eq!(state["patches"][0]["files"][0]["path"], "drivers/amd/a.c");
        assert!(std::fs::read_to_string(one.join("drivers/amd/renamed.c")).is_ok());
    }
}

#[test]
fn apply_failed_series_leaves_the_target_untouched() {
    let project = Project::new();
    let recipe = recipe(&project);
    let s = ps::series(project.root());
    let archive = project.root().join("upstream.tar.gz");
    upstream_archive(&s.repo, &s.base, &archive);
    let mut broken = s.patches.clone();
    broken[1].1 = String::from_utf8(broken[1].1.clone())
        .unwrap()
        .replace(" int b_value_18 = 18;", " int b_value_18 = 99;")
        .into_bytes();
    let fetched = ps::fetched(
        archive_source(&archive),
        ps::fetched_patches(&project.root().join("p"), &broken),
    );
    let work = project.root().join("work");
    let dest = work.join("tree");
    // A previous tree of ours (it has a state record): the one thing apply replaces.
    std::fs::create_dir_all(dest.join(".patchkit")).unwrap();
    std::fs::write(dest.join(".patchkit/state.json"), OURS).unwrap();
    std::fs::write(dest.join("keep.txt"), "the previous tree\n").unwrap();
    let err = ps::apply_strict(&recipe, &fetched, &dest)
        .unwrap_err()
        .to_string();
    for needle in [
        "0002-b.patch",
        "drivers/amd/b.c",
        "hunk #1",
        "int b_value_18 = 99;",
        "cargo xtask drift amd-test",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from: {err}");
    }
    assert_eq!(
        ps::entries(&work),
        vec!["tree"],
        "no staging folder is left"
    );
    assert_eq!(ps::entries(&dest), vec![".patchkit", "keep.txt"]);
    let fresh = work.join("fresh");
    ps::apply_strict(&recipe, &fetched, &fresh).unwrap_err();
    assert!(!fresh.exists());
}

#[test]
fn apply_replaces_an_existing_tree_only_on_success() {
    let project = Project::new();
    let recipe = recipe(&project);
    let s = ps::series(project.root());
    let archive = project.root().join("upstream.tar.gz");
    upstream_archive(&s.repo, &s.base, &archive);
    let fetched = ps::fetched(
        archive_source(&archive),
        ps::fetched_patches(&project.root().join("p"), &s.patches),
    );
    let dest = project.root().join("work/tree");
    std::fs::create_dir_all(dest.join(".patchkit")).unwrap();
    std::fs::write(dest.join(".patchkit/state.json"), OURS).unwrap();
    std::fs::write(dest.join("old.txt"), "x").unwrap();
    ps::apply_strict(&recipe, &fetched, &dest).unwrap();
    assert_eq!(ps::entries(&dest), vec![".patchkit", "drivers"]);
    assert_eq!(ps::entries(&project.root().join("work")), vec!["tree"]);
}

fn try_tar(
    entries: &[E],
) -> (
    anyhow::Result<xtask::apply::state::TreeListing>,
    tempfile::TempDir,
) {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("evil.tar.gz");
    ps::tar(&archive, entries);
    let dest = tmp.path().join("dest");
    std::fs::create_dir_all(&dest).unwrap();
    let result = extract::archive(
        &archive,
        &Selection::default(),
        &dest,
        Limits::DEFAULT,
        &Reporter::quiet(),
    );
    (result, tmp)
}

#[test]
fn apply_extraction_refuses_every_archive_trick() {
    let cases: Vec<(Vec<E>, &str)> = vec![
        (vec![E::File("/tmp/patchkit-abs-owned", "x")], "absolute"),
        (vec![E::File("a/../../patchkit-owned", "x")], "`..`"),
        (vec![E::Fifo("a/fifo")], "fifo"),
        (vec![E::CharDevice("a/null")], "device"),
        (vec![E::Symlink("a/link", "/etc")], "outside the tree"),
        (vec![E::Symlink("a/link", "../../x")], "outside the tree"),
        (vec![E::Hardlink("a/hard", "/etc/passwd")], "absolute"),
        (
            vec![E::Hardlink("a/hard", "a/missing")],
            "not a file of the extracted tree",
        ),
        (
            vec![
                E::Symlink("a/link", "b"),
                E::Dir("a/b"),
                E::File("a/link/x", "x"),
            ],
            "through the symlink",
        ),
    ];
    for (entries, why) in cases {
        let (result, tmp) = try_tar(&entries);
        let err = format!("{:#}", result.expect_err(why));
        assert!(err.contains(why), "{why:?} missing from: {err}");
        assert!(err.contains("refused"), "{err}");
        assert!(!tmp.path().join("patchkit-owned").exists());
    }
    assert!(!Path::new("/tmp/patchkit-abs-owned").exists());
    let (ok, _tmp) = try_tar(&[
        E::File("a/f", "x"),
        E::Symlink("a/l", "f"),
        E::Hardlink("a/h", "a/f"),
    ]);
    assert_eq!(ok.unwrap().len(), 3, "links inside the tree are kept");
}

#[test]
fn apply_extraction_of_a_git_commit_is_limited_and_confined() {
    let tmp = tempfile::tempdir().unwrap();
    let s = ps::series(tmp.path());
    let repo = &s.repo;
    let dest = tmp.path().join("dest");
    std::fs::create_dir_all(&dest).unwrap();
    let paths = vec!["drivers/amd".to_owned()];
    let m = extract::git(
        &repo.path(),
        &s.base,
        &paths,
        &dest,
        Limits::DEFAULT,
        &Reporter::quiet(),
    )
    .unwrap();
    assert!(m.contains_key("drivers/amd/a.c") && !m.contains_key("docs/README"));
    assert_eq!(m["drivers/amd/tool.sh"].mode, 0o100755);

    repo.git(&["checkout", "-q", "-b", "evil", &s.base]);
    std::os::unix::fs::symlink("/etc", repo.path().join("drivers/amd/escape")).unwrap();
    let evil = repo.commit("a symlink out of the tree");
    let dest2 = tmp.path().join("dest2");
    std::fs::create_dir_all(&dest2).unwrap();
    let err = extract::git(
        &repo.path(),
        &evil,
        &paths,
        &dest2,
        Limits::DEFAULT,
        &Reporter::quiet(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("outside the tree"), "{err:#}");

    // A tree object naming `..`, which only a hostile repository holds.
    let blob = repo.git(&["hash-object", "-w", "--stdin"]);
    let dotdot = raw_tree(repo, &[("100644", "..", &blob)]);
    let top = raw_tree(repo, &[("40000", "sub", &dotdot)]);
    let commit = repo.git(&["commit-tree", &top, "-m", "hostile"]);
    let dest3 = tmp.path().join("dest3");
    std::fs::create_dir_all(&dest3).unwrap();
    let err = extract::git(
        &repo.path(),
        &commit,
        &[],
        &dest3,
        Limits::DEFAULT,
        &Reporter::quiet(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("refused"), "{err:#}");
}

/// Writes a tree object with raw entries (no name checks) and returns its id.
fn raw_tree(repo: &Upstream, entries: &[(&str, &str, &str)]) -> String {
    let mut body = Vec::new();
    for (mode, name, id) in entries {
        body.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        body.extend_from_slice(&hex::decode(id).unwrap());
    }
    let file = repo.path().join("raw-tree");
    std::fs::write(&file, body).unwrap();
    let id = repo.git(&["hash-object", "-t", "tree", "-w", "--literally", "raw-tree"]);
    std::fs::remove_file(file).unwrap();
    id
}

#[test]
fn apply_extraction_of_a_folder_refuses_fifos_and_outward_links() {
    let tmp = tempfile::tempdir().unwrap();
    let src: PathBuf = tmp.path().join("src");
    ps::write_tree(&src, &ps::upstream_files());
    let copy = |name: &str| {
        let dest = tmp.path().join(name);
        std::fs::create_dir_all(&dest).unwrap();
        extract::dir(&src, &Selection::default(), &dest, Limits::DEFAULT)
    };
    assert_eq!(copy("ok").unwrap().len(), ps::upstream_files().len());
    std::os::unix::fs::symlink("../../outside", src.join("docs/escape")).unwrap();
    assert!(format!("{:#}", copy("bad1").unwrap_err()).contains("outside the tree"));
    std::fs::remove_file(src.join("docs/escape")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(src.join("docs/fifo"))
        .status()
        .unwrap();
    assert!(status.success());
    assert!(format!("{:#}", copy("bad2").unwrap_err()).contains("fifo"));
}
