//! Hostile conditions around the work directory, the cache and archives
//! (issue #15): concurrent builds of one recipe, kill -9 mid-extraction, a
//! tampered cache blob, archive bombs and broken archives.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::demo::{build, build_command, demo_project, dist};
use crate::support::tools::sh;
use crate::support::Run;

/// The `*.staging-*` and `*.old-*` entries of a folder.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".staging-") || n.contains(".old-"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn ten_concurrent_builds_of_one_recipe_all_succeed() {
    let p = demo_project();
    let children: Vec<_> = (0..10)
        .map(|_| {
            build_command(&p, &["--formats", "tar"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let runs: Vec<Run> = children
        .into_iter()
        .map(|c| Run::of(c.wait_with_output().unwrap()))
        .collect();
    for run in &runs {
        run.success();
    }
    assert!(
        runs.iter()
            .any(|r| r.stderr.contains("waiting for another run of demo-hello")),
        "at least one build waited and said so"
    );
    p.xtask(&["verify", "dist/demo-hello"]).success();
    let work = p.root().join("target/patchkit/work/demo-hello");
    assert_eq!(leftovers(&work), Vec::<String>::new());
    assert_eq!(leftovers(&p.root().join("dist")), Vec::<String>::new());
    assert!(dist(&p).join("SHA256SUMS").is_file());
}

#[test]
fn staging_left_by_a_kill_during_extraction_is_removed_by_the_next_run() {
    let p = demo_project();
    // A source big enough that extraction takes a while.
    let big = p.root().join("examples/demo-hello/big.bin");
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let mut data = Vec::new();
    for _ in 0..48 {
        data.extend_from_slice(&chunk);
    }
    std::fs::write(&big, &data).unwrap();
    let work = p.root().join("target/patchkit/work/demo-hello");
    let mut child = build_command(&p, &["--formats", "tar"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if !leftovers(&work).is_empty() {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build ended before extraction could be caught"
        );
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no staging folder appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = leftovers(&work);
    assert!(
        left.iter()
            .any(|n| n.starts_with("tree.staging-") || n.starts_with("pristine.staging-")),
        "a killed extraction leaves its staging folder: {left:?}"
    );
    std::fs::remove_file(&big).unwrap();
    build(&p, &["--formats", "tar"]).success();
    assert_eq!(leftovers(&work), Vec::<String>::new());
    p.xtask(&["verify", "dist/demo-hello"]).success();
}

/// The demo recipe with its source served as a tarball from `server`.
fn demo_from_tarball(
    p: &crate::support::Project,
    server: &crate::support::http::Server,
) -> (String, Vec<u8>) {
    let out = std::process::Command::new("tar")
        .args([
            "-czf",
            "-",
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--mtime=@0",
        ])
        .arg("-C")
        .arg(p.root().join("examples"))
        .arg("demo-hello")
        .output()
        .unwrap();
    assert!(out.status.success());
    let body = out.stdout;
    server.route(
        "/demo.tar.gz",
        crate::support::http::Reply::Bytes(body.clone()),
    );
    let sha = crate::support::fetch::sha(&body);
    let path = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "local = \"examples/demo-hello\"",
        &format!(
            "tarball = \"{}\"\nsha256 = \"{sha}\"\nstrip = 1",
            server.url("/demo.tar.gz")
        ),
    );
    std::fs::write(&path, text).unwrap();
    (sha, body)
}

#[test]
fn a_tampered_cache_blob_is_moved_aside_and_fetched_again() {
    let server = crate::support::http::Server::start();
    let p = demo_project();
    let (sha, _) = demo_from_tarball(&p, &server);
    build(&p, &["--formats", "tar"]).success();
    let sums = std::fs::read_to_string(dist(&p).join("SHA256SUMS")).unwrap();

    // Other bytes under the pin's name, and no work tree to fall back on.
    let blob = p.cache().join("sha256").join(&sha);
    std::fs::write(
        p.root().join("examples/demo-hello/patchkit_hello.c"),
        "/* TAMPERED */\n",
    )
    .unwrap();
    let tampered = std::process::Command::new("tar")
        .args(["-czf"])
        .arg(&blob)
        .arg("-C")
        .arg(p.root().join("examples"))
        .arg("demo-hello")
        .status()
        .unwrap();
    assert!(tampered.success());
    std::fs::remove_dir_all(p.root().join("target/patchkit/work")).unwrap();

    build(&p, &["--formats", "tar"])
        .success()
        .stderr_has(&format!(
            "the cached blob {} no longer hashes to its name",
            blob.display()
        ));
    assert_eq!(server.hits("/demo.tar.gz"), 2, "fetched again");
    assert_eq!(
        std::fs::read_to_string(dist(&p).join("SHA256SUMS")).unwrap(),
        sums,
        "the publication holds the pinned source, not the tampered one"
    );
    let corrupt: Vec<_> = std::fs::read_dir(p.cache().join("corrupt"))
        .unwrap()
        .collect();
    assert_eq!(corrupt.len(), 1, "the tampered blob is kept aside");
    assert_eq!(
        crate::support::fetch::sha(&std::fs::read(&blob).unwrap()),
        sha
    );
    p.xtask(&["verify", "dist/demo-hello"]).success();
}

/// Points the demo recipe at the local archive `name` (one folder level stripped).
fn demo_from_local_archive(p: &crate::support::Project, name: &str) {
    let path = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "local = \"examples/demo-hello\"",
        &format!("local = \"{name}\"\nstrip = 1"),
    );
    std::fs::write(&path, text).unwrap();
}

#[test]
fn an_archive_bomb_stops_at_the_extraction_limits() {
    let p = demo_project();
    sh(
        p.root(),
        "mkdir bomb && head -c 100M /dev/zero > bomb/zeros && tar -czf bomb.tar.gz bomb && rm -r bomb",
    );
    assert!(
        std::fs::metadata(p.root().join("bomb.tar.gz"))
            .unwrap()
            .len()
            < 1 << 20
    );
    demo_from_local_archive(&p, "bomb.tar.gz");
    let tree = p.root().join("target/patchkit/work/demo-hello");
    let run = p.xtask_with(
        &["apply", "demo-hello"],
        &[("PATCHKIT_EXTRACT_MAX_BYTES", "64M")],
    );
    run.fails_with(1)
        .stderr_has("expands to more than 67108864 bytes")
        .stderr_has("PATCHKIT_EXTRACT_MAX_BYTES")
        .stderr_has("`source.local` = bomb.tar.gz of recipes/demo-hello.toml");
    assert!(!tree.join("tree").exists());
    assert_eq!(leftovers(&tree), Vec::<String>::new());

    // Many small files: the file count stops it.
    sh(
        p.root(),
        "mkdir -p many/d && for i in $(seq 1 300); do : > many/d/f$i; done && tar -czf many.tar.gz many && rm -r many",
    );
    let path = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("bomb.tar.gz", "many.tar.gz");
    std::fs::write(&path, text).unwrap();
    p.xtask_with(
        &["apply", "demo-hello"],
        &[("PATCHKIT_EXTRACT_MAX_FILES", "100")],
    )
    .fails_with(1)
    .stderr_has("holds more than 100 files")
    .stderr_has("PATCHKIT_EXTRACT_MAX_FILES");
    assert!(!tree.join("tree").exists());
}

#[test]
fn broken_archives_and_bad_redirects_say_what_happened_and_where() {
    let p = demo_project();
    // Garbage.
    std::fs::write(
        p.root().join("garbage.tar.gz"),
        b"this is not an archive at all\n",
    )
    .unwrap();
    demo_from_local_archive(&p, "garbage.tar.gz");
    p.xtask(&["apply", "demo-hello"])
        .fails_with(1)
        .stderr_has("not a gzip/xz/zstd tar archive")
        .stderr_has("`source.local` = garbage.tar.gz of recipes/demo-hello.toml");

    // Truncated: the first half of a real .tar.gz.
    sh(
        p.root(),
        "head -c 200000 /dev/urandom > examples/demo-hello/noise.bin && \
         tar -czf whole.tar.gz -C examples demo-hello && \
         head -c $(( $(stat -c %s whole.tar.gz) / 2 )) whole.tar.gz > half.tar.gz",
    );
    let path = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("garbage.tar.gz", "half.tar.gz");
    std::fs::write(&path, text).unwrap();
    let run = p.xtask(&["apply", "demo-hello"]);
    run.fails_with(1)
        .stderr_has("the archive is truncated or corrupt")
        .stderr_has("`source.local` = half.tar.gz");
    assert!(
        !run.stderr.contains("could write outside the tree"),
        "{}",
        run.stderr
    );

    // Over HTTP, with -q: the message still names the key and the URL.
    let server = crate::support::http::Server::start();
    let p = demo_project();
    demo_from_tarball(&p, &server);
    let garbage = b"<html>not found</html>\n".to_vec();
    server.route(
        "/demo.tar.gz",
        crate::support::http::Reply::Bytes(garbage.clone()),
    );
    let path = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("sha256 = \"").unwrap() + 10;
    let text = format!(
        "{}{}{}",
        &text[..start],
        crate::support::fetch::sha(&garbage),
        &text[start + 64..]
    );
    std::fs::write(&path, text).unwrap();
    let url = server.url("/demo.tar.gz");
    p.xtask(&["-q", "apply", "demo-hello"])
        .fails_with(1)
        .stderr_has("not a gzip/xz/zstd tar archive")
        .stderr_has(&format!(
            "`source.tarball` = {url} of recipes/demo-hello.toml"
        ));

    // A redirect to file:// is refused as such.
    server.route(
        "/demo.tar.gz",
        crate::support::http::Reply::Redirect("file:///etc/passwd".into()),
    );
    std::fs::remove_dir_all(p.cache()).unwrap();
    p.xtask(&["apply", "demo-hello"])
        .fails_with(1)
        .stderr_has("redirect to a file:// URL refused");
}
