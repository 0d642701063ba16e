//! `cargo xtask lock`: pins written into the recipe file with its comments
//! kept, then seen by `plan` and `fetch`; stale commit pins moved.

use crate::support::fetch::{assert_cache_clean, sha, HEAD};
use crate::support::http::{Reply, Server};
use crate::support::upstream::Upstream;
use crate::support::Project;

/// A fix as a list's archive serves it: a mail around a diff.
const URL_PATCH: &[u8] = b"From: a@example.org\nSubject: [PATCH] fix\n\n---\n a.c | 2 +-\n\n\
diff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-int a;\n+int a = 2;\n";

#[test]
fn lock_writes_pins_keeping_comments_then_plan_shows_them_pinned() {
    let server = Server::start();
    server.route("/fix.patch", Reply::Bytes(URL_PATCH.to_vec()));
    let up = Upstream::new();
    let first = up.file("a.c", "int a;\n").commit("first");
    up.tag("v1.0");
    let second = up.file("a.c", "int a = 2;\n").commit("second");
    let p = Project::new();
    let recipe = format!(
        "{HEAD}\n# Upstream, pinned by lock.\n[source]\ngit = \"{}\"  # the mirror\nref = \"v1.0\"\n\n\
         # A fix from the list.\n[[patch]]\nname = \"0001-fix.patch\"\nurl = \"{}\"\n\n\
         [[patch]]\nname = \"0002-second.patch\"\ngit = \"{}\"\ncommit = \"{second}\" # upstream fix\n",
        up.url(),
        server.url("/fix.patch"),
        up.url()
    );
    p.recipe("r", &recipe);
    let run = p.xtask(&["lock", "r"]);
    run.success()
        .stdout_has(&format!("source.commit: (none) -> {first}"))
        .stdout_has(&format!(
            "patch[0].sha256 (0001-fix.patch): (none) -> {}",
            sha(URL_PATCH)
        ))
        .stdout_has("patch[1].diff_sha256 (0002-second.patch): (none) -> ")
        .stdout_has("wrote 3 pin(s) into recipes/r.toml");
    let text = std::fs::read_to_string(p.root().join("recipes/r.toml")).unwrap();
    for kept in [
        "# Upstream, pinned by lock.",
        "# the mirror",
        "# A fix from the list.",
        "# upstream fix",
    ] {
        assert!(text.contains(kept), "lost {kept:?}:\n{text}");
    }
    assert!(text.contains(&format!("commit = \"{first}\"")), "{text}");
    assert!(
        text.contains(&format!("sha256 = \"{}\"", sha(URL_PATCH))),
        "{text}"
    );
    assert!(text.starts_with(HEAD), "the untouched part moved:\n{text}");

    let plan = p.xtask(&["plan", "r", "--json"]);
    plan.success();
    let json: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    assert_eq!(json["unpinned"], serde_json::json!([]), "{}", plan.stdout);
    assert_eq!(json["source"]["commit"], serde_json::json!(first));

    // lock cached what it downloaded: an offline fetch of the pinned recipe works.
    let hits = server.total_hits();
    p.xtask(&["fetch", "r", "--offline"]).success();
    assert_eq!(server.total_hits(), hits);
    p.xtask(&["lock", "r"])
        .success()
        .stdout_has("every pin is current");
    assert_cache_clean(&p.cache());
}

#[test]
fn lock_moves_a_stale_commit_pin_to_where_ref_points() {
    let up = Upstream::new();
    let first = up.file("a.c", "int a;\n").commit("first");
    let second = up.file("a.c", "int a = 2;\n").commit("second");
    up.allow_sha1_in_want(true);
    let daemon = up.daemon();
    let p = Project::new();
    p.recipe(
        "r",
        &format!(
            "{HEAD}\n[source]\ngit = \"{}\"\nref = \"main\"\ncommit = \"{first}\" # keep me\n",
            daemon.url()
        ),
    );
    p.xtask(&["lock", "r"])
        .success()
        .stdout_has(&format!("source.commit: {first} -> {second}"))
        .stdout_has("`ref = \"main\"` now points at a new commit; the pin moves with it");
    let text = std::fs::read_to_string(p.root().join("recipes/r.toml")).unwrap();
    assert!(
        text.contains(&format!("commit = \"{second}\" # keep me")),
        "{text}"
    );
}

#[test]
fn lock_refuses_offline_and_says_why() {
    let p = Project::new();
    p.recipe("r", &format!("{HEAD}\n[source]\nlocal = \"src\"\n"));
    p.xtask(&["lock", "r", "--offline"])
        .fails_with(2)
        .stderr_has("error: `lock --offline` is not supported: lock asks upstream");
}

