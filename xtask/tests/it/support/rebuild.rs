//! Our packages beside the ones the distributions' tools build from our
//! packaging files (dpkg-buildpackage, rpmbuild, makepkg): the demo built,
//! the sources those tools take, and comparisons of trees, rpm queries and
//! pacman fields.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::demo::{build, demo_project, dist, EPOCH};
use crate::support::tools::stdout_and_stderr as run;
use crate::support::tools::{bsdtar_unpack, pacman_info};
use crate::support::{have_tools, Project};

pub(crate) const ORIG: &str = "patchkit-hello_0.1.0.orig.tar.gz";
pub(crate) const SOURCE_DIR: &str = "patchkit-hello-0.1.0";
pub(crate) const PKGNAME: &str = "patchkit-hello-dkms";

/// The demo built for `formats` into its dist folder, when every one of
/// `tools` is installed (in CI a missing one fails the test instead).
pub(crate) fn demo_built(tools: &[&str], formats: &str) -> Option<(Project, PathBuf)> {
    if !have_tools(tools) {
        return None;
    }
    let p = demo_project();
    build(&p, &["--formats", formats]).success();
    let dist = dist(&p);
    Some((p, dist))
}

/// `cp <files> <dir>/`
pub(crate) fn copy_into(dir: &Path, files: &[PathBuf]) {
    std::fs::create_dir_all(dir).unwrap();
    for file in files {
        std::fs::copy(file, dir.join(file.file_name().unwrap())).unwrap();
    }
}

/// `<top>/SOURCES` for rpmbuild: the orig tarball, `dkms.conf` and the
/// patches of a dist folder, as its spec names them.
pub(crate) fn rpm_sources(dist: &Path, top: &Path) -> PathBuf {
    let sources = top.join("SOURCES");
    let mut files = vec![
        dist.join("source").join(ORIG),
        dist.join("packaging/dkms.conf"),
    ];
    files.extend(patches(dist));
    copy_into(&sources, &files);
    sources
}

/// `source/patches/*.patch` of a dist folder.
pub(crate) fn patches(dist: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dist.join("source/patches"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "the demo carries a patch");
    out
}

/// Every entry below `dir` by relative path: `d <mode>` for folders,
/// `f <mode>` plus the bytes for files (gzip members decompressed, as two
/// gzip writers may frame the same text differently), `l -> target` for
/// symlinks. Entries named in `skip` are left out.
fn tree(dir: &Path, skip: &[&str]) -> BTreeMap<String, (String, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            if skip.contains(&rel.as_str()) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let value = if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                (format!("l -> {}", target.display()), Vec::new())
            } else if meta.is_dir() {
                stack.push(path.clone());
                (format!("d {mode:o}"), Vec::new())
            } else {
                let bytes = std::fs::read(&path).unwrap();
                let bytes = if rel.ends_with(".gz") {
                    let mut text = Vec::new();
                    flate2::read::GzDecoder::new(&bytes[..])
                        .read_to_end(&mut text)
                        .unwrap();
                    text
                } else {
                    bytes
                };
                (format!("f {mode:o}"), bytes)
            };
            out.insert(rel, value);
        }
    }
    out
}

/// Asserts that the two trees hold the same entries, modes and bytes,
/// naming the first difference.
pub(crate) fn assert_same_tree(ours: &Path, theirs: &Path, skip: &[&str]) {
    let (a, b) = (tree(ours, skip), tree(theirs, skip));
    let names = |t: &BTreeMap<String, (String, Vec<u8>)>| t.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&a),
        names(&b),
        "entries differ: ours {}, rebuilt {}",
        ours.display(),
        theirs.display()
    );
    for (name, (kind, bytes)) in &a {
        let (their_kind, their_bytes) = &b[name];
        assert_eq!(
            kind, their_kind,
            "{name}: ours {kind}, rebuilt {their_kind}"
        );
        assert!(
            bytes == their_bytes,
            "{name} differs:\n--- ours\n{}\n--- rebuilt\n{}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(their_bytes)
        );
    }
}

