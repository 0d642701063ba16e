//! A fix pinned by what it is: the same commit served over a real HTTP
//! server in two renderings passes its pins (`produces`, `diff_sha256`), a
//! changed hunk fails naming the file and the hunk, and a `git daemon` that
//! will not hand out one commit stops a fetch of its whole history at the
//! size cap, leaving nothing half-fetched in the cache.

use crate::support::fetch::{assert_cache_clean, blobs, sha, HEAD};
use crate::support::http::{Reply, Server};
use crate::support::upstream::Upstream;
use crate::support::Project;

/// A base commit and a fix that changes `a.c` and `b.c` (one hunk each).
fn upstream() -> (Upstream, String, String) {
    let up = Upstream::new();
    let lines =
        |n: usize, tag: &str| -> String { (1..=n).map(|i| format!("int {tag}{i};\n")).collect() };
    up.file("a.c", &lines(20, "a")).file("b.c", &lines(20, "b"));
    let base = up.commit("base");
    up.file("a.c", &lines(20, "a").replace("int a10;", "int a10 = 10;"))
        .file("b.c", &lines(20, "b").replace("int b5;", "int b5 = 5;"));
    let fix = up.commit("fix: initialise a10 and b5");
    (up, base, fix)
}

fn blob(up: &Upstream, commit: &str, path: &str) -> String {
    up.git(&["rev-parse", &format!("{commit}:{path}")])
}

/// The project: the base tree as a local source, the fix as a git patch
/// whose repository no one serves (port 9 on 127.0.0.1), fetched from `urls`.
fn project(up: &Upstream, base: &str, fix: &str, urls: &[String], pins: &str) -> Project {
    let p = Project::new();
    up.checkout(base, &p.root().join("tree"));
    let urls: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    p.recipe(
        "r",
        &format!(
            "{HEAD}\n[source]\nlocal = \"tree\"\n\n[[patch]]\nname = \"0001-fix.patch\"\n\
             git = \"git://127.0.0.1:9/nowhere\"\ncommit = \"{fix}\"\nurls = [{}]\n{pins}\
             pinned_from = [\"the test's own upstream\"]\n",
            urls.join(", ")
        ),
    );
    p
}

fn produces(up: &Upstream, fix: &str) -> String {
    format!(
        "produces = {{ \"a.c\" = \"{}\", \"b.c\" = \"{}\" }}\n",
        blob(up, fix, "a.c"),
        blob(up, fix, "b.c")
    )
}

#[test]
fn one_fix_in_two_renderings_passes_its_pins() {
    let (up, base, fix) = upstream();
    let server = Server::start();
    // cgit-like: abbreviated index ids, diffstat, signature.
    let first = up.git_bytes(&["format-patch", "-1", "--stdout", "--abbrev=7", &fix]);
    // GitHub-like: full index ids, no diffstat, other headers and subject.
    let second = up.git_bytes(&[
        "format-patch",
        "-1",
        "--stdout",
        "--full-index",
        "--no-stat",
        "--subject-prefix=PATCH v2",
        "--add-header=X-Mirror: yes",
        "--signature=mirror",
        &fix,
    ]);
    assert_ne!(first, second);
    server
        .route("/one.patch", Reply::Bytes(first))
        .route("/two.patch", Reply::Bytes(second));

    let a = project(
        &up,
        &base,
        &fix,
        &[server.url("/one.patch")],
        &produces(&up, &fix),
    );
    a.xtask(&["apply", "r", "--into", "out"])
        .success()
        .stderr_has("normalised, verified");
    assert_eq!(
        std::fs::read_to_string(a.root().join("out/a.c")).unwrap(),
        up.git(&["show", &format!("{fix}:a.c")]) + "\n"
    );
    let diff = std::fs::read_to_string(a.cache().join("commit-diffs").join(&fix)).unwrap();
    let diff = diff.trim();
    assert_cache_clean(&a.cache());
    assert_eq!(blobs(&a.cache()), 1, "only the normalised diff is cached");

    // The other rendering, pinned by both the blobs and the first one's
    // normalised diff: the same bytes land in the cache.
    let pins = format!("{}diff_sha256 = \"{diff}\"\n", produces(&up, &fix));
    let b = project(&up, &base, &fix, &[server.url("/two.patch")], &pins);
    b.xtask(&["apply", "r", "--into", "out"]).success();
    let cached = std::fs::read(b.cache().join("sha256").join(diff)).unwrap();
    assert_eq!(sha(&cached), diff);
    assert!(!String::from_utf8_lossy(&cached).contains("index "));
    assert_eq!(server.hits("/one.patch"), 1);
    assert_eq!(server.hits("/two.patch"), 1);

    // Offline, from the cache alone.
    b.xtask(&["fetch", "r", "--offline"]).success();
}

