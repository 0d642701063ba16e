//! `cargo xtask fetch` against real git repositories (by path and through
//! `git daemon`) and a real HTTP server on 127.0.0.1; every failure is
//! checked for its message and for a cache that holds nothing unverified.

use crate::support::fetch::{assert_cache_clean, blobs, sha, tarball_recipe, HEAD};
use crate::support::http::{Reply, Server};
use crate::support::upstream::Upstream;
use crate::support::{Project, Run};

fn git_recipe(url: &str, commit: &str, reference: Option<&str>) -> String {
    let reference = reference
        .map(|r| format!("ref = \"{r}\"\n"))
        .unwrap_or_default();
    format!("{HEAD}\n[source]\ngit = \"{url}\"\ncommit = \"{commit}\"\n{reference}")
}

/// Two commits on main; returns the upstream and both ids.
fn two_commits() -> (Upstream, String, String) {
    let up = Upstream::new();
    let first = up.file("a.c", "int a;\n").commit("first");
    let second = up.file("a.c", "int a = 1;\n").commit("second");
    (up, first, second)
}

#[test]
fn git_source_by_path_then_cached() {
    let (up, first, _) = two_commits();
    let p = Project::new();
    p.recipe("r", &git_recipe(&up.url(), &first, None));
    // What a killed run leaves in tmp/ is cleaned by the next one.
    p.file("cache/tmp/download-killed", "partial");
    p.file("cache/tmp/clone-killed.git/HEAD", "ref: refs/heads/main\n");
    p.xtask(&["fetch", "r"])
        .success()
        .stderr_has(&format!("@ {first}: fetched"))
        .stderr_has("fetched r:");
    p.xtask(&["fetch", "r"])
        .success()
        .stderr_has(&format!("@ {first}: cached"));
    let file_url = Project::new();
    file_url.recipe("r", &git_recipe(&up.file_url(), &first, None));
    file_url.xtask(&["fetch", "r"]).success();
    assert_cache_clean(&p.cache());
}

/// `fetch` of the first of [`two_commits`] from `git daemon`, which lets
/// clients want any reachable commit or not; it must succeed.
fn fetch_from_daemon(allow_sha1_in_want: bool) -> (Project, Run) {
    let (up, first, _) = two_commits();
    up.allow_sha1_in_want(allow_sha1_in_want);
    let daemon = up.daemon();
    let p = Project::new();
    p.recipe("r", &git_recipe(&daemon.url(), &first, None));
    let run = p.xtask(&["fetch", "r"]);
    run.success().stderr_has(&format!("@ {first}: fetched"));
    (p, run)
}

