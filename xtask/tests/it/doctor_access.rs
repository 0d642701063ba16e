//! doctor on the GPU devices of fake machines: `/dev/kfd` and a render
//! node a user is not allowed to open (real device nodes, made with mknod:
//! root only), a container started without the devices, a machine whose
//! amdgpu made no `/dev/kfd`, each with the command that fixes it; and the
//! firmware versions amdgpu publishes in sysfs, in the text and `--json`.

use std::os::unix::fs::PermissionsExt;

use crate::support::doctor::FakeMachine;
use crate::support::{ci, is_root};

const PASSWD: &str =
    "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice:/home/alice:/bin/bash\n";

/// An RDNA4 machine with ROCm and an account `alice`.
fn machine(group: &str) -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.18.5-arch1-1")
        .amdgpu(1)
        .rocm("7.1.1-53", "1.1.0")
        .file("etc/passwd", PASSWD)
        .file("etc/group", group)
        .file("sys/class/drm/renderD128/device/vendor", "0x1002\n");
    m
}

/// A character device node (`/dev/null`'s numbers: doctor never opens
/// it) owned by root and group `gid`, mode `mode`.
fn device(m: &FakeMachine, rel: &str, gid: u32, mode: u32) {
    let path = m.root().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: NUL-terminated paths that live across the calls.
    unsafe {
        assert_eq!(
            libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)),
            0
        );
        assert_eq!(libc::chown(c.as_ptr(), 0, gid), 0);
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn problems(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["machine"]["access"]["problems"].as_array().unwrap()
}

#[test]
fn a_user_outside_the_render_group_is_told_to_join_it() {
    if !is_root() {
        assert!(!ci(), "CI must run the device-node tests as root");
        eprintln!("skipping: making device nodes needs root");
        return;
    }
    let m = machine("root:x:0:\nvideo:x:44:\nrender:x:993:\nalice:x:1000:\n");
    device(&m, "dev/kfd", 993, 0o660);
    device(&m, "dev/dri/renderD128", 993, 0o660);
    let (_, report) = FakeMachine::report_with(&m, &["--user", "alice"]);
    let access = &report["machine"]["access"];
    assert_eq!(access["user"], "alice (uid 1000)");
    let kfd = &access["devices"][0];
    assert_eq!(kfd["path"], "/dev/kfd");
    assert_eq!(kfd["mode"], "crw-rw----");
    assert_eq!(
        (kfd["owner"].as_str(), kfd["group"].as_str()),
        (Some("root"), Some("render"))
    );
    assert_eq!(kfd["usable"], false);
    let p = problems(&report);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(
        p[0]["what"],
        "alice (uid 1000) cannot open /dev/kfd (crw-rw---- root:render), /dev/dri/renderD128 (crw-rw---- root:render) read-write"
    );
    assert_eq!(
        p[0]["fix"],
        "sudo usermod -aG render,video alice, then log out and in again"
    );
    m.doctor(&["--user", "alice"])
        .stdout_has("  devices    /dev/kfd crw-rw---- root:render: not usable\n")
        .stdout_has("  problem    alice (uid 1000) cannot open /dev/kfd")
        .stdout_has(
            "             fix: sudo usermod -aG render,video alice, then log out and in again\n",
        );

    // in the group: usable, no problem; root may always
    m.file(
        "etc/group",
        "root:x:0:\nvideo:x:44:alice\nrender:x:993:bob,alice\n",
    );
    let (_, report) = FakeMachine::report_with(&m, &["--user", "alice"]);
    let kfd = &report["machine"]["access"]["devices"][0];
    assert_eq!(
        (kfd["usable"].as_bool(), kfd["how"].as_str()),
        (Some(true), Some("group render"))
    );
    assert!(problems(&report).is_empty(), "{report:#}");
    let (_, report) = FakeMachine::report_with(&m, &["--user", "root"]);
    assert_eq!(report["machine"]["access"]["devices"][1]["how"], "root");

    // a device only its owner may open: a udev rule, not a group, fixes it
    device(&m, "dev/kfd.tmp", 993, 0o600);
    std::fs::rename(m.root().join("dev/kfd.tmp"), m.root().join("dev/kfd")).unwrap();
    let (_, report) = FakeMachine::report_with(&m, &["--user", "alice"]);
    let fix = problems(&report)[0]["fix"].as_str().unwrap().to_owned();
    assert!(fix.contains("GROUP=\"render\", MODE=\"0660\""), "{fix}");
}

