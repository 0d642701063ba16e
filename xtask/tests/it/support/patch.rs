//! Fixtures for the patch engine tests: a small upstream written for these
//! tests, real git repositories (`support::upstream`), patches made by
//! `git format-patch` and `diff -urN`, and tar archives (including crafted,
//! hostile ones).

use std::path::{Path, PathBuf};

use xtask::apply::patch::tree::Tree;
use xtask::apply::patch::{stage, PatchInput, Tolerance};
use xtask::fetch::{Fetched, FetchedPatch, FetchedSource};
use xtask::input::recipe::Recipe;
use xtask::shared::report::Reporter;

use crate::support::upstream::Upstream;
use crate::support::Project;

/// A test recipe: its `[package]` table, then `source` (the `[source]`
/// table and any `[[patch]]`) as given, then a `[target]` for DKMS on
/// kernels >= 6.11 that builds the tarball only.
pub(crate) fn recipe_text(name: &str, version: &str, source: &str) -> String {
    format!(
        r#"
[package]
name = "{name}"
version = "{version}"
release = "1"
summary = "test"
description = "test"
license = "GPL-2.0-only"
maintainer = "t <t@patchkit.invalid>"

{source}
[target]
kind = "dkms"
kernel = ">=6.11"
formats = ["tar"]
"#
    )
}

/// Lines of a C file: `count` lines after a header naming `name`.
pub(crate) fn c_file(name: &str, count: usize) -> String {
    let mut s = format!("/* {name}: written for the rocm-patchkit tests */\n");
    for i in 1..=count {
        s.push_str(&format!("int {name}_value_{i} = {i};\n"));
    }
    s
}

/// The upstream tree of the fixtures: `drivers/amd/{a,b,c}.c`, `docs/README`.
pub(crate) fn upstream_files() -> Vec<(&'static str, String)> {
    vec![
        ("drivers/amd/a.c", c_file("a", 30)),
        ("drivers/amd/b.c", c_file("b", 30)),
        ("drivers/amd/c.c", c_file("c", 30)),
        ("drivers/amd/gone.c", c_file("gone", 3)),
        ("drivers/amd/tool.sh", "#!/bin/sh\necho tool\n".to_owned()),
        ("docs/README", "upstream readme\n".to_owned()),
    ]
}

/// Writes `files` below `dir`.
pub(crate) fn write_tree(dir: &Path, files: &[(&str, String)]) {
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Replaces line `n` (1-based) of `text`.
pub(crate) fn replace_line(text: &str, n: usize, with: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == n { with.to_owned() } else { l.to_owned() } + "\n")
        .collect()
}

/// An upstream repository plus a series of three `git format-patch` patches:
/// 0001 changes a.c line 10, 0002 changes b.c line 20 and adds new.c,
/// 0003 deletes gone.c, renames c.c to renamed.c and makes tool.sh
/// non-executable.
pub(crate) struct Series {
    pub(crate) repo: Upstream,
    pub(crate) base: String,
    pub(crate) patches: Vec<(String, Vec<u8>)>,
}

