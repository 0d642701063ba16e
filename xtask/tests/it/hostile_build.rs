//! Hostile inputs to the build line (issue #25): archives whose compressor
//! trailer is wrong, control characters in a folder source's names, a
//! server that trickles, a forged state record under `apply --into` or
//! `verify`, a forged local-archive memo, and the staging folders refused
//! sources leave in `work/`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::demo::{build, demo_project, dist};
use crate::support::fetch::{assert_cache_clean, sha, tarball_recipe};
use crate::support::http::{Reply, Server};
use crate::support::tools::sh;
use crate::support::Project;

/// Points the demo recipe at `local` (with `extra` lines after it).
fn demo_source(p: &Project, local: &str, extra: &str) {
    let path = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "local = \"examples/demo-hello\"",
        &format!("local = \"{local}\"\n{extra}"),
    );
    std::fs::write(&path, text).unwrap();
}

/// After a refused `apply`: no work tree was left, `build` fails too saying
/// `why`, and nothing is left staged.
#[track_caller]
fn assert_left_no_trace(p: &Project, why: &str) {
    assert!(!p
        .root()
        .join("target/patchkit/work/demo-hello/tree")
        .exists());
    build(p, &["--formats", "tar"])
        .fails_with(1)
        .stderr_has(why);
    assert_eq!(staging_left(p), Vec::<String>::new());
}

/// The `pristine.staging-*` and `tree.staging-*` folders in the demo's work folder.
fn staging_left(p: &Project) -> Vec<String> {
    let work = p.root().join("target/patchkit/work/demo-hello");
    let mut left: Vec<String> = std::fs::read_dir(work)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".staging-"))
                .collect()
        })
        .unwrap_or_default();
    left.sort();
    left
}

