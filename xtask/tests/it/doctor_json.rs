//! `doctor --json` as docs/doctor-json.md lays it out: the schema version,
//! the tool's version and commit, the knowledge revision and its source,
//! the OS, steps as data and `info` for informational findings. A snapshot
//! holds the layout itself (every key path and the types found there), not
//! the knowledge file's words, so a new fact does not move it and a new or
//! renamed key does.

use std::collections::BTreeMap;

use crate::support::doctor::{fault, FakeMachine};

/// Every key path of `value` (`faults[].next[].commands[].args[]`) and the
/// JSON types seen there, merged over all elements of each list.
fn shape(value: &serde_json::Value, path: &str, out: &mut BTreeMap<String, Vec<&'static str>>) {
    use serde_json::Value;
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    };
    let kinds = out.entry(path.to_owned()).or_default();
    if !kinds.contains(&kind) {
        kinds.push(kind);
        kinds.sort();
    }
    match value {
        Value::Array(items) => items
            .iter()
            .for_each(|v| shape(v, &format!("{path}[]"), out)),
        Value::Object(_) if path.ends_with(".env") || path.ends_with("firmware[].versions") => {}
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| shape(v, &format!("{path}.{k}"), out)),
        _ => {}
    }
}

/// An RDNA4 machine on Arch's linux-lts 6.12.48 with ROCm 7.1.1, a DKMS
/// package of ours not loaded, and a kernel log: most of the layout filled.
fn machine() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.12.48-1-lts")
        .amdgpu(1)
        .rocm("7.1.1-53", "1.1.0")
        .miopen()
        .dkms("amdgpu-expert-sched", "6.12.63.1", "6.12.48-1-lts")
        .file(
            "etc/os-release",
            "NAME=\"Arch Linux\"\nPRETTY_NAME=\"Arch Linux\"\nID=arch\nBUILD_ID=rolling\n",
        )
        .file("sys/class/drm/card0/device/fw_version/mec_fw_version", "0x000000a3\n")
        .file(
            "var/log/kern.log",
            "Jan 10 12:00:01 host kernel: amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)\nJan 10 12:00:01 host kernel: amdgpu 0000:03:00.0: amdgpu:  Faulty UTCL2 client ID: TCP (0x8)\n",
        );
    m
}

#[test]
fn the_json_layout_is_the_documented_one() {
    let m = machine();
    let (run, report) = m.report();
    run.fails_with(3);
    assert_eq!(report["schema"], 1);
    assert_eq!(report["tool"]["name"], "rocm-patchkit");
    assert_eq!(report["tool"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(report["tool"]["command"], "cargo xtask");
    let commit = report["tool"]["commit"].as_str().unwrap();
    assert!(!commit.is_empty(), "{commit}");
    assert_eq!(report["knowledge"]["source"], "checkout");
    let sha = report["knowledge"]["sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64, "{sha}");
    assert_eq!(report["machine"]["os"]["id"], "arch");
    assert_eq!(fault(&report, "kfd-abi-expert-sched")["status"], "info");
    let cwsr = fault(&report, "cwsr-expert-sched");
    assert_eq!(cwsr["next"][0]["role"], "do");
    assert!(cwsr["next"][0]["commands"][0]["args"].is_array());

    let mut out = BTreeMap::new();
    shape(&report, "", &mut out);
    let text: String = out
        .iter()
        .map(|(path, kinds)| {
            format!(
                "{}: {}\n",
                if path.is_empty() { "." } else { path },
                kinds.join("|")
            )
        })
        .collect();
    insta::assert_snapshot!("doctor_json_layout", text);
}

#[test]
fn the_knowledge_revision_names_its_source_and_follows_the_bytes() {
    let m = machine();
    let (_, checkout) = m.report();
    let dir = tempfile::tempdir().unwrap();
    let repo = crate::support::repo_root().join("knowledge");
    for name in ["faults.toml", "knobs.toml"] {
        std::fs::copy(repo.join(name), dir.path().join(name)).unwrap();
    }
    let given = dir.path().display().to_string();
    // The installed command's report with the knowledge folder given.
    let report_given = || -> serde_json::Value {
        let run = crate::support::Run::of(
            std::process::Command::new(env!("CARGO_BIN_EXE_rocm-patchkit"))
                .args(["--knowledge", &given, "doctor", "--json", "--root"])
                .arg(m.root())
                .env("HOME", "/home/user")
                .env("XDG_CACHE_HOME", m.cache_home())
                .output()
                .unwrap(),
        );
        serde_json::from_str(&run.stdout).unwrap()
    };
    let report = report_given();
    assert_eq!(report["knowledge"]["source"], "--knowledge");
    assert_eq!(
        report["knowledge"]["sha256"],
        checkout["knowledge"]["sha256"]
    );
    let mut faults = std::fs::read_to_string(dir.path().join("faults.toml")).unwrap();
    faults.push_str("\n# a newer file\n");
    std::fs::write(dir.path().join("faults.toml"), faults).unwrap();
    let newer = report_given();
    assert_ne!(
        newer["knowledge"]["sha256"],
        checkout["knowledge"]["sha256"]
    );
}
