//! `cargo xtask fetch` over HTTP against a real server on 127.0.0.1 that
//! fails, truncates, stalls and redirects on request; each failure is
//! checked for its message, its retry count and a cache left clean.

use crate::fetch::{assert_cache_clean, blobs, sha, tarball_recipe, xtask, HEAD};
use crate::support::http::{Reply, Server};
use crate::support::Project;

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
    xtask(&p, &["fetch", "r"], &[])
        .success()
        .stderr_has(&format!("downloaded {} B, verified", body.len()));
    xtask(&p, &["fetch", "r"], &[])
        .success()
        .stderr_has(": cached");
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
    xtask(&p, &["fetch", "r"], &[])
        .success()
        .stderr_has("500 Internal Server Error; retrying");
    assert_eq!(server.hits("/f.tar"), 3);
    assert_cache_clean(&p.cache());
}

#[test]
fn http_404_is_not_retried() {
    let server = Server::start();
    let p = Project::new();
    let url = server.url("/gone.tar");
    p.recipe("r", &tarball_recipe(&url, &"0".repeat(64)));
    xtask(&p, &["fetch", "r"], &[])
        .fails_with(1)
        .stderr_has(&format!("downloading {url}: the server answered 404"));
    assert_eq!(server.hits("/gone.tar"), 1);
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
}

#[test]
fn http_truncated_body_is_retried_and_caches_nothing() {
    let server = Server::start();
    let body = b"only part of it".to_vec();
    server.route(
        "/t.tar",
        Reply::Truncate {
            body: body.clone(),
            claimed: 1000,
        },
    );
    let p = Project::new();
    let url = server.url("/t.tar");
    p.recipe("r", &tarball_recipe(&url, &sha(&body)));
    xtask(&p, &["fetch", "r"], &[])
        .fails_with(1)
        .stderr_has(&format!("downloading {url} failed after 4 attempts"));
    assert_eq!(server.hits("/t.tar"), 4);
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
}

#[test]
fn http_stall_past_the_read_timeout_fails() {
    let server = Server::start();
    let body = vec![7u8; 4096];
    server.route("/slow.tar", Reply::Stall(body.clone()));
    let p = Project::new();
    let url = server.url("/slow.tar");
    p.recipe("r", &tarball_recipe(&url, &sha(&body)));
    let env = [
        ("PATCHKIT_HTTP_READ_TIMEOUT_MS", "300"),
        ("PATCHKIT_HTTP_ATTEMPTS", "2"),
    ];
    let run = xtask(&p, &["fetch", "r"], &env);
    run.fails_with(1)
        .stderr_has(&format!("downloading {url} failed after 2 attempts"));
    assert!(
        run.stderr.contains("read timeout") || run.stderr.contains("timed out"),
        "{}",
        run.stderr
    );
    assert_eq!(server.hits("/slow.tar"), 2);
    assert_cache_clean(&p.cache());
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
    xtask(&p, &["fetch", "r"], &[]).success();
    assert_eq!((server.hits("/old.tar"), server.hits("/new.tar")), (1, 1));
    assert_cache_clean(&p.cache());
}

#[test]
fn http_redirect_to_another_scheme_is_refused() {
    let server = Server::start();
    server.route("/x.tar", Reply::Redirect("ftp://127.0.0.1/x.tar".into()));
    let p = Project::new();
    let url = server.url("/x.tar");
    p.recipe("r", &tarball_recipe(&url, &"0".repeat(64)));
    xtask(&p, &["fetch", "r"], &[])
        .fails_with(1)
        .stderr_has(&format!("downloading {url}"))
        .stderr_has("refusing a redirect to `ftp://127.0.0.1/x.tar`");
    assert_eq!(server.hits("/x.tar"), 1);
    assert_cache_clean(&p.cache());
}

#[test]
fn http_size_cap_refuses_big_downloads() {
    let server = Server::start();
    let body = vec![1u8; 5000];
    server.route("/big.tar", Reply::Bytes(body.clone()));
    let p = Project::new();
    p.recipe("r", &tarball_recipe(&server.url("/big.tar"), &sha(&body)));
    xtask(&p, &["fetch", "r"], &[("PATCHKIT_HTTP_MAX_BYTES", "1000")])
        .fails_with(1)
        .stderr_has("above the limit of 1000 bytes");
    assert_eq!(server.hits("/big.tar"), 1);
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
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
    xtask(&p, &["fetch", "r"], &[])
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
    let server = Server::start();
    let body = vec![1u8; 5000];
    server.route("/unsized.tar", Reply::Unsized(body.clone()));
    let p = Project::new();
    p.recipe(
        "r",
        &tarball_recipe(&server.url("/unsized.tar"), &sha(&body)),
    );
    xtask(&p, &["fetch", "r"], &[("PATCHKIT_HTTP_MAX_BYTES", "1000")])
        .fails_with(1)
        .stderr_has("above the limit of 1000 bytes");
    assert_eq!(server.hits("/unsized.tar"), 1);
    assert_eq!(blobs(&p.cache()), 0);
    assert_cache_clean(&p.cache());
    xtask(&p, &["fetch", "r"], &[]).success();
}

#[test]
fn http_connection_refused_is_retried_then_reported() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/closed.tar");
    let p = Project::new();
    p.recipe("r", &tarball_recipe(&url, &"0".repeat(64)));
    xtask(&p, &["fetch", "r"], &[])
        .fails_with(1)
        .stderr_has(&format!("downloading {url} failed after 4 attempts"))
        .stderr_has("Check the URL and the network");
    assert_cache_clean(&p.cache());
}