#[test]
fn a_device_that_is_no_device_node_is_not_usable() {
    let m = machine("render:x:993:alice\n");
    m.file("dev/kfd", "a copy of the file, not the device");
    let (_, report) = FakeMachine::report_with(&m, &["--user", "alice"]);
    let kfd = &report["machine"]["access"]["devices"][0];
    assert_eq!(kfd["usable"], false, "{kfd:#}");
    assert_eq!(kfd["how"], "is a file, not a device");
    let p = problems(&report);
    let kfd = p
        .iter()
        .find(|p| p["what"].as_str().unwrap().contains("/dev/kfd"))
        .unwrap_or_else(|| panic!("{p:#?}"));
    assert!(
        kfd["fix"].as_str().unwrap().contains("no device node here"),
        "{p:#?}"
    );
    assert!(
        p.iter()
            .any(|p| p["what"] == "no /dev/dri/renderD* of an AMD GPU"),
        "{p:#?}"
    );
    // without --user below --root: listed, not judged
    let (_, report) = m.report();
    let access = &report["machine"]["access"];
    assert!(access["user"].is_null());
    assert!(access["devices"][0]["usable"].is_null());
    m.doctor(&[]).stdout_has(
        "  access     not judged below --root: give --user NAME, a user of that machine\n",
    );
    // a Latin-1 byte in the account files hides no account
    std::fs::write(
        m.root().join("etc/passwd"),
        b"ren\xe9:x:1001:1001:Ren\xe9:/home/rene:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n",
    )
    .unwrap();
    let (_, report) = FakeMachine::report_with(&m, &["--user", "alice"]);
    assert_eq!(report["machine"]["access"]["user"], "alice (uid 1000)");
    let (_, report) = FakeMachine::report_with(&m, &["--user", "mallory"]);
    assert!(problems(&report)[0]["what"]
        .as_str()
        .unwrap()
        .contains("no user mallory in the machine's /etc/passwd"));
}

#[test]
fn a_container_without_the_devices_is_told_how_to_start() {
    let m = machine("render:x:993:alice\n");
    m.file(".dockerenv", "");
    let (_, report) = FakeMachine::report_with(&m, &["--user", "alice"]);
    let access = &report["machine"]["access"];
    assert_eq!(access["container"], "/.dockerenv");
    assert_eq!(access["devices"][0]["mode"], serde_json::Value::Null);
    let p = problems(&report);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(p[0]["what"]
        .as_str()
        .unwrap()
        .contains("container (/.dockerenv) started without the GPU devices"));
    assert_eq!(
        p[0]["fix"],
        "start the container with --device=/dev/kfd --device=/dev/dri (docker run or podman run)"
    );
    // podman's marker, and a cgroup that names docker, say the same
    let m = machine("render:x:993:alice\n");
    m.file("run/.containerenv", "engine=\"podman-4.3.1\"\n");
    let (_, report) = m.report();
    assert_eq!(
        report["machine"]["access"]["container"],
        "/run/.containerenv"
    );
    let m = machine("");
    m.file("proc/1/cgroup", "0::/system.slice/docker-3f1e.scope\n");
    let (_, report) = m.report();
    assert_eq!(report["machine"]["access"]["container"], "/proc/1/cgroup");
}

#[test]
fn a_machine_whose_amdgpu_made_no_kfd_is_told_to_load_it() {
    let m = machine("render:x:993:alice\n");
    let (_, report) = m.report();
    let p = problems(&report);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(p[0]["what"]
        .as_str()
        .unwrap()
        .starts_with("/dev/kfd does not exist"));
    assert!(p[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("sudo modprobe amdgpu"));
    m.doctor(&[])
        .stdout_has("  devices    /dev/kfd does not exist\n")
        .stdout_has("  problem    /dev/kfd does not exist: amdgpu is not loaded");
    // no AMD GPU at all: nothing to say
    let m = FakeMachine::new();
    let (_, report) = m.report();
    assert!(problems(&report).is_empty(), "{report:#}");
}

#[test]
fn firmware_versions_are_listed_per_card() {
    let m = machine("");
    let fw = "sys/class/drm/card1/device/fw_version";
    for (block, version) in [
        ("mes", "0x00000080"),
        ("mec", "0x0000009a"),
        ("sdma", "0x0000000e"),
    ] {
        m.file(&format!("{fw}/{block}_fw_version"), &format!("{version}\n"));
    }
    m.file(
        "sys/class/drm/card1/device/vbios_version",
        "113-D9870100-100\n",
    )
    .file("sys/class/drm/card1-DP-1/status", "connected\n")
    .file("sys/class/drm/card0/device/vendor", "0x8086\n");
    let (_, report) = m.report();
    let firmware = report["machine"]["firmware"].as_array().unwrap();
    assert_eq!(firmware.len(), 1, "{firmware:#?}");
    assert_eq!(firmware[0]["card"], "card1");
    assert_eq!(firmware[0]["vbios"], "113-D9870100-100");
    assert_eq!(firmware[0]["versions"]["mes"], "0x00000080");
    assert_eq!(firmware[0]["versions"]["sdma"], "0x0000000e");
    m.doctor(&[]).stdout_has(
        "  firmware   card1 (VBIOS 113-D9870100-100): mec 0x0000009a, mes 0x00000080, sdma 0x0000000e\n",
    );
    // a firmware file doctor may not read is named, the others kept
    std::fs::remove_file(m.root().join(fw).join("mec_fw_version")).unwrap();
    std::fs::create_dir(m.root().join(fw).join("mec_fw_version")).unwrap();
    let (_, report) = m.report();
    let unread = report["machine"]["unread"].to_string();
    assert!(
        unread.contains(&format!("/{fw}/mec_fw_version")),
        "{unread}"
    );
    assert_eq!(
        report["machine"]["firmware"][0]["versions"]["mes"],
        "0x00000080"
    );
}
