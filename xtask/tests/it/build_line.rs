//! The one build line (issue #10): a patched tree is reused only when its
//! whole state record is what the build would make, tolerance included.

use std::path::Path;

use crate::support::demo::{build, demo_project, dist};
use crate::support::Project;

/// The demo module with the line after `patchkit_hello_init` changed, so
/// that the patch's first hunk needs fuzz 1, packed as a pinned local
/// archive (only a pinned tree is reused).
fn demo_needing_fuzz() -> Project {
    let p = demo_project();
    let src = p.root().join("examples/demo-hello/patchkit_hello.c");
    let text = std::fs::read_to_string(&src).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[13], "",
        "line 14 of the demo module is the blank line after init"
    );
    lines[13] = "/* a line the patch does not know */";
    std::fs::write(&src, lines.join("\n") + "\n").unwrap();
    pack_as_archive(&p);
    p
}

fn state_of(tree: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(tree.join(".patchkit/state.json")).unwrap()).unwrap()
}

#[test]
fn build_line_never_packages_a_tree_applied_with_fuzz() {
    let p = demo_needing_fuzz();
    let tree = p.root().join("target/patchkit/work/demo-hello/tree");
    p.xtask(&["apply", "demo-hello", "--fuzz", "2"]).success();
    assert_eq!(state_of(&tree)["tolerance"]["fuzz"], 2);

    // The fuzzed tree is not what a strict build makes: the build applies
    // again, strictly, and the patch's need for fuzz stops it.
    build(&p, &["--formats", "tar"])
        .fails_with(1)
        .stderr_has("0001-carry-a-module-version.patch")
        .stderr_has("--fuzz 1");
    assert!(!dist(&p).exists(), "nothing published");

    // With the fuzz in the recipe, the build applies with it and says so in
    // the manifest, hunk by hunk.
    let recipe = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&recipe).unwrap().replace(
        "file = \"0001-carry-a-module-version.patch\"",
        "file = \"0001-carry-a-module-version.patch\"\nfuzz = 1",
    );
    std::fs::write(&recipe, text).unwrap();
    build(&p, &["--formats", "tar"]).success();
    assert_eq!(state_of(&tree)["tolerance"]["fuzz"], 0);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist(&p).join("manifest.json")).unwrap()).unwrap();
    let placement = &manifest["patches"][0]["placement"];
    assert_eq!(placement[0]["fuzz"], 1, "{manifest:#}");
    assert_eq!(placement[0]["file"], "patchkit_hello.c", "{manifest:#}");
    assert_eq!(manifest["patches"][0]["applied"], "fuzz 1", "{manifest:#}");
}

/// The steps `plan --json` lists for `recipe`.
fn planned_steps(p: &Project, recipe: &str) -> serde_json::Value {
    let plan: serde_json::Value =
        serde_json::from_str(&p.xtask(&["plan", recipe, "--json"]).success().stdout).unwrap();
    plan["steps"].clone()
}

/// The steps the last build of `recipe` ran, from its work folder,
/// without the seconds each took (checked to be there).
fn steps_run(p: &Project, recipe: &str) -> serde_json::Value {
    let log = p
        .root()
        .join("target/patchkit/work")
        .join(recipe)
        .join("steps.json");
    let mut steps: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&log).unwrap()).unwrap();
    for step in steps.as_array_mut().unwrap() {
        let seconds = step.as_object_mut().unwrap().remove("seconds");
        assert!(
            seconds
                .as_ref()
                .and_then(|s| s.as_f64())
                .is_some_and(|s| s >= 0.0),
            "{log:?}: a step without its seconds: {step}"
        );
    }
    steps
}

#[test]
fn build_line_runs_exactly_the_planned_steps_in_order() {
    let p = demo_project();
    build(&p, &[]).success();
    let planned = planned_steps(&p, "demo-hello");
    let labels: Vec<&str> = planned
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "fetch",
            "ensure-applied",
            "verify",
            "publish-source",
            "render",
            "assemble",
            "package",
            "package",
            "package",
            "package",
            "publish"
        ]
    );
    assert_eq!(steps_run(&p, "demo-hello"), planned);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist(&p).join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["patches"][0]["applied"], "exact", "{manifest:#}");
    // Every file a step names is published, and nothing else but the
    // packaging files the render step writes.
    let mut named: Vec<String> = planned
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            let mut files: Vec<String> = s["files"]
                .as_array()
                .map(|a| a.iter().map(|f| f.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            files.extend(s["file"].as_str().map(str::to_owned));
            files
        })
        .chain(["SHA256SUMS".to_owned(), "manifest.json".to_owned()])
        .collect();
    named.sort();
    let published: Vec<String> = xtask::release::dist::hash_tree(&dist(&p), &[])
        .unwrap()
        .into_keys()
        .filter(|name| !name.starts_with("packaging/"))
        .chain(["SHA256SUMS".to_owned(), "manifest.json".to_owned()])
        .collect();
    let mut published = published;
    published.sort();
    published.dedup();
    assert_eq!(published, named);
}