#[test]
fn git_daemon_shallow_fetch_of_the_pin() {
    let (p, run) = fetch_from_daemon(true);
    assert!(
        !run.stderr.contains("fetching every branch"),
        "{}",
        run.stderr
    );
    let mirror = std::fs::read_dir(p.cache().join("git"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert!(
        mirror.path().join("shallow").is_file(),
        "the mirror is not shallow"
    );
    assert_cache_clean(&p.cache());
}

#[test]
fn git_daemon_without_sha1_in_want_falls_back_to_a_full_fetch() {
    let (p, run) = fetch_from_daemon(false);
    run.stderr_has("fetching every branch and tag");
    assert_cache_clean(&p.cache());
}

#[test]
fn git_commit_missing_upstream_is_an_error() {
    let (up, _, _) = two_commits();
    let p = Project::new();
    let bogus = "0123456789abcdef0123456789abcdef01234567";
    p.recipe("r", &git_recipe(&up.url(), bogus, None));
    p.xtask(&["fetch", "r"])
        .fails_with(1)
        .stderr_has(&format!("commit {bogus} is not in {}", up.url()));
    assert_no_mirror(&p);
}

/// A failed git fetch leaves no mirror behind and the cache clean.
#[track_caller]
fn assert_no_mirror(p: &Project) {
    assert!(std::fs::read_dir(p.cache().join("git"))
        .unwrap()
        .next()
        .is_none());
    assert_cache_clean(&p.cache());
}

#[test]
fn git_daemon_unreachable_is_an_error() {
    let port = crate::support::free_port();
    let url = format!("git://127.0.0.1:{port}/up");
    let p = Project::new();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    p.recipe("r", &git_recipe(&url, commit, None));
    p.xtask(&["fetch", "r"]).fails_with(1).stderr_has(&format!(
        "cannot fetch commit {commit} from {url}: check the URL"
    ));
    assert_no_mirror(&p);
}

#[test]
fn ref_moved_away_from_the_pin_warns_and_uses_the_pin() {
    let (up, first, _) = two_commits();
    let third = up.file("b.c", "int b;\n").commit("third");
    let p = Project::new();
    p.recipe("r", &git_recipe(&up.url(), &first, Some("main")));
    p.xtask(&["fetch", "r"])
        .success()
        .stderr_has(&format!(
            "now points at {third}, not at the pinned commit {first}"
        ))
        .stderr_has(&format!("@ {first}: fetched"));
}

fn git_patch_recipe(up: &Upstream, commit: &str, sha256: Option<&str>) -> String {
    let sha = sha256
        .map(|s| format!("sha256 = \"{s}\"\n"))
        .unwrap_or_default();
    format!(
        "{HEAD}\n[source]\nlocal = \"src\"\n\n[[patch]]\nname = \"0001-second.patch\"\ngit = \"{}\"\ncommit = \"{commit}\"\n{sha}",
        up.url()
    )
}

#[test]
fn git_commit_patch_is_a_deterministic_normalised_diff() {
    let (up, _, second) = two_commits();
    let p = Project::new();
    p.file("src/a.c", "int a;\n");
    p.recipe("r", &git_patch_recipe(&up, &second, None));
    p.xtask(&["fetch", "r", "--allow-unpinned"])
        .success()
        .stderr_has("patch 0001-second.patch is unpinned");
    let taken = std::fs::read_to_string(p.cache().join("taken-pins/r.toml")).unwrap();
    let pin = taken.split("diff_sha256 = \"").nth(1).unwrap()[..64].to_owned();
    // What is cached is the normalised diff: file headers and hunks only.
    let text = std::fs::read_to_string(p.cache().join("sha256").join(&pin)).unwrap();
    assert_eq!(
        text,
        "diff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1,1 +1,1 @@\n-int a;\n+int a = 1;\n"
    );

    // The same commit in a fresh cache gives the same diff: the pin holds.
    let again = Project::new();
    again.file("src/a.c", "int a;\n");
    let recipe = git_patch_recipe(&up, &second, None) + &format!("diff_sha256 = \"{pin}\"\n");
    again.recipe("r", &recipe);
    again
        .xtask(&["fetch", "r"])
        .success()
        .stderr_has("diff made by git, normalised, verified");
    assert!(again.cache().join("sha256").join(&pin).is_file());
    assert_cache_clean(&again.cache());
}

#[test]
fn git_commit_patch_mismatch_caches_nothing() {
    let (up, _, second) = two_commits();
    let p = Project::new();
    p.file("src/a.c", "int a;\n");
    let wrong = "ab".repeat(32);
    p.recipe("r", &git_patch_recipe(&up, &second, Some(&wrong)));
    let run = p.xtask(&["fetch", "r"]);
    run.fails_with(1)
        .stderr_has(&format!("git {} commit {second}", up.url()))
        .stderr_has(&format!("expected {wrong}, got "));
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
}

/// A recipe with four network inputs: a tarball, two url patches and an
/// upstream commit patch.
fn four_inputs(server: &Server, up: &Upstream, commit: &str) -> (String, Vec<Vec<u8>>) {
    let bodies: Vec<Vec<u8>> = ["tar", "one", "two"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    server
        .route("/s.tar", Reply::Bytes(bodies[0].clone()))
        .route("/1.patch", Reply::Bytes(bodies[1].clone()))
        .route("/2.patch", Reply::Bytes(bodies[2].clone()));
    let recipe = format!(
        "{}\n[[patch]]\nname = \"0001-one.patch\"\nurl = \"{}\"\nsha256 = \"{}\"\n\n[[patch]]\nname = \"0002-two.patch\"\nurl = \"{}\"\nsha256 = \"{}\"\n\n[[patch]]\nname = \"0003-up.patch\"\ngit = \"{}\"\ncommit = \"{commit}\"\n",
        tarball_recipe(&server.url("/s.tar"), &sha(&bodies[0])),
        server.url("/1.patch"),
        sha(&bodies[1]),
        server.url("/2.patch"),
        sha(&bodies[2]),
        up.url()
    );
    (recipe, bodies)
}

#[test]
fn offline_with_an_empty_cache_lists_every_missing_input() {
    let server = Server::start();
    let (up, _, second) = two_commits();
    let (recipe, _) = four_inputs(&server, &up, &second);
    let p = Project::new();
    p.recipe("r", &recipe);
    let run = p.xtask(&["fetch", "r", "--offline", "--allow-unpinned"]);
    run.fails_with(1)
        .stderr_has("--offline: 4 input(s) of `r` are not in the cache")
        .stderr_has(&format!("source: {}", server.url("/s.tar")))
        .stderr_has(&format!("patch 0001-one.patch: {}", server.url("/1.patch")))
        .stderr_has(&format!("patch 0002-two.patch: {}", server.url("/2.patch")))
        .stderr_has(&format!(
            "patch 0003-up.patch: git {} commit {second}",
            up.url()
        ));
    assert_eq!(server.total_hits(), 0);
    assert_cache_clean(&p.cache());
}

#[test]
fn offline_after_a_fetch_succeeds_without_requests() {
    let server = Server::start();
    let (up, _, second) = two_commits();
    let (recipe, _) = four_inputs(&server, &up, &second);
    let p = Project::new();
    p.recipe("r", &recipe);
    p.xtask(&["fetch", "r", "--allow-unpinned"]).success();
    let hits = server.total_hits();
    assert_eq!(hits, 3);
    p.xtask(&["fetch", "r", "--offline", "--allow-unpinned"])
        .success()
        .stderr_has("4 cached");
    assert_eq!(server.total_hits(), hits);
    assert_cache_clean(&p.cache());
}

#[test]
fn unpinned_inputs_are_refused_unless_allowed_and_then_recorded() {
    let server = Server::start();
    server.route("/u.patch", Reply::Bytes(b"unpinned".to_vec()));
    let (up, _, second) = two_commits();
    let p = Project::new();
    p.recipe(
        "r",
        &format!(
            "{HEAD}\n[source]\ngit = \"{}\"\nref = \"main\"\n\n[[patch]]\nname = \"0001-u.patch\"\nurl = \"{}\"\n",
            up.url(),
            server.url("/u.patch")
        ),
    );
    p.xtask(&["fetch", "r"])
        .fails_with(1)
        .stderr_has(&format!("source (git {} has no `commit`)", up.url()))
        .stderr_has("patch 0001-u.patch (url")
        .stderr_has("run `cargo xtask lock r`")
        .stderr_has("--allow-unpinned");
    assert_eq!(server.total_hits(), 0);
    p.xtask(&["fetch", "r", "--allow-unpinned"])
        .success()
        .stderr_has(&format!(
            "warning: source is unpinned; fetched it at commit = \"{second}\""
        ))
        .stderr_has(&format!("sha256 = \"{}\"", sha(b"unpinned")));
    let taken = std::fs::read_to_string(p.cache().join("taken-pins/r.toml")).unwrap();
    assert!(taken.contains(&format!("commit = \"{second}\"")), "{taken}");
    assert!(
        taken.contains(&format!("sha256 = \"{}\"", sha(b"unpinned"))),
        "{taken}"
    );
    assert_cache_clean(&p.cache());
}

#[test]
fn two_concurrent_fetches_share_the_cache() {
    let server = Server::start();
    let body = vec![3u8; 1 << 20];
    server.route("/c.tar", Reply::Bytes(body.clone()));
    let (up, first, _) = two_commits();
    let p = Project::new();
    p.recipe(
        "r",
        &format!(
            "{}\n[[patch]]\nname = \"0001-up.patch\"\ngit = \"{}\"\ncommit = \"{first}\"\n",
            tarball_recipe(&server.url("/c.tar"), &sha(&body)),
            up.url()
        ),
    );
    let children: Vec<_> = (0..2)
        .map(|_| {
            p.command(&["fetch", "r", "--allow-unpinned"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        Run::of(child.wait_with_output().unwrap()).success();
    }
    assert_eq!(
        server.hits("/c.tar"),
        1,
        "the second fetch found the tarball cached"
    );
    assert_eq!(blobs(&p.cache()), 2);
    assert_cache_clean(&p.cache());
}

#[test]
fn local_archive_and_folder_are_verified_in_place() {
    let p = Project::new();
    p.file("up/src.tar", "an archive");
    let wrong = "ef".repeat(32);
    p.recipe(
        "a",
        &format!("{HEAD}\n[source]\nlocal = \"up/src.tar\"\nsha256 = \"{wrong}\"\n"),
    );
    p.xtask(&["fetch", "a"])
        .fails_with(1)
        .stderr_has(&format!(
            "local source {}",
            p.root().join("up/src.tar").display()
        ))
        .stderr_has(&format!("expected {wrong}, got {}", sha(b"an archive")));
    p.recipe(
        "a",
        &format!(
            "{HEAD}\n[source]\nlocal = \"up/src.tar\"\nsha256 = \"{}\"\n",
            sha(b"an archive")
        ),
    );
    // The failed fetch read it in full: its hash is remembered, which is
    // not called a verification (the bytes are checked when extracted).
    p.xtask(&["fetch", "a"])
        .success()
        .stderr_has("src.tar: unchanged since hashed");
    std::fs::remove_dir_all(p.cache().join("local-sha256")).unwrap();
    p.xtask(&["fetch", "a"])
        .success()
        .stderr_has("src.tar: verified");
    assert_eq!(blobs(&p.cache()), 0, "a local archive is not copied");

    p.file("tree/a.c", "int a;\n")
        .file("tree/sub/b.c", "int b;\n");
    p.recipe(
        "d",
        &format!("{HEAD}\n[source]\nlocal = \"tree\"\nsha256 = \"{wrong}\"\n"),
    );
    let run = p.xtask(&["fetch", "d"]);
    run.fails_with(1).stderr_has("tree sha256 mismatch");
    let actual = run.stderr.split("got ").nth(1).unwrap()[..64].to_owned();
    p.recipe(
        "d",
        &format!("{HEAD}\n[source]\nlocal = \"tree\"\nsha256 = \"{actual}\"\n"),
    );
    p.xtask(&["fetch", "d"]).success();
    p.file("tree/sub/b.c", "int b = 2;\n");
    p.xtask(&["fetch", "d"])
        .fails_with(1)
        .stderr_has(&format!("local source {}", p.root().join("tree").display()));
    assert_cache_clean(&p.cache());
}

#[test]
fn a_fetch_waits_for_the_cache_lock_and_says_so() {
    use std::io::BufRead;
    let p = Project::new();
    p.file("src/a.c", "int a;\n");
    p.recipe("r", &format!("{HEAD}\n[source]\nlocal = \"src\"\n"));
    std::fs::create_dir_all(p.cache()).unwrap();
    let held = std::fs::File::create(p.cache().join("lock")).unwrap();
    held.lock().unwrap();
    let mut child = p
        .command(&["fetch", "r"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.starts_with("waiting for the cache lock held by another fetch"),
        "{first}"
    );
    held.unlock().unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(child.wait().unwrap().success(), "{rest:?}");
    assert!(rest.iter().any(|l| l.starts_with("fetched r:")), "{rest:?}");
}