pub(crate) fn series(dir: &Path) -> Series {
    let repo = Upstream::init(&dir.join("upstream"));
    for (rel, text) in upstream_files() {
        repo.file(rel, &text);
    }
    std::fs::set_permissions(
        repo.path().join("drivers/amd/tool.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let base = repo.commit("upstream base");
    repo.git(&["checkout", "-q", "-b", "work"]);
    let a = replace_line(&c_file("a", 30), 10, "int a_value_10 = 1000; /* fixed */");
    repo.file("drivers/amd/a.c", &a);
    let one = repo.commit("a: fix value 10");
    let b = replace_line(&c_file("b", 30), 20, "int b_value_20 = 2000; /* fixed */");
    repo.file("drivers/amd/b.c", &b);
    repo.file("drivers/amd/new.c", &c_file("new", 5));
    let two = repo.commit("b: fix value 20, add new.c");
    std::fs::remove_file(repo.path().join("drivers/amd/gone.c")).unwrap();
    repo.git(&["mv", "drivers/amd/c.c", "drivers/amd/renamed.c"]);
    std::fs::set_permissions(
        repo.path().join("drivers/amd/tool.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let three = repo.commit("remove gone.c, rename c.c, tool.sh not executable");
    let patches = [
        ("0001-a.patch", one),
        ("0002-b.patch", two),
        ("0003-c.patch", three),
    ]
    .into_iter()
    .map(|(n, c)| (n.to_owned(), repo.format_patch(&c)))
    .collect();
    repo.git(&["checkout", "-q", "main"]);
    Series {
        repo,
        base,
        patches,
    }
}

/// The fixture [`series`] below `dir` and its base commit checked out into
/// `dir/tree`, the tree each patch test starts from.
pub(crate) fn series_at_base(dir: &Path) -> (Series, PathBuf) {
    let s = series(dir);
    let tree = dir.join("tree");
    s.repo.checkout(&s.base, &tree);
    (s, tree)
}

/// Patches as the engine takes them.
pub(crate) fn inputs(patches: &[(String, Vec<u8>)]) -> Vec<PatchInput> {
    patches
        .iter()
        .map(|(n, b)| PatchInput::new(n.clone(), b.clone()))
        .collect()
}

/// The error of a strict [`series`](xtask::apply::patch::apply::series) that must
/// fail, as text.
#[track_caller]
pub(crate) fn strict_refusal(tree: &mut Tree, patches: &[PatchInput]) -> String {
    xtask::apply::patch::apply::series(tree, patches, Tolerance::strict())
        .unwrap_err()
        .to_string()
}

/// Writes the patches to `dir` and returns them as fetched patches.
pub(crate) fn fetched_patches(dir: &Path, patches: &[(String, Vec<u8>)]) -> Vec<FetchedPatch> {
    std::fs::create_dir_all(dir).unwrap();
    patches
        .iter()
        .map(|(name, bytes)| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            FetchedPatch {
                name: name.clone(),
                path,
                sha256: xtask::shared::hash::sha256_hex(bytes),
            }
        })
        .collect()
}

pub(crate) fn fetched(source: FetchedSource, patches: Vec<FetchedPatch>) -> Fetched {
    Fetched { source, patches }
}

/// `apply_recipe` with strict tolerance and no reporting: the apply every
/// library test makes.
pub(crate) fn apply_strict(
    recipe: &Recipe,
    fetched: &Fetched,
    dest: &Path,
) -> anyhow::Result<stage::Report> {
    stage::apply_recipe(
        recipe,
        fetched,
        dest,
        xtask::apply::extract::Limits::DEFAULT,
        Tolerance::strict(),
        &Reporter::quiet(),
    )
}

/// One entry of a hand-made archive.
pub(crate) enum TarEntry<'a> {
    File(&'a str, &'a str),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    Hardlink(&'a str, &'a str),
    Fifo(&'a str),
    CharDevice(&'a str),
}

/// Writes a tar archive with raw names (nothing sanitised, so hostile
/// entries can be made), gzip-, xz- or zstd-compressed after its extension.
pub(crate) fn tar(path: &Path, entries: &[TarEntry]) {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        let (name, data, kind, link): (&str, &[u8], tar::EntryType, Option<&str>) = match entry {
            TarEntry::File(n, d) => (n, d.as_bytes(), tar::EntryType::Regular, None),
            TarEntry::Dir(n) => (n, b"", tar::EntryType::Directory, None),
            TarEntry::Symlink(n, t) => (n, b"", tar::EntryType::Symlink, Some(t)),
            TarEntry::Hardlink(n, t) => (n, b"", tar::EntryType::Link, Some(t)),
            TarEntry::Fifo(n) => (n, b"", tar::EntryType::Fifo, None),
            TarEntry::CharDevice(n) => (n, b"", tar::EntryType::Char, None),
        };
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(if kind == tar::EntryType::Directory {
            0o755
        } else {
            0o644
        });
        header.set_mtime(0);
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(link) = link {
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        builder.append(&header, data).unwrap();
    }
    write_compressed(path, builder.into_inner().unwrap());
}

/// Writes a tar archive to `path`, gzip-, xz- or zstd-compressed after its
/// extension (plain for any other).
pub(crate) fn write_compressed(path: &Path, tar: Vec<u8>) {
    let name = path.to_string_lossy();
    let out = if name.ends_with(".gz") {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, &tar).unwrap();
        e.finish().unwrap()
    } else if name.ends_with(".xz") {
        let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
        std::io::Write::write_all(&mut e, &tar).unwrap();
        e.finish().unwrap()
    } else if name.ends_with(".zst") {
        zstd::encode_all(&tar[..], 1).unwrap()
    } else {
        tar
    };
    std::fs::write(path, out).unwrap();
}

/// Every file below `dir` (not `.patchkit/`) with its bytes, sorted.
pub(crate) fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all = crate::support::snapshot(dir);
    all.retain(|(rel, _)| rel != ".patchkit" && !rel.starts_with(".patchkit/"));
    all
}

/// Names of the entries of `dir`.
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A project whose recipe `fix` carries the fixture series as curated files.
pub(crate) fn project_with_series() -> (Project, Series) {
    let project = Project::new();
    let s = series(project.root());
    let mut series = String::new();
    let mut entries = String::new();
    for (name, bytes) in &s.patches {
        project.file(&format!("patches/fix/{name}"), bytes);
        series.push_str(&format!("{name}\n"));
        entries.push_str(&format!("[[patch]]\nfile = \"{name}\"\n\n"));
    }
    project.file("patches/fix/series", series);
    project.recipe(
        "fix",
        &recipe_text(
            "fix",
            "0.1.0",
            &format!("[source]\nlocal = \"upstream\"\n\n{entries}"),
        ),
    );
    (project, s)
}
