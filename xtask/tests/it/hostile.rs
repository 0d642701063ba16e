//! Hostile recipes (issue #15): values that reach packaging files are
//! refused at load time with `path:line:col` and exit status 2, spec text
//! cannot open an rpm section, and what is optional in README is optional.

use std::path::Path;
use std::process::Command;

use crate::support::demo::{build, demo_project, dist, EPOCH};
use crate::support::{have_tool, line_of, Project};

/// The demo recipe with `from` replaced by `to` (the replacement must happen).
fn demo_with(p: &Project, from: &str, to: &str) -> String {
    let path = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "the demo recipe holds {from:?}");
    let text = text.replace(from, to);
    std::fs::write(&path, &text).unwrap();
    text
}

#[test]
fn control_characters_and_long_summaries_are_refused_by_plan_with_their_place() {
    let summary = "Demo module of rocm-patchkit: a tiny out-of-tree kernel module";
    let long = "x".repeat(81);
    // (text of the demo, its replacement, the key, what the message says)
    let cases = [
        (summary, "carriage\\rreturn", "package.summary", "U+000D"),
        (summary, "an \\u001b[31mescape", "package.summary", "U+001B"),
        (summary, "a\\ttab", "package.summary", "U+0009"),
        (summary, "a nul\\u0000byte", "package.summary", "U+0000"),
        (summary, long.as_str(), "package.summary", "81 characters"),
        (
            "A minimal kernel module",
            "A minimal\\tkernel module",
            "package.description",
            "U+0009",
        ),
        (
            "A minimal kernel module",
            "A minimal\\rkernel module",
            "package.description",
            "U+000D",
        ),
    ];
    for (from, to, key, message) in cases {
        let p = demo_project();
        let text = demo_with(&p, from, to);
        let line = line_of(&text, &format!("{} =", key.trim_start_matches("package.")));
        p.xtask(&["plan", "demo-hello"])
            .fails_with(2)
            .stderr_has(&format!("recipes/demo-hello.toml:{line}:"))
            .stderr_has(&format!("`{key}`"))
            .stderr_has(message);
        p.xtask(&["list"]).success().stdout_has("INVALID");
        // Refused before anything is fetched or written.
        build(&p, &["--formats", "tar"])
            .fails_with(2)
            .stderr_has(message);
        assert!(!dist(&p).exists(), "{key}: nothing may be published");
        assert!(
            !p.root().join("target").exists() && !p.cache().exists(),
            "{key}: nothing may be fetched or applied"
        );
    }
}

#[test]
fn an_empty_patch_file_is_refused_by_plan() {
    let p = demo_project();
    p.file("patches/demo-hello/0001-carry-a-module-version.patch", "");
    let text = std::fs::read_to_string(p.root().join("recipes/demo-hello.toml")).unwrap();
    let line = line_of(&text, "file = \"0001-carry-a-module-version.patch\"");
    p.xtask(&["plan", "demo-hello"])
        .fails_with(2)
        .stderr_has(&format!(
            "recipes/demo-hello.toml:{line}:8: `patch[0].file`"
        ))
        .stderr_has("is empty");
}

#[test]
fn a_recipe_without_homepage_builds_every_format() {
    let p = demo_project();
    demo_with(
        &p,
        "homepage = \"https://docs.kernel.org/kbuild/modules.html\"\n",
        "",
    );
    build(&p, &[]).success();
    let dir = dist(&p);
    p.xtask(&["verify", "dist/demo-hello"]).success();
    if have_tool("dpkg-deb") {
        let out = Command::new("dpkg-deb")
            .arg("--field")
            .arg(dir.join("patchkit-hello-dkms_0.1.0-1_all.deb"))
            .output()
            .unwrap();
        let fields = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && fields.contains("Package: patchkit-hello-dkms"));
        assert!(!fields.contains("Homepage:"), "{fields}");
    }
    if have_tool("rpm") {
        let out = Command::new("rpm")
            .args(["-qp", "--queryformat", "%{URL}"])
            .arg(dir.join("patchkit-hello-dkms-0.1.0-1.noarch.rpm"))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "(none)");
    }
}

#[test]
fn a_newline_in_the_recipe_file_name_is_refused_before_anything_is_written() {
    let p = demo_project();
    let evil = "recipes/demo\ntouch PWNED.toml";
    std::fs::copy(
        p.root().join("recipes/demo-hello.toml"),
        p.root().join(evil),
    )
    .unwrap();
    std::fs::remove_file(p.root().join("recipes/demo-hello.toml")).unwrap();
    let run = p
        .command(&[
            "build-dkms",
            evil,
            "--kernel",
            "6.12.117+deb12-amd64",
            "--formats",
            "tar",
        ])
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .output()
        .unwrap();
    let run = crate::support::Run::of(run);
    run.fails_with(2).stderr_has("control character U+000A");
    assert!(!p.root().join("dist").exists(), "nothing may be published");
    p.xtask(&["plan", evil])
        .fails_with(2)
        .stderr_has("rename the file");
}

