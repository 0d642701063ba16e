//! `cargo xtask fetch` over HTTP against a real server on 127.0.0.1 that
//! fails, truncates, stalls and redirects on request; each failure is
//! checked for its message, its retry count and a cache left clean.

use crate::support::fetch::{assert_cache_clean, blobs, sha, tarball_recipe, HEAD};
use crate::support::http::{Reply, Server};
use crate::support::{Project, Run};

#[test]
fn http_tarball_downloaded_then_cached() {
    let server = Server::start();
    let body = b"pretend this is a tarball".to_vec();
    server.route("/src.tar.gz", Reply::Bytes(body.clone()));
    let p = Project::new();
    p.recipe(
        "r",
        &tarball_recipe(&server.url("/src.tar.gz"), &sha(&body)),
    );
    p.xtask(&["fetch", "r"])
        .success()
        .stderr_has(&format!("downloaded {} B, verified", body.len()));
    p.xtask(&["fetch", "r"]).success().stderr_has(": cached");
    assert_eq!(server.hits("/src.tar.gz"), 1);
    assert!(p.cache().join("sha256").join(sha(&body)).is_file());
    assert_cache_clean(&p.cache());
}

#[test]
fn http_500_is_retried_until_it_succeeds() {
    let server = Server::start();
    let body = b"flaky".to_vec();
    server.route(
        "/f.tar",
        Reply::FailThen {
            failures: 2,
            body: body.clone(),
        },
    );
    let p = Project::new();
    p.recipe("r", &tarball_recipe(&server.url("/f.tar"), &sha(&body)));
    p.xtask(&["fetch", "r"])
        .success()
        .stderr_has("500 Internal Server Error; retrying");
    assert_eq!(server.hits("/f.tar"), 3);
    assert_cache_clean(&p.cache());
}

/// Fetches a tarball recipe pinned to `pin` from `reply` served at `path`,
/// with `env`; the fetch must fail with each of `needles` in stderr (`{url}`
/// stands for the URL) after `hits` requests, and nothing may enter the
/// cache. The server is returned alive for a later fetch.
fn fetch_fails(
    path: &str,
    reply: Reply,
    pin: &str,
    env: &[(&str, &str)],
    hits: usize,
    needles: &[&str],
) -> (Server, Project, Run) {
    let server = Server::start();
    server.route(path, reply);
    let p = Project::new();
    let url = server.url(path);
    p.recipe("r", &tarball_recipe(&url, pin));
    let run = p.xtask_with(&["fetch", "r"], env);
    run.fails_with(1);
    for needle in needles {
        run.stderr_has(&needle.replace("{url}", &url));
    }
    assert_eq!(server.hits(path), hits);
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
    (server, p, run)
}

#[test]
fn http_404_is_not_retried() {
    let unpinned = "0".repeat(64);
    let needle = "downloading {url}: the server answered 404";
    fetch_fails(
        "/gone.tar",
        Reply::Status(404),
        &unpinned,
        &[],
        1,
        &[needle],
    );
}

#[test]
fn http_truncated_body_is_retried_and_caches_nothing() {
    let body = b"only part of it".to_vec();
    let reply = Reply::Truncate {
        body: body.clone(),
        claimed: 1000,
    };
    let needle = "downloading {url} failed after 4 attempts";
    fetch_fails("/t.tar", reply, &sha(&body), &[], 4, &[needle]);
}

#[test]
fn http_stall_past_the_read_timeout_fails() {
    let body = vec![7u8; 4096];
    let env = [
        ("PATCHKIT_HTTP_READ_TIMEOUT_MS", "300"),
        ("PATCHKIT_HTTP_ATTEMPTS", "2"),
    ];
    let needle = "downloading {url} failed after 2 attempts";
    let reply = Reply::Stall(body.clone());
    let (_, _, run) = fetch_fails("/slow.tar", reply, &sha(&body), &env, 2, &[needle]);
    assert!(
        run.stderr.contains("read timeout") || run.stderr.contains("timed out"),
        "{}",
        run.stderr
    );
}

#[test]
fn http_redirect_is_followed() {
    let server = Server::start();
    let body = b"moved".to_vec();
    server
        .route("/old.tar", Reply::Redirect("/new.tar".into()))
        .route("/new.tar", Reply::Bytes(body.clone()));
    let p = Project::new();
    p.recipe("r", &tarball_recipe(&server.url("/old.tar"), &sha(&body)));
    p.xtask(&["fetch", "r"]).success();
    assert_eq!((server.hits("/old.tar"), server.hits("/new.tar")), (1, 1));
    assert_cache_clean(&p.cache());
}

#[test]
fn http_redirect_to_another_scheme_is_refused() {
    let reply = Reply::Redirect("ftp://127.0.0.1/x.tar".into());
    let needles = [
        "downloading {url}",
        "refusing a redirect to `ftp://127.0.0.1/x.tar`",
    ];
    fetch_fails("/x.tar", reply, &"0".repeat(64), &[], 1, &needles);
}

#[test]
fn http_size_cap_refuses_big_downloads() {
    let body = vec![1u8; 5000];
    let cap = [("PATCHKIT_HTTP_MAX_BYTES", "1000")];
    let needle = "above the limit of 1000 bytes";
    let reply = Reply::Bytes(body.clone());
    fetch_fails("/big.tar", reply, &sha(&body), &cap, 1, &[needle]);
}

#[test]
fn http_sha256_mismatch_names_url_expected_and_actual() {
    let server = Server::start();
    let body = b"not what was pinned".to_vec();
    server.route("/m.patch", Reply::Bytes(body.clone()));
    let p = Project::new();
    let url = server.url("/m.patch");
    let expected = "cd".repeat(32);
    p.recipe(
        "r",
        &format!(
            "{HEAD}\n[source]\nlocal = \"src\"\n\n[[patch]]\nname = \"0001-m.patch\"\nurl = \"{url}\"\nsha256 = \"{expected}\"\n"
        ),
    );
    p.file("src/a.c", "int a;\n");
    p.xtask(&["fetch", "r"])
        .fails_with(1)
        .stderr_has(&format!("downloading {url}: sha256 mismatch"))
        .stderr_has(&format!("expected {expected}, got {}", sha(&body)))
        .stderr_has("nothing was cached");
    assert_eq!(server.hits("/m.patch"), 1);
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
}

#[test]
fn http_size_cap_holds_while_streaming_without_a_length() {
    let body = vec![1u8; 5000];
    let cap = [("PATCHKIT_HTTP_MAX_BYTES", "1000")];
    let needle = "above the limit of 1000 bytes";
    let reply = Reply::Unsized(body.clone());
    let (_server, p, _) = fetch_fails("/unsized.tar", reply, &sha(&body), &cap, 1, &[needle]);
    p.xtask(&["fetch", "r"]).success();
}

#[test]
fn http_connection_refused_is_retried_then_reported() {
    let port = crate::support::free_port();
    let url = format!("http://127.0.0.1:{port}/closed.tar");
    let p = Project::new();
    p.recipe("r", &tarball_recipe(&url, &"0".repeat(64)));
    p.xtask(&["fetch", "r"])
        .fails_with(1)
        .stderr_has(&format!("downloading {url} failed after 4 attempts"))
        .stderr_has("Check the URL and the network");
    assert_cache_clean(&p.cache());
}