/// Flips one bit of the byte `from_end` bytes before the end of `file`.
fn flip_from_end(file: &Path, from_end: usize) {
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes.len() - from_end;
    bytes[at] ^= 0x01;
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn a_local_archive_whose_gzip_crc_zstd_checksum_or_xz_index_is_wrong_is_refused() {
    let p = demo_project();
    sh(
        p.root(),
        "tar -cf demo.tar -C examples demo-hello && gzip -kn demo.tar && zstd -q demo.tar && \
         xz -k demo.tar",
    );
    // gzip's trailer: CRC32 then size, 4 bytes each; zstd's frame ends
    // with the content checksum (4 bytes); xz's index (read after every
    // block) ends with its CRC32, before the 12-byte stream footer. The
    // tar stream is whole in each.
    for (archive, from_end, tool) in [
        ("demo.tar.gz", 8, "gzip"),
        ("demo.tar.zst", 1, "zstd"),
        ("demo.tar.xz", 13, "xz"),
    ] {
        let path = p.root().join(archive);
        flip_from_end(&path, from_end);
        let tested = std::process::Command::new(tool)
            .arg("-t")
            .arg(&path)
            .output()
            .unwrap();
        assert!(!tested.status.success(), "{tool} -t sees the damage");
        demo_source(&p, archive, "strip = 1");
        p.xtask(&["apply", "demo-hello"])
            .fails_with(1)
            .stderr_has("the archive is truncated or corrupt (after its last entry")
            .stderr_has(&format!("`source.local` = {archive}"));
        assert_left_no_trace(&p, "truncated or corrupt");
        assert!(!dist(&p).exists(), "nothing published");
        // Put the recipe back for the next archive.
        let recipe = p.root().join("recipes/demo-hello.toml");
        let text = std::fs::read_to_string(&recipe).unwrap().replace(
            &format!("local = \"{archive}\"\nstrip = 1"),
            "local = \"examples/demo-hello\"",
        );
        std::fs::write(&recipe, text).unwrap();
    }
    // The same archives undamaged apply.
    sh(p.root(), "gzip -c demo.tar > good.tar.gz");
    demo_source(&p, "good.tar.gz", "strip = 1");
    p.xtask(&["apply", "demo-hello"]).success();
}

#[test]
fn a_control_character_in_a_folder_source_name_is_refused_with_the_name_escaped() {
    for name in ["bad\nname.c", "esc\u{1b}[2J.c"] {
        let p = demo_project();
        p.file(&format!("examples/demo-hello/sub/{name}"), "int x;\n");
        let run = p.xtask(&["apply", "demo-hello"]);
        run.fails_with(1)
            .stderr_has(&format!("`sub/{}` is refused", name.escape_debug()))
            .stderr_has("control character U+00");
        assert!(!run.stderr.contains(name), "the name is printed raw");
        assert_left_no_trace(&p, "is refused");
    }
}

#[test]
fn refused_archives_bombs_and_folder_sources_leave_no_staging_in_work() {
    let p = demo_project();
    // A bomb: 64 MiB of zeros against a 16 MiB limit.
    sh(
        p.root(),
        "mkdir bomb && head -c 64M /dev/zero > bomb/zeros && tar -czf bomb.tar.gz bomb && rm -r bomb",
    );
    demo_source(&p, "bomb.tar.gz", "strip = 1");
    let run = crate::support::Run::of(
        crate::support::demo::build_command(&p, &["--formats", "tar"])
            .env("PATCHKIT_EXTRACT_MAX_BYTES", "16M")
            .output()
            .unwrap(),
    );
    run.fails_with(1).stderr_has("expands to more than");
    assert_eq!(staging_left(&p), Vec::<String>::new(), "after the bomb");

    // An archive with an entry that leaves the tree.
    sh(
        p.root(),
        "mkdir -p evil/d && echo x > evil/d/f && echo y > outside && \
         tar -cf evil.tar -C evil d -C .. --transform 's,^outside,d/../../outside,' outside",
    );
    let recipe = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&recipe)
        .unwrap()
        .replace("bomb.tar.gz", "evil.tar");
    std::fs::write(&recipe, text).unwrap();
    build(&p, &["--formats", "tar"])
        .fails_with(1)
        .stderr_has("has a `..` component");
    assert_eq!(
        staging_left(&p),
        Vec::<String>::new(),
        "after the refused archive"
    );

    // A folder whose copy stops at a link out of the tree, after a
    // private file was copied.
    let p = demo_project();
    let src = p.root().join("examples/demo-hello");
    std::fs::write(src.join("a-private.key"), "secret\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        src.join("a-private.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", src.join("z-passwd")).unwrap();
    build(&p, &["--formats", "tar"])
        .fails_with(1)
        .stderr_has("points to the absolute path `/etc/passwd`");
    assert_eq!(
        staging_left(&p),
        Vec::<String>::new(),
        "after the refused folder"
    );
    let found = std::process::Command::new("grep")
        .args(["-rl", "secret"])
        .arg(p.root().join("target/patchkit/work"))
        .output()
        .unwrap();
    assert!(
        found.stdout.is_empty(),
        "a copy of the private file stays in work/: {}",
        String::from_utf8_lossy(&found.stdout)
    );
}

#[test]
fn a_trickling_download_stops_at_the_deadline_or_the_minimum_rate_and_leaves_nothing() {
    let body = b"0123456789".to_vec();
    let every = Duration::from_millis(600);
    // (environment, what the failure says)
    let cases = [
        (
            vec![("PATCHKIT_HTTP_DEADLINE_MS", "1500")],
            "stopped at its deadline of 1.5 s",
        ),
        (
            vec![
                ("PATCHKIT_HTTP_READ_TIMEOUT_MS", "1000"),
                ("PATCHKIT_HTTP_MIN_RATE", "100"),
                ("PATCHKIT_HTTP_ATTEMPTS", "1"),
            ],
            "below the minimum rate of 100 bytes/s (PATCHKIT_HTTP_MIN_RATE)",
        ),
    ];
    for (env, needle) in cases {
        let server = Server::start();
        server.route(
            "/slow.tar",
            Reply::Trickle {
                body: body.clone(),
                every,
            },
        );
        let p = Project::new();
        let url = server.url("/slow.tar");
        p.recipe("r", &tarball_recipe(&url, &sha(&body)));
        let start = Instant::now();
        let run = p.xtask_with(&["fetch", "r"], &env);
        let took = start.elapsed();
        run.fails_with(1).stderr_has(needle).stderr_has(&url);
        assert!(
            took < Duration::from_secs(5),
            "the trickle of {}s was cut short, not waited out: {took:?}",
            every.as_secs_f64() * body.len() as f64
        );
        assert!(p.cache().join("tmp").is_dir());
        assert_cache_clean(&p.cache());
        assert!(!p.cache().join("sha256").join(sha(&body)).exists());
    }
}

#[test]
fn apply_into_a_folder_whose_record_is_not_its_own_refuses_and_deletes_nothing() {
    let p = demo_project();
    let refused = |dir: &str| {
        p.xtask(&["apply", "demo-hello", "--into", dir])
            .fails_with(2)
            .stderr_has("holds files that are not a tree applied by rocm-patchkit");
        let kept = p.root().join(dir).join("important.txt");
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "keep me");
    };
    // A `.patchkit/state.json` that is not a state record (another tool's).
    p.file("mine/important.txt", "keep me");
    p.file("mine/.patchkit/state.json", "{\"format\": 2}\n");
    refused("mine");
    p.file("mine/.patchkit/state.json", "not json\n");
    refused("mine");

    // A real record, copied from the tree it names into another folder.
    p.xtask(&["apply", "demo-hello", "--into", "tree"])
        .success();
    p.file("other/important.txt", "keep me");
    sh(p.root(), "cp -r tree/.patchkit other/");
    refused("other");

    // The tree itself is ours and replaced.
    p.xtask(&["apply", "demo-hello", "--into", "tree"])
        .success();
}

