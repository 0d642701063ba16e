//! The one build line (issue #10): a patched tree is reused only when its
//! whole state record is what the build would make, tolerance included.

use std::path::Path;

use crate::build_dkms::{build, demo_project, dist};
use crate::support::Project;

/// The demo module with the line after `patchkit_hello_init` changed, so
/// that the patch's first hunk needs fuzz 1, packed as a pinned local
/// archive (a folder carries no pin, and only a pinned tree is reused).
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
}
