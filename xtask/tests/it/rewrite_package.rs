//! A rewrite recipe built from Debian's real `libhipblaslt1` 7.1.1+dfsg-4
//! (the `.deb` `.ci/setup` keeps, served from the test HTTP server on
//! 127.0.0.1 through the recipe's `url`, or read through `local`): the
//! output takes the place of Debian's package (same paths and modes, only
//! kernel files differ, none with an expert-scheduling site left, lintian
//! says nothing new), is byte-reproducible, and a wrong pin is refused
//! naming `source.sha256`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::http::{Reply, Server};
use crate::support::tools;
use crate::support::{ci, have_tools, Project};

const RECIPE: &str = "hipblaslt-debian-7.1.1-expert-sched-off";
const DEB: &str = "libhipblaslt1_7.1.1+dfsg-4_amd64.deb";
const EPOCH: &[(&str, &str)] = &[("SOURCE_DATE_EPOCH", "1700000000")];
const OURS: &str = "libhipblaslt1_7.1.1+dfsg-4+patchkit1_amd64.deb";

/// Debian's `.deb`, as `.ci/setup` keeps it; `None` (a skip) only outside CI.
fn debian_deb() -> Option<PathBuf> {
    let dir = std::env::var_os("PATCHKIT_DEBIAN_DEBS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocm-patchkit/debs"));
    let path = dir.join(DEB);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        !ci(),
        "{} is missing and CI=true: .ci/setup must keep it",
        path.display()
    );
    eprintln!("skipping: {} is missing (run .ci/setup)", path.display());
    None
}

/// The repository's recipe with `extra` lines added to its `[source]`.
fn recipe_with_source(extra: &str) -> String {
    let text =
        std::fs::read_to_string(crate::support::repo_root().join(format!("recipes/{RECIPE}.toml")))
            .unwrap();
    text.replacen("[source]\n", &format!("[source]\n{extra}\n"), 1)
}

/// `dpkg-deb -c`: path -> (mode, owner) of every entry.
fn listing(deb: &Path) -> BTreeMap<String, (String, String)> {
    tools::read_back("dpkg-deb", &["-c"], deb)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let path = f[5..].join(" ");
            let path = path.split(" -> ").next().unwrap().to_owned();
            (path, (f[0].to_owned(), f[1].to_owned()))
        })
        .collect()
}

fn unpack(deb: &Path, dir: &Path) {
    tools::read_back("dpkg-deb", &["-x", &deb.display().to_string()], dir);
}

/// lintian's tags of a package, its name and version left out: (level, tag, context).
fn lintian_tags(deb: &Path) -> BTreeSet<String> {
    let out = tools::tool(
        "lintian",
        &["--pedantic", "--display-info", "--tag-display-limit", "0"],
        deb,
    );
    out.stdout
        .lines()
        .filter(|l| l.len() > 2 && l.as_bytes()[1] == b':' && !l.starts_with("N:"))
        .map(|l| {
            let (level, rest) = l.split_at(2);
            let rest = rest.trim_start();
            let rest = rest.split_once(": ").map_or(rest, |(_, r)| r);
            format!("{level} {rest}")
        })
        .collect()
}