/// Unpacks two packages with bsdtar below `scratch` (`ours/`, `theirs/`)
/// and asserts the trees are the same, `skip` left out.
pub(crate) fn assert_same_package(scratch: &Path, ours: &Path, theirs: &Path, skip: &[&str]) {
    let (a, b) = (scratch.join("ours"), scratch.join("theirs"));
    bsdtar_unpack(ours, &a);
    bsdtar_unpack(theirs, &b);
    assert_same_tree(&a, &b, skip);
}

/// Asserts that the Arch package makepkg wrote in `work` holds what ours in
/// `dist` does (makepkg's own metadata files aside); returns its file name.
pub(crate) fn assert_same_arch_package(scratch: &Path, dist: &Path, work: &Path) -> String {
    let pkg = format!("{PKGNAME}-0.1.0-1-any.pkg.tar.zst");
    let metadata = [".PKGINFO", ".BUILDINFO", ".MTREE"];
    assert_same_package(scratch, &dist.join(&pkg), &work.join(&pkg), &metadata);
    pkg
}

/// `KEY=value` assignments of a shell script, quotes removed.
pub(crate) fn assignments(script: &str) -> BTreeMap<String, String> {
    script
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(k, _)| k.starts_with("DKMS_") && !k.contains(' '))
        .map(|(k, v)| (k.to_owned(), v.trim_matches(['\'', '"']).to_owned()))
        .collect()
}

/// `rpm -qp --queryformat <format> <pkg>`: what rpm says of a package.
pub(crate) fn rpm_queryformat(pkg: &Path, format: &str) -> String {
    run(Command::new("rpm")
        .args(["-qp", "--queryformat", format])
        .arg(pkg))
}

/// `rpm -qp --scripts <pkg>`: the package's scriptlets.
pub(crate) fn rpm_scripts(pkg: &Path) -> String {
    run(Command::new("rpm").args(["-qp", "--scripts"]).arg(pkg))
}

/// The fields of `pacman -Qip` every Arch package of ours has and says as
/// makepkg's does.
pub(crate) const PACMAN_FIELDS: [&str; 6] = [
    "Name",
    "Version",
    "Description",
    "Architecture",
    "URL",
    "Licenses",
];

/// The fields named in `keys` of what `pacman -Qip` reads from an Arch
/// package.
pub(crate) fn pacman_fields(pkg: &Path, keys: &[&str]) -> BTreeMap<String, String> {
    pacman_info(pkg)
        .lines()
        .filter_map(|l| l.split_once(" : "))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .collect()
}

/// Runs `dpkg-buildpackage -us -uc` in `src` (whose parent is `work`) and
/// unpacks the .deb it builds and ours from `dist` (files and control area)
/// into `root/theirs` and `root/ours`.
pub(crate) fn dpkg_buildpackage_beside_ours(
    src: &Path,
    dist: &Path,
    work: &Path,
    root: &Path,
) -> (std::path::PathBuf, std::path::PathBuf) {
    dpkg_buildpackage_deb_beside_ours(src, dist, work, root, &format!("{PKGNAME}_0.1.0-1_all.deb"))
}

/// [`dpkg_buildpackage_beside_ours`] for the `.deb` named `deb`.
pub(crate) fn dpkg_buildpackage_deb_beside_ours(
    src: &Path,
    dist: &Path,
    work: &Path,
    root: &Path,
    deb: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    run(Command::new("dpkg-buildpackage")
        .args(["-us", "-uc"])
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .current_dir(src));
    let (ours, theirs) = (root.join("ours"), root.join("theirs"));
    for (pkg, dir) in [(dist.join(deb), &ours), (work.join(deb), &theirs)] {
        run(Command::new("dpkg-deb").arg("-x").arg(&pkg).arg(dir));
        run(Command::new("dpkg-deb")
            .arg("-e")
            .arg(pkg)
            .arg(dir.join("DEBIAN")));
    }
    (ours, theirs)
}
