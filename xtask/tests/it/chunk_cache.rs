//! The chunk cache through the real binary: `build-dkms` of the demo
//! recipe, grown with a few MiB of generated sources so that its payloads
//! span several chunks, writes byte-identical files with the cache empty,
//! full, and after one source file changes; the changed build reuses the
//! chunks of the files it did not touch. `--compression` and the recipe's
//! `package.compression` pick the .deb's members, and dpkg-deb reads them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::demo::{build, demo_project, dist};
use crate::support::{have_tool, snapshot, Project};

/// `count` generated C-like sources of `kib` KiB each, different in every
/// file, repetitive as register headers are.
fn grow(p: &Project, count: usize, kib: usize) {
    let mut state = 11u64;
    for f in 0..count {
        let mut text = String::with_capacity(kib << 10);
        while text.len() < kib << 10 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            text.push_str(&format!(
                "#define mmREG_{f}_{:05x}__FIELD_{}_MASK 0x{:08x}L\n",
                (state >> 40) & 0xfffff,
                (state >> 20) % 97,
                state >> 32
            ));
        }
        p.file(&format!("examples/demo-hello/regs/reg_{f:02}.h"), text);
    }
}

fn chunks_dir(p: &Project) -> PathBuf {
    p.root().join("target/patchkit/work/chunks")
}

/// Every published file (path relative to the dist folder) and its bytes.
fn published(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    snapshot(dir).into_iter().collect()
}

/// Builds into a fresh dist folder and returns what it published.
fn build_fresh(p: &Project, extra: &[&str]) -> BTreeMap<String, Vec<u8>> {
    let _ = std::fs::remove_dir_all(dist(p));
    build(p, extra).success();
    published(&dist(p))
}

/// Pieces in the cache, per codec folder.
fn pieces(p: &Project) -> BTreeMap<String, usize> {
    let Ok(tags) = std::fs::read_dir(chunks_dir(p)) else {
        return BTreeMap::new();
    };
    tags.map(|t| {
        let t = t.unwrap();
        let n = std::fs::read_dir(t.path())
            .unwrap()
            .filter(|e| {
                !e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count();
        (t.file_name().to_string_lossy().into_owned(), n)
    })
    .collect()
}

fn assert_same(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>, what: &str) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: other files"
    );
    for (name, bytes) in a {
        assert!(bytes == &b[name], "{what}: {name} differs");
    }
}

#[test]
fn the_cache_changes_speed_never_output() {
    let p = demo_project();
    grow(&p, 12, 1024);

    let cold = build_fresh(&p, &[]);
    let filled = pieces(&p);
    let gz = filled
        .iter()
        .find(|(tag, _)| tag.starts_with("gzip6-"))
        .map(|(t, n)| (t.clone(), *n))
        .expect("the tar.gz chunks are cached");
    assert!(
        gz.1 >= 4,
        "the tar.gz payloads were cut in too few chunks: {filled:?}"
    );
    assert!(filled.keys().any(|t| t.starts_with("xz2-")), "{filled:?}");
    assert!(
        filled.keys().any(|t| t.starts_with("zstd9-long27")),
        "{filled:?}"
    );

    let _ = std::fs::remove_dir_all(dist(&p));
    let run = build(&p, &[]);
    let warm = published(&dist(&p));
    assert_same(&cold, &warm, "a build from a full cache");
    // Each package says what it took from the cache: everything.
    let noted: Vec<&str> = run
        .success()
        .stderr
        .lines()
        .filter(|l| l.starts_with("wrote ") && l.contains(" chunks from the cache)"))
        .collect();
    assert!(noted.len() >= 4, "{}", run.stderr);
    for line in noted {
        let counts = line.rsplit("; ").next().unwrap();
        let mut n = counts.split(' ').filter_map(|w| w.parse::<u64>().ok());
        let (hits, all) = (n.next().unwrap(), n.next().unwrap());
        assert!(hits == all && all > 0, "{line}");
    }
    assert_eq!(
        pieces(&p),
        filled,
        "a build from a full cache compressed something"
    );

    // One source file changes: the build from the cache writes what a
    // build without one writes, and compresses only the changed chunks.
    let reg = p.root().join("examples/demo-hello/regs/reg_05.h");
    let mut text = std::fs::read_to_string(&reg).unwrap();
    text.push_str("#define mmREG_CHANGED 0x1L\n");
    std::fs::write(&reg, text).unwrap();
    let changed = build_fresh(&p, &[]);
    // The orig and DKMS tarballs each get the changed file's chunk anew;
    // the Arch source tarball holds the (changed) orig tarball whole.
    let added = pieces(&p)[&gz.0] - gz.1;
    assert!(
        added > 0 && added < gz.1,
        "one changed file recompressed {added} of {} tar.gz chunks",
        gz.1
    );
    std::fs::remove_dir_all(chunks_dir(&p)).unwrap();
    let changed_cold = build_fresh(&p, &[]);
    assert_same(&changed, &changed_cold, "a changed build from the cache");
    assert!(
        cold.iter()
            .any(|(name, bytes)| changed.get(name) != Some(bytes)),
        "the change reached no package"
    );
}

#[test]
fn compression_picks_the_deb_members_and_dpkg_deb_reads_them() {
    let p = demo_project();
    let deb = "patchkit-hello-dkms_0.1.0-1_all.deb";
    let members = |p: &Project| {
        let out = Command::new("ar")
            .arg("t")
            .arg(dist(p).join(deb))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    build_fresh(&p, &["--formats", "deb", "--compression", "zstd:3"]);
    assert_eq!(
        members(&p),
        "debian-binary\ncontrol.tar.zst\ndata.tar.zst\n"
    );
    let manifest = std::fs::read_to_string(dist(&p).join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"deb-compression\": \"zstd:3\""),
        "{manifest}"
    );
    if have_tool("dpkg-deb") {
        let contents = crate::support::tools::stdout(
            Command::new("dpkg-deb")
                .arg("--contents")
                .arg(dist(&p).join(deb)),
        );
        assert!(contents.contains("patchkit_hello.c"), "{contents}");
    }

    // The recipe's choice, and the flag over it.
    let recipe = p.root().join("recipes/demo-hello.toml");
    let text = std::fs::read_to_string(&recipe).unwrap().replacen(
        "license =",
        "compression = \"gzip:9\"\nlicense =",
        1,
    );
    std::fs::write(&recipe, text).unwrap();
    build_fresh(&p, &["--formats", "deb"]);
    assert_eq!(members(&p), "debian-binary\ncontrol.tar.gz\ndata.tar.gz\n");
    build_fresh(&p, &["--formats", "deb", "--compression", "xz"]);
    assert_eq!(members(&p), "debian-binary\ncontrol.tar.xz\ndata.tar.xz\n");

    build(&p, &["--compression", "xz:7"])
        .fails_with(2)
        .stderr_has("the xz level must be a number from 0 to 6");
}