#[test]
fn a_changed_hunk_fails_naming_the_file_and_the_hunk() {
    let (up, base, fix) = upstream();
    let server = Server::start();
    let good = String::from_utf8(up.format_patch(&fix)).unwrap();
    // The index line still claims the pinned post-image; the hunk does not.
    let bad = good.replace("+int b5 = 5;", "+int b5 = 6;");
    assert_ne!(good, bad);
    server.route("/bad.patch", Reply::Bytes(bad.into_bytes()));

    let p = project(
        &up,
        &base,
        &fix,
        &[server.url("/bad.patch")],
        &produces(&up, &fix),
    );
    p.xtask(&["apply", "r", "--into", "out"])
        .fails_with(1)
        .stderr_has("`b.c` came out as blob ")
        .stderr_has(&format!("not the blob {}", blob(&up, &fix, "b.c")))
        .stderr_has("hunk 1 `@@ -2,7 +2,7 @@`");
    assert!(!p.root().join("out").exists(), "nothing applied");

    // Pinned by its normalised diff too, the same rendering never enters
    // the cache: the fetch names the pin and its records.
    server.route("/good.patch", Reply::Bytes(good.into_bytes()));
    let q = project(
        &up,
        &base,
        &fix,
        &[server.url("/good.patch")],
        &produces(&up, &fix),
    );
    q.xtask(&["fetch", "r"]).success();
    let good_diff = std::fs::read_to_string(q.cache().join("commit-diffs").join(&fix)).unwrap();
    let pins = format!("diff_sha256 = \"{}\"\n", good_diff.trim());
    let p = project(&up, &base, &fix, &[server.url("/bad.patch")], &pins);
    p.xtask(&["fetch", "r"])
        .fails_with(1)
        .stderr_has("not the pinned `diff_sha256`")
        .stderr_has("the pins came from: the test's own upstream");
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
}

#[test]
fn a_git_daemon_without_fetch_by_id_stops_at_the_cap() {
    let (up, base, _) = upstream();
    // History larger than the cap: 3 MB that do not compress.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(up.path().join("noise.bin"), &noise).unwrap();
    up.commit("noise");
    up.file("a.c", "int a1 = 1;\n");
    let fix = up.commit("fix");
    up.allow_sha1_in_want(false);
    let daemon = up.daemon();

    let p = Project::new();
    up.checkout(&base, &p.root().join("tree"));
    let recipe = format!(
        "{HEAD}\n[source]\nlocal = \"tree\"\n\n[[patch]]\nname = \"0001-fix.patch\"\n\
         git = \"{}\"\ncommit = \"{fix}\"\nproduces = {{ \"a.c\" = \"{}\" }}\n",
        daemon.url(),
        blob(&up, &fix, "a.c")
    );
    p.recipe("r", &recipe);
    let cap = [("PATCHKIT_GIT_MAX_BYTES", "1000000")];
    p.xtask_with(&["fetch", "r"], &cap)
        .fails_with(1)
        .stderr_has("does not hand out commit")
        .stderr_has("stopped at the cap of")
        .stderr_has("nothing of it was kept")
        .stderr_has("--allow-full-fetch")
        .stderr_has("`urls = [");
    let git = p.cache().join("git");
    let left: Vec<_> = std::fs::read_dir(&git)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "half-fetched mirror left: {left:?}");
    assert!(!p.cache().join("commit-diffs").exists());
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());

    // Asked for, the whole repository is fetched and the fix checked.
    p.xtask_with(&["fetch", "r", "--allow-full-fetch"], &cap)
        .success()
        .stderr_has("fetching every branch and tag");
    assert_cache_clean(&p.cache());
}