#[test]
fn debian_hipblaslt_rewritten_takes_the_place_of_debians_package() {
    let Some(debian) = debian_deb() else { return };
    if !have_tools(&["dpkg-deb", "lintian"]) {
        return;
    }
    let bytes = std::fs::read(&debian).unwrap();
    let server = Server::start();
    server.route(&format!("/pool/{DEB}"), Reply::Bytes(bytes));
    let p = Project::new();
    p.recipe(
        RECIPE,
        &recipe_with_source(&format!(
            "url = \"{}\"",
            server.url(&format!("/pool/{DEB}"))
        )),
    );
    let started = std::time::Instant::now();
    p.xtask_with(&["build", RECIPE], EPOCH).success();
    eprintln!("cold build: {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(server.hits(&format!("/pool/{DEB}")), 1);
    let dist = p.root().join("dist").join(RECIPE);
    let ours = dist.join(OURS);

    // Built from the pinned .deb; the manifest records the rewrite.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("manifest.json")).unwrap()).unwrap();
    let pin = tools::stdout(std::process::Command::new("sha256sum").arg(&debian));
    let pin = pin.split_whitespace().next().unwrap();
    assert_eq!(manifest["source"]["pin"], format!("sha256 {pin}"));
    assert_eq!(manifest["kind"], "rewrite");
    let rewrite = &manifest["rewrites"][0];
    assert_eq!(rewrite["transform"], "expert-sched-off");
    assert_eq!(rewrite["sites"], 44086, "{rewrite:#}");
    let rewritten: BTreeSet<String> = rewrite["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(rewritten.len(), 263);
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    assert!(sums.contains(OURS), "{sums}");

    // The same paths and modes as Debian's.
    assert_eq!(listing(&ours), listing(&debian));
    let info = tools::deb_info(&ours);
    assert!(info.contains("Version: 7.1.1+dfsg-4+patchkit1"), "{info}");
    assert!(
        info.contains("Depends: libamdhip64-6 (>= 6.1.5), libc6 (>= 2.38)"),
        "{info}"
    );
    assert!(info.contains("Maintainer: Debian ROCm Team"), "{info}");
    assert!(info.contains("rewritten by rocm-patchkit"), "{info}");
    // apt sees an upgrade over Debian's, and Debian's next revision supersedes it.
    for (op, other) in [("gt", "7.1.1+dfsg-4"), ("lt", "7.1.1+dfsg-5")] {
        let ok = std::process::Command::new("dpkg")
            .args(["--compare-versions", "7.1.1+dfsg-4+patchkit1", op, other])
            .status()
            .unwrap()
            .success();
        assert!(ok, "7.1.1+dfsg-4+patchkit1 {op} {other}");
    }

    // Only kernel files differ, exactly those the manifest names, and none
    // of them switches expert scheduling on any more (doctor's scanner).
    let trees = tempfile::tempdir().unwrap();
    let (a, b) = (trees.path().join("debian"), trees.path().join("ours"));
    unpack(&debian, &a);
    unpack(&ours, &b);
    let (a_files, b_files) = (crate::support::snapshot(&a), crate::support::snapshot(&b));
    assert_eq!(a_files.len(), b_files.len());
    let mut differ = BTreeSet::new();
    for ((pa, ba), (pb, bb)) in a_files.iter().zip(&b_files) {
        assert_eq!(pa, pb);
        if ba != bb {
            differ.insert(pa.clone());
            match xtask::gpu::codeobj::judge_bytes(bb) {
                xtask::gpu::codeobj::FileVerdict::Off => {}
                other => panic!("{pa} after the rewrite: {other:?}"),
            }
        }
    }
    assert_eq!(differ, rewritten);

    // lintian: nothing new against Debian's own package.
    let started = std::time::Instant::now();
    let (theirs, new) = (lintian_tags(&debian), lintian_tags(&ours));
    eprintln!("lintian of both: {:.1}s", started.elapsed().as_secs_f64());
    let added: Vec<&String> = new.difference(&theirs).collect();
    assert!(
        added.is_empty(),
        "lintian tags ours has and Debian's has not: {added:#?}"
    );

    // A second build, into another folder, gives the same bytes.
    let again = p.root().join("again");
    let started = std::time::Instant::now();
    p.xtask_with(
        &["build", RECIPE, "--out", &again.display().to_string()],
        EPOCH,
    )
    .success();
    eprintln!("second build: {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(
        std::fs::read(again.join(OURS)).unwrap(),
        std::fs::read(&ours).unwrap()
    );
    assert_eq!(
        std::fs::read(again.join("SHA256SUMS")).unwrap(),
        std::fs::read(dist.join("SHA256SUMS")).unwrap()
    );
}

#[test]
fn a_wrong_pin_of_the_deb_is_refused_naming_the_recipe_key() {
    let Some(debian) = debian_deb() else { return };
    let p = Project::new();
    let text = recipe_with_source(&format!("local = \"{}\"", debian.display())).replace(
        "05159cd3ce6c5c3914c46a1cafd2be4d288b9ae5e7cda87de1beaff3c0c00542",
        &"ab".repeat(32),
    );
    p.recipe(RECIPE, &text);
    p.xtask_with(&["build", RECIPE], EPOCH)
        .fails_with(1)
        .stderr_has("`source.sha256`")
        .stderr_has(&"ab".repeat(32));
    assert!(!p.root().join("dist").join(RECIPE).exists());
}