#[test]
fn verify_refuses_a_record_whose_path_leaves_the_tree() {
    let p = demo_project();
    p.xtask(&["apply", "demo-hello", "--into", "tree"])
        .success();
    p.xtask(&["verify", "tree"]).success();
    let record = p.root().join("tree/.patchkit/state.json");
    let text = std::fs::read_to_string(&record).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let path = json["patches"][0]["files"][0]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    for outside in ["../outside.c", "/etc/passwd"] {
        let forged = text.replace(&format!("\"{path}\""), &format!("\"{outside}\""));
        assert_ne!(forged, text);
        std::fs::write(&record, forged).unwrap();
        let run = p.xtask(&["verify", "tree"]);
        run.fails_with(1)
            .stderr_has("names a path outside the tree")
            .stderr_has(outside);
        assert!(
            !run.stdout.contains("exactly as recorded"),
            "{}",
            run.stdout
        );
    }
}

/// The demo with its source as a local `.tar.gz` pinned by sha256; returns
/// the project, the archive and its pin.
fn pinned_demo_archive() -> (Project, std::path::PathBuf, String) {
    let p = demo_project();
    sh(
        p.root(),
        "tar -cf - -C examples demo-hello | gzip -1n > demo.tar.gz",
    );
    let archive = p.root().join("demo.tar.gz");
    let pin = sha(&std::fs::read(&archive).unwrap());
    demo_source(&p, "demo.tar.gz", &format!("sha256 = \"{pin}\"\nstrip = 1"));
    (p, archive, pin)
}