#[test]
fn spec_text_cannot_open_an_rpm_section_when_rebuilt_with_rpmbuild() {
    for tool in ["rpmbuild", "rpm"] {
        if !have_tool(tool) {
            return;
        }
    }
    // A line that rpm would read as a section or conditional is refused at
    // load time, at its own line.
    for hostile in [
        "%check",
        "%pre",
        "  %pretrans -p <lua>",
        "%if 0",
        "%include /etc/passwd",
    ] {
        let p = demo_project();
        let text = demo_with(
            &p,
            "It prints a line when loaded",
            &format!("{hostile}\ntouch INJECTED\nIt prints a line when loaded"),
        );
        let line = line_of(&text, hostile);
        p.xtask(&["plan", "demo-hello"])
            .fails_with(2)
            .stderr_has(&format!(
                "recipes/demo-hello.toml:{line}:1: `package.description`"
            ))
            .stderr_has("starts with `%`");
        build(&p, &["--formats", "rpm"]).fails_with(2);
        assert!(!dist(&p).exists());
    }
    // `%` inside a line stays text: rpmbuild of the shipped spec expands
    // nothing and opens no section.
    let p = demo_project();
    let marker = p.root().join("INJECTED");
    demo_with(
        &p,
        "It prints a line when loaded",
        &format!(
            "Text with %check and %pre inside, 100% done, %{{_bindir}} and %(touch {m}-expand)\n\
             It prints a line when loaded",
            m = marker.display()
        ),
    );
    build(&p, &["--formats", "rpm"]).success();

    let dist = dist(&p);
    let sources = p.root().join("rebuild/SOURCES");
    std::fs::create_dir_all(&sources).unwrap();
    let mut files = vec![
        dist.join("source/patchkit-hello_0.1.0.orig.tar.gz"),
        dist.join("packaging/dkms.conf"),
    ];
    for entry in std::fs::read_dir(dist.join("source/patches")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "patch") {
            files.push(path);
        }
    }
    for f in &files {
        std::fs::copy(f, sources.join(f.file_name().unwrap())).unwrap();
    }
    let top = p.root().join("rebuild");
    let out = Command::new("rpmbuild")
        .arg("-bb")
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg("--define")
        .arg(format!("_sourcedir {}", sources.display()))
        .arg(dist.join("packaging/rpm/patchkit-hello-dkms.spec"))
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rpmbuild: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !Path::new(&format!("{}-expand", marker.display())).exists(),
        "rpmbuild expanded %(...) of the description"
    );
    let rpm = top.join("RPMS/noarch/patchkit-hello-dkms-0.1.0-1.noarch.rpm");
    let query = |args: &[&str]| {
        let out = Command::new("rpm").args(args).arg(&rpm).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let scripts = query(&["-qp", "--scripts"]);
    for section in ["preinstall", "pretrans"] {
        assert!(
            !scripts.contains(section),
            "an injected {section} landed in the rebuilt rpm:\n{scripts}"
        );
    }
    let desc = query(&["-qp", "--queryformat", "%{DESCRIPTION}"]);
    for line in [
        "Text with %check and %pre inside",
        "100% done, %{_bindir}",
        "%(touch ",
    ] {
        assert!(desc.contains(line), "{line:?} is text of\n{desc}");
    }
}

#[test]
fn out_and_into_never_delete_what_the_user_put_there() {
    let p = demo_project();
    let mine = p.root().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("important.txt"), "keep me").unwrap();
    build(&p, &["--formats", "tar", "--out", "mine"])
        .fails_with(2)
        .stderr_has("mine holds files that are not a publication of rocm-patchkit");
    p.xtask(&["apply", "demo-hello", "--into", "mine"])
        .fails_with(2)
        .stderr_has("mine holds files that are not a tree applied by rocm-patchkit");
    assert_eq!(
        std::fs::read_to_string(mine.join("important.txt")).unwrap(),
        "keep me"
    );
    let names: Vec<_> = std::fs::read_dir(&mine).unwrap().collect();
    assert_eq!(names.len(), 1, "nothing was added to the user's folder");
    // The project root itself (`--out .`) is refused the same way.
    build(&p, &["--formats", "tar", "--out", "."]).fails_with(2);
    assert!(p.root().join("recipes/demo-hello.toml").is_file());

    // An empty folder, and then our own publication or tree, are replaced.
    for dir in ["pub", "tree"] {
        std::fs::create_dir_all(p.root().join(dir)).unwrap();
    }
    build(&p, &["--formats", "tar", "--out", "pub"]).success();
    build(&p, &["--formats", "deb", "--out", "pub"]).success();
    assert!(p
        .root()
        .join("pub/patchkit-hello-dkms_0.1.0-1_all.deb")
        .is_file());
    p.xtask(&["apply", "demo-hello", "--into", "tree"])
        .success();
    p.xtask(&["apply", "demo-hello", "--into", "tree"])
        .success();
    assert!(p.root().join("tree/.patchkit/state.json").is_file());
}
