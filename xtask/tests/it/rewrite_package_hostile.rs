//! The rewrite kind with small `.deb`s that `dpkg-deb -b` builds here: the
//! package it makes keeps the archive's modes (0600, 0440, setuid files
//! shipped as they were, not 0644/0755); a `.deb` whose `control` is not
//! the package the recipe names (`Package: dpkg`) is refused naming both;
//! a chain of symlinks that resolves outside the tree is refused at
//! extraction, before anything reads through it.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::codeobj;
use crate::support::tools;
use crate::support::{have_tools, Project};

const RECIPE: &str = "hipblaslt-debian-7.1.1-expert-sched-off";
const EPOCH: &[(&str, &str)] = &[("SOURCE_DATE_EPOCH", "1700000000")];
const LIB: &str = "usr/lib/x86_64-linux-gnu";
const KERNELS: &str = "usr/lib/x86_64-linux-gnu/hipblaslt/library";

/// A package tree as `dpkg-deb -b` takes it: `DEBIAN/control` with
/// `control`'s fields and a kernel file that switches expert scheduling on.
fn package_tree(dir: &Path, control: &str) {
    std::fs::create_dir_all(dir.join("DEBIAN")).unwrap();
    std::fs::write(dir.join("DEBIAN/control"), control).unwrap();
    std::fs::create_dir_all(dir.join(KERNELS)).unwrap();
    std::fs::write(
        dir.join(KERNELS).join("TensileLibrary_HH_gfx1201.co"),
        codeobj::gfx12_kernel_file(true),
    )
    .unwrap();
}

const CONTROL: &str = "Package: libhipblaslt1\nVersion: 7.1.1+dfsg-4\nArchitecture: amd64\n\
Maintainer: Debian ROCm Team <debian-ai@lists.debian.org>\nSection: libs\nPriority: optional\n\
Description: ROCm library for general matrix multiplication\n A test package.\n";

/// `dpkg-deb --root-owner-group -b` of `tree` into `out`, and its sha256.
fn build_deb(tree: &Path, out: &Path) -> String {
    tools::run(
        std::process::Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "-b"])
            .arg(tree)
            .arg(out),
    );
    xtask::shared::hash::sha256_file(out).unwrap()
}

/// A project whose rewrite recipe takes `deb` from `local`.
fn project_with(deb: &Path, sha256: &str) -> Project {
    let text =
        std::fs::read_to_string(crate::support::repo_root().join(format!("recipes/{RECIPE}.toml")))
            .unwrap();
    let pin = text
        .lines()
        .find_map(|l| l.strip_prefix("sha256 = \""))
        .map(|l| l.trim_end_matches('"').to_owned())
        .expect("the recipe's sha256");
    let text = text.replace(&pin, sha256).replacen(
        "[source]\n",
        &format!("[source]\nlocal = \"{}\"\n", deb.display()),
        1,
    );
    let p = Project::new();
    p.recipe(RECIPE, &text);
    p
}

/// `dpkg-deb -c`: path -> mode string of every entry.
fn modes(deb: &Path) -> BTreeMap<String, String> {
    tools::read_back("dpkg-deb", &["-c"], deb)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let path = f[5..].join(" ");
            let path = path.split(" -> ").next().unwrap().to_owned();
            (path, f[0].to_owned())
        })
        .collect()
}

fn ours(p: &Project) -> PathBuf {
    p.root()
        .join("dist")
        .join(RECIPE)
        .join("libhipblaslt1_7.1.1+dfsg-4+patchkit1_amd64.deb")
}

#[test]
fn the_rewritten_deb_keeps_the_archives_modes() {
    if !have_tools(&["dpkg-deb"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    package_tree(&tree, CONTROL);
    let lib = tree.join(LIB);
    for (name, mode) in [
        ("private.conf", 0o600),
        ("readonly.dat", 0o440),
        ("helper", 0o4755),
        ("grouped", 0o2755),
    ] {
        std::fs::write(lib.join(name), name).unwrap();
        std::fs::set_permissions(lib.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::set_permissions(
        tree.join(KERNELS).join("TensileLibrary_HH_gfx1201.co"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::fs::create_dir_all(tree.join("usr/share/private")).unwrap();
    std::fs::set_permissions(
        tree.join("usr/share/private"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let deb = dir.path().join("libhipblaslt1_7.1.1+dfsg-4_amd64.deb");
    let sha = build_deb(&tree, &deb);
    let p = project_with(&deb, &sha);
    p.xtask_with(&["build", RECIPE], EPOCH).success();
    let (theirs, ours) = (modes(&deb), modes(&ours(&p)));
    assert_eq!(ours, theirs);
    assert_eq!(theirs[&format!("./{LIB}/helper")], "-rwsr-xr-x");
    assert_eq!(theirs[&format!("./{LIB}/private.conf")], "-rw-------");
    assert_eq!(theirs["./usr/share/private/"], "drwx------");
}

#[test]
fn a_deb_whose_control_is_another_package_is_refused() {
    if !have_tools(&["dpkg-deb"]) {
        return;
    }
    for (field, value) in [
        ("Package", "dpkg"),
        ("Architecture", "arm64"),
        ("Version", "9.9.9-1"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        let original = CONTROL
            .lines()
            .find(|l| l.starts_with(&format!("{field}: ")))
            .unwrap();
        let control = CONTROL.replace(original, &format!("{field}: {value}"));
        package_tree(&tree, &control);
        let deb = dir.path().join("libhipblaslt1_7.1.1+dfsg-4_amd64.deb");
        let sha = build_deb(&tree, &deb);
        let p = project_with(&deb, &sha);
        p.xtask_with(&["build", RECIPE], EPOCH)
            .fails_with(1)
            .stderr_has(&format!("`{field}: {value}`"))
            .stderr_has(&format!("recipes/{RECIPE}.toml"));
        assert!(!p.root().join("dist").join(RECIPE).exists(), "{field}");
    }
}

#[test]
fn a_chain_of_links_that_leads_out_of_the_tree_is_refused() {
    if !have_tools(&["dpkg-deb"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    package_tree(&tree, CONTROL);
    // each link stays inside by its own text; followed, the chain climbs out
    let share = tree.join("usr/share");
    std::fs::create_dir_all(&share).unwrap();
    std::os::unix::fs::symlink(".", share.join("here")).unwrap();
    std::os::unix::fs::symlink("here/here/here/../../../../..", share.join("out")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../share/out/secret_gfx1201.co",
        tree.join(KERNELS).join("TensileLibrary_OUT_gfx1201.co"),
    )
    .unwrap();
    let deb = dir.path().join("libhipblaslt1_7.1.1+dfsg-4_amd64.deb");
    let sha = build_deb(&tree, &deb);
    let p = project_with(&deb, &sha);
    p.xtask_with(&["build", RECIPE], EPOCH)
        .fails_with(1)
        .stderr_has("share/out")
        .stderr_has("leads outside the tree when the links it goes through are followed");
    let work = p.root().join("target/patchkit/work").join(RECIPE);
    let left: Vec<_> = std::fs::read_dir(&work)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().contains("staging")),
        "no staging folder left: {left:?}"
    );
    assert!(!p.root().join("dist").join(RECIPE).exists());
}
