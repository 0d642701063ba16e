//! `bench package` on a tiny DKMS tree: the report has a row per format
//! with our package, the reference tool's and our compressor alone (the
//! floor), and the JSON copy says the same. Structure only: timings are
//! never asserted.

use crate::package_support as fx;
use crate::support::{have_tool, Project};

#[test]
fn reports_every_format_against_its_reference_tool() {
    for tool in ["dpkg-deb", "rpmbuild", "bsdtar", "zstd", "tar", "gzip"] {
        if !have_tool(tool) {
            return;
        }
    }
    let project = Project::new();
    project.copy_from_repo(&["templates"]);
    let tree = project.root().join("module");
    fx::write_module(&tree, false);
    let run = project.xtask(&[
        "bench",
        "package",
        "--reps",
        "1",
        "--tree",
        tree.to_str().unwrap(),
    ]);
    run.success()
        .stdout_has("dpkg-deb --build")
        .stdout_has("rpmbuild -bb")
        .stdout_has("bsdtar | zstd")
        .stdout_has("tar | gzip")
        .stdout_has("floor s")
        .stdout_has("floor (")
        .stdout_has("goal total time <= 0.5 x reference: ");

    let path = project
        .root()
        .join("target/patchkit/work/bench-package/report.json");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(report["reps"], 1);
    let formats: Vec<&str> = report["formats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["format"].as_str().unwrap())
        .collect();
    assert_eq!(formats, ["deb", "rpm", "arch", "tar"]);
    for row in report["formats"].as_array().unwrap() {
        for side in ["ours", "reference", "floor"] {
            assert!(row[side]["size"].as_u64().unwrap() > 0, "{row}");
            assert_eq!(row[side]["seconds"].as_array().unwrap().len(), 1);
        }
        assert!(row["ours"]["peak_rss_mib"].as_f64().unwrap() > 0.0);
        assert!(row["time_ratio"].as_f64().unwrap() > 0.0);
    }
    assert!(report["floor_total_s"].as_f64().unwrap() > 0.0);
    assert!(report["best_possible_ratio"].as_f64().unwrap() > 0.0);
    let out = project
        .root()
        .join("target/patchkit/work/bench-package/out");
    for name in ["deb.tar", "rpm.cpio", "arch.tar", "tar.tar"] {
        let payload = out.join(format!("floor-{name}"));
        assert!(!payload.exists(), "{} was left behind", payload.display());
    }
    for key in [
        "sizes_no_larger",
        "total_time_at_most_half",
        "peak_under_256_mib",
    ] {
        assert!(report["goals"][key].is_boolean(), "goals.{key}");
    }
}