#[test]
fn build_dispatches_on_the_kind_and_runs_the_same_line() {
    let p = crate::support::cwsr_off::project();
    let run = |args: &[&str]| {
        crate::support::Run::of(
            p.command(args)
                .env("SOURCE_DATE_EPOCH", crate::support::demo::EPOCH)
                .output()
                .unwrap(),
        )
    };
    run(&[
        "build",
        "amdgpu-cwsr-off",
        "--kernel",
        "6.12.117+deb12-amd64",
    ])
    .fails_with(2)
    .stderr_has(
        "--kernel is for `kind = \"dkms\"` recipes; recipe amdgpu-cwsr-off is `kind = \"config\"`",
    );
    run(&["build", "amdgpu-cwsr-off", "--formats", "deb"])
        .success()
        .stdout_has("published dist/amdgpu-cwsr-off")
        .stderr_has("step 7/8: package deb");
    let planned = planned_steps(&p, "amdgpu-cwsr-off");
    let run_steps = steps_run(&p, "amdgpu-cwsr-off");
    // The plan lists the recipe's formats; the run took --formats deb: its
    // package step and, in assemble, the Debian source package only.
    let kept: Vec<serde_json::Value> = planned
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["step"] != "package" || s["format"] == "deb")
        .map(|s| {
            let mut s = s.clone();
            let assemble = s["step"] == "assemble";
            if let Some(files) = s.get_mut("files").filter(|_| assemble) {
                files.as_array_mut().unwrap().retain(|f| {
                    let f = f.as_str().unwrap();
                    f.ends_with(".dsc") || f.ends_with(".debian.tar.xz")
                });
            }
            s
        })
        .collect();
    assert_eq!(run_steps.as_array().unwrap(), &kept);
    assert!(p
        .root()
        .join("dist/amdgpu-cwsr-off/amdgpu-cwsr-off_1.0-1_all.deb")
        .is_file());
    // The same line's no-op re-run, whichever command runs it.
    run(&["build-config", "amdgpu-cwsr-off", "--formats", "deb"])
        .success()
        .stdout_has("dist/amdgpu-cwsr-off is up to date: nothing to do");
}

/// The demo module as a pinned local archive, so its pristine tree is kept.
fn demo_from_archive() -> Project {
    let p = demo_project();
    pack_as_archive(&p);
    p
}

/// Points the demo recipe at `examples/demo-hello` packed as a pinned local
/// archive (a folder carries no pin, and only a pinned tree is kept).
fn pack_as_archive(p: &Project) {
    let status = std::process::Command::new("tar")
        .args(["-czf", "hello.tar.gz", "-C", "examples", "demo-hello"])
        .current_dir(p.root())
        .status()
        .unwrap();
    assert!(status.success());
    let recipe = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&recipe).unwrap().replace(
        "local = \"examples/demo-hello\"",
        "local = \"hello.tar.gz\"\nstrip = 1",
    );
    std::fs::write(&recipe, text).unwrap();
}

#[test]
fn build_line_extracts_the_pristine_tree_once_links_the_patched_one_and_keeps_the_orig() {
    use std::os::unix::fs::MetadataExt;
    let p = demo_from_archive();
    let work = p.root().join("target/patchkit/work/demo-hello");
    build(&p, &["--out", "dist/cold"]).success();
    let cold = xtask::release::dist::hash_tree(&p.root().join("dist/cold"), &[]).unwrap();

    // The patched tree made again from the kept pristine tree: the same bytes.
    std::fs::remove_dir_all(work.join("tree")).unwrap();
    build(&p, &["--out", "dist/warm"])
        .success()
        .stderr_has("pristine: ")
        .stderr_has("kept")
        .stderr_has("apply: linking")
        .stderr_has("compress: patchkit-hello_0.1.0.orig.tar.gz kept from");
    let warm = xtask::release::dist::hash_tree(&p.root().join("dist/warm"), &[]).unwrap();
    assert_eq!(warm, cold);
    // Unpatched files are links to the pristine ones; the patched file was
    // replaced, and the pristine tree kept the upstream bytes.
    let ino = |rel: &str| std::fs::metadata(work.join(rel)).unwrap().ino();
    assert_eq!(ino("tree/Makefile"), ino("pristine/Makefile"));
    assert_ne!(
        ino("tree/patchkit_hello.c"),
        ino("pristine/patchkit_hello.c")
    );
    let upstream = std::fs::read(p.root().join("examples/demo-hello/patchkit_hello.c")).unwrap();
    assert_eq!(
        std::fs::read(work.join("pristine/patchkit_hello.c")).unwrap(),
        upstream
    );
    assert_ne!(
        std::fs::read(work.join("tree/patchkit_hello.c")).unwrap(),
        upstream
    );

    // A pristine tree changed behind the tool's back is extracted again,
    // never used.
    let makefile = work.join("pristine/Makefile");
    let mut text = std::fs::read(&makefile).unwrap();
    text.extend_from_slice(b"# changed in place\n");
    std::fs::write(&makefile, text).unwrap();
    std::fs::remove_dir_all(work.join("tree")).unwrap();
    build(&p, &["--out", "dist/healed"])
        .success()
        .stderr_has("no longer matches its listing: extracting it again");
    let healed = xtask::release::dist::hash_tree(&p.root().join("dist/healed"), &[]).unwrap();
    assert_eq!(healed, cold);

    // So is a kept orig tarball that no longer hashes as recorded.
    let kept = work.join("orig/patchkit-hello_0.1.0.orig.tar.gz");
    let mut bytes = std::fs::read(&kept).unwrap();
    bytes.push(0);
    std::fs::write(&kept, bytes).unwrap();
    build(&p, &["--out", "dist/recompressed"])
        .success()
        .stderr_has("does not hash as recorded: compressing it again");
    let again = xtask::release::dist::hash_tree(&p.root().join("dist/recompressed"), &[]).unwrap();
    assert_eq!(again, cold);
}