#[test]
fn lock_reports_a_missing_ref() {
    let up = Upstream::new();
    up.file("a.c", "int a;\n").commit("first");
    let p = Project::new();
    p.recipe(
        "r",
        &format!("{HEAD}\n[source]\ngit = \"{}\"\nref = \"nope\"\n", up.url()),
    );
    p.xtask(&["lock", "r"])
        .fails_with(1)
        .stderr_has(&format!("{} has no branch or tag `nope`", up.url()));
    assert_cache_clean(&p.cache());
}

#[test]
fn a_pin_that_does_not_match_names_its_records_and_what_lock_would_do() {
    let server = Server::start();
    server.route("/linux.tar", Reply::Bytes(b"not the release".to_vec()));
    let p = Project::new();
    let pinned = "9502c5ffe4b894383c97abfccf74430a84732f04ee476b9c0d87635b29df7db3";
    p.recipe(
        "r",
        &format!(
            "{HEAD}\n[source]\ntarball = \"{}\"\nsha256 = \"{pinned}\"\n\
             pinned_from = [\"buildroot linux/linux.hash at 118f5eb360\", \"siderolabs/pkgs Pkgfile at 3f85dc8\"]\n",
            server.url("/linux.tar")
        ),
    );
    p.xtask(&["fetch", "r"])
        .fails_with(1)
        .stderr_has("the pinned `source.sha256` of recipes/r.toml does not match what was served")
        .stderr_has("it came from buildroot linux/linux.hash at 118f5eb360; siderolabs/pkgs Pkgfile at 3f85dc8")
        .stderr_has("`cargo xtask lock r` keeps a pin that is set")
        .stderr_has(&format!("expected {pinned}"));
    // And lock indeed keeps it.
    p.xtask(&["lock", "r"])
        .success()
        .stdout_has("every pin is current");
}

#[test]
fn lock_adds_the_diff_sha256_of_a_fix_pinned_by_what_it_produces() {
    let up = Upstream::new();
    up.file("a.c", "int a;\n").commit("base");
    let fix = up.file("a.c", "int a = 1;\n").commit("fix");
    let post = up.git(&["rev-parse", &format!("{fix}:a.c")]);
    let server = Server::start();
    server.route("/fix.patch", Reply::Bytes(up.format_patch(&fix)));
    let p = Project::new();
    p.file("src/a.c", "int a;\n");
    p.recipe(
        "r",
        &format!(
            "{HEAD}\n[source]\nlocal = \"src\"\n\n[[patch]]\nname = \"0001-fix.patch\"\n\
             git = \"git://127.0.0.1:9/nowhere\"\ncommit = \"{fix}\"\n\
             urls = [\"{}\"]\nproduces = {{ \"a.c\" = \"{post}\" }}  # from the test's tree\n",
            server.url("/fix.patch")
        ),
    );
    let normalised =
        "diff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1,1 +1,1 @@\n-int a;\n+int a = 1;\n";
    p.xtask(&["lock", "r"]).success().stdout_has(&format!(
        "patch[0].diff_sha256 (0001-fix.patch): (none) -> {}",
        sha(normalised.as_bytes())
    ));
    let text = std::fs::read_to_string(p.root().join("recipes/r.toml")).unwrap();
    assert!(text.contains("# from the test's tree"), "{text}");
    assert!(text.contains(&format!("diff_sha256 = \"{}\"", sha(normalised.as_bytes()))));
    p.xtask(&["lock", "r"])
        .success()
        .stdout_has("every pin is current");
    assert_cache_clean(&p.cache());
}

#[test]
fn lock_refuses_to_pin_a_url_patch_that_is_not_a_diff() {
    let server = Server::start();
    let html = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>\n\
diff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-int a;\n+int a = 2;\n</body></html>\n";
    server.route("/login.patch", Reply::Bytes(html.to_vec()));
    server.route("/empty.patch", Reply::Bytes(b"no such commit\n".to_vec()));
    for (route, why) in [
        ("/login.patch", "an HTML page"),
        ("/empty.patch", "no diff found"),
    ] {
        let p = Project::new();
        let recipe = format!(
            "{HEAD}\n[source]\nlocal = \"src\"\n\n[[patch]]\nname = \"0001-fix.patch\"\nurl = \"{}\"\n",
            server.url(route)
        );
        p.recipe("r", &recipe);
        p.xtask(&["lock", "r"])
            .fails_with(1)
            .stderr_has(&server.url(route))
            .stderr_has(why)
            .stderr_has("not pinned");
        let text = std::fs::read_to_string(p.root().join("recipes/r.toml")).unwrap();
        assert_eq!(text, recipe, "{route}: the recipe is unchanged");
    }
}