/// Swaps the archive's bytes in place (the same inode and size; the patch
/// still applies) and rewrites the memo a build kept of it (path, size,
/// inode, times: sha256) to match, the forgery of issue #25; returns the
/// memo folder.
fn swap_and_forge_memo(p: &Project, archive: &Path, pin: &str) -> std::path::PathBuf {
    use std::os::unix::fs::MetadataExt;
    sh(
        p.root(),
        "echo '# SWAPPED' >> examples/demo-hello/Kbuild && \
         tar -cf - -C examples demo-hello | gzip -9n > swapped.tar.gz",
    );
    let mut swapped = std::fs::read(p.root().join("swapped.tar.gz")).unwrap();
    let size = std::fs::metadata(archive).unwrap().len() as usize;
    assert!(swapped.len() <= size);
    swapped.resize(size, 0);
    std::fs::OpenOptions::new()
        .write(true)
        .open(archive)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &swapped))
        .unwrap();
    // The memo an earlier version kept (path, size, inode, times: sha256),
    // rewritten to match the swapped file: the one it wrote, or one made
    // here under the name it would have.
    let memo_dir = p.cache().join("local-sha256");
    let kept = std::fs::read_dir(&memo_dir)
        .map(|mut r| r.next().map(|e| e.unwrap().path()))
        .ok()
        .flatten();
    let (memo, shown) = match kept {
        Some(memo) => {
            let text = std::fs::read_to_string(&memo).unwrap();
            let fields: Vec<&str> = text.trim_end().rsplitn(6, ' ').collect();
            (memo.clone(), fields[5].to_owned())
        }
        None => {
            let shown = archive.display().to_string();
            (memo_dir.join(sha(shown.as_bytes())), shown)
        }
    };
    let meta = std::fs::metadata(archive).unwrap();
    std::fs::create_dir_all(&memo_dir).unwrap();
    std::fs::write(
        &memo,
        format!(
            "{shown} {} {} {}.{} {}.{} {pin}\n",
            meta.len(),
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        ),
    )
    .unwrap();
    memo_dir
}

#[test]
fn a_forged_local_archive_memo_cannot_vouch_for_a_swapped_archive() {
    let (p, archive, pin) = pinned_demo_archive();
    p.xtask(&["fetch", "demo-hello"]).success();
    let memo_dir = swap_and_forge_memo(&p, &archive, &pin);
    // The memo is a hint: fetch does not call it a verification, and the
    // bytes are hashed as they are extracted.
    let run = p.xtask(&["fetch", "demo-hello"]);
    run.success().stderr_has("unchanged since hashed");
    assert!(!run.stderr.contains("verified"), "{}", run.stderr);
    p.xtask(&["apply", "demo-hello"])
        .fails_with(1)
        .stderr_has("does not hash to its pin")
        .stderr_has(&format!("expected sha256 {pin}"));
    assert_left_no_trace(&p, "does not hash to its pin");
    assert!(!dist(&p).exists(), "nothing published");
    // Without the forged memo, the swap is a plain mismatch.
    std::fs::remove_dir_all(&memo_dir).unwrap();
    p.xtask(&["fetch", "demo-hello"])
        .fails_with(1)
        .stderr_has("sha256 mismatch");
}

#[test]
fn a_forged_memo_over_a_kept_pristine_tree_ships_the_pinned_content() {
    let (p, archive, pin) = pinned_demo_archive();
    build(&p, &["--formats", "tar"]).success();
    let sums = std::fs::read_to_string(dist(&p).join("SHA256SUMS")).unwrap();
    swap_and_forge_memo(&p, &archive, &pin);
    // The pristine tree of the pin is kept (hashed against its listing),
    // so the swapped bytes are never read: the publication is the pin's.
    std::fs::remove_dir_all(p.root().join("target/patchkit/work/demo-hello/tree")).unwrap();
    std::fs::remove_dir_all(p.root().join("dist")).unwrap();
    build(&p, &["--formats", "tar"])
        .success()
        .stderr_has("pristine")
        .stderr_has("kept");
    assert_eq!(
        std::fs::read_to_string(dist(&p).join("SHA256SUMS")).unwrap(),
        sums
    );
    // Without it, the swapped bytes are read, and refused.
    std::fs::remove_dir_all(p.root().join("target/patchkit/work/demo-hello")).unwrap();
    build(&p, &["--formats", "tar"])
        .fails_with(1)
        .stderr_has("does not hash to its pin");
}
