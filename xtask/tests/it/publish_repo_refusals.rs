//! What `publish-repo` refuses, saying what and where, with nothing
//! published: a dist folder changed after it was published, a folder that is
//! not one, a GnuPG home without a signing key or a key it does not hold, a
//! URL apt, dnf and pacman could not take, and an output folder holding the
//! user's files (left as it was).

use crate::support::have_tools;
use crate::support::repos::{built, publish, TestKey};

const URL: &str = "https://packages.example.invalid/rocm-patchkit";

#[test]
fn a_changed_dist_folder_is_refused_by_name_and_nothing_is_published() {
    if !have_tools(&["gpg"]) {
        return;
    }
    let (p, dists) = built();
    let key = TestKey::new("refusals");
    let deb = dists[1].join("amdgpu-cwsr-off_1.0-1_all.deb");
    let mut bytes = std::fs::read(&deb).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&deb, bytes).unwrap();
    let to = p.root().join("repo");
    let run = publish(&p, &dists, &to, URL, &key);
    run.fails_with(1)
        .stderr_has("amdgpu-cwsr-off does not match its SHA256SUMS")
        .stderr_has("amdgpu-cwsr-off_1.0-1_all.deb: sha256");
    assert!(
        !to.exists(),
        "a repository was published from a changed dist folder"
    );
    let not_dist = p.root().join("recipes");
    publish(&p, &[not_dist], &to, URL, &key)
        .fails_with(2)
        .stderr_has("is not a published dist folder");
}

#[test]
fn keys_urls_and_output_folders_are_checked_before_anything_is_written() {
    if !have_tools(&["gpg"]) {
        return;
    }
    let (p, dists) = built();
    let to = p.root().join("repo");
    let empty = TestKey::new("empty");
    std::fs::remove_dir_all(empty.home()).unwrap();
    std::fs::create_dir(empty.home()).unwrap();
    std::fs::set_permissions(
        empty.home(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    publish(&p, &dists, &to, URL, &empty)
        .fails_with(2)
        .stderr_has("holds no secret key that can sign");

    let key = TestKey::new("checked");
    let mut args = vec!["publish-repo".to_owned()];
    args.extend(dists.iter().map(|d| d.display().to_string()));
    let home = key.home().display().to_string();
    let to_text = to.display().to_string();
    let with = |extra: &[&str]| {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend_from_slice(&["--to", &to_text, "--gnupghome", &home]);
        all.extend_from_slice(extra);
        p.xtask(&all)
    };
    with(&["--url", URL, "--key", "nobody@nowhere.invalid"])
        .fails_with(2)
        .stderr_has("no secret key that can sign matches `nobody@nowhere.invalid`");
    with(&["--url", "https://example.org/it's here"])
        .fails_with(2)
        .stderr_has("--url");
    with(&["--url", "not a url"])
        .fails_with(2)
        .stderr_has("is not a URL");
    with(&["--url", URL, "--suite", "stable/main"])
        .fails_with(2)
        .stderr_has("--suite");
    assert!(!to.exists());

    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("notes.txt"), "mine").unwrap();
    with(&["--url", URL])
        .fails_with(2)
        .stderr_has("not a publication of rocm-patchkit");
    assert_eq!(
        std::fs::read_to_string(to.join("notes.txt")).unwrap(),
        "mine"
    );
}
