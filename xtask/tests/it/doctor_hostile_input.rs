//! doctor on hostile knob files, environments and modules (issue #30): a
//! `modprobe.d` file of a million lines and one 64 MiB `options amdgpu`
//! line (bounded work and output, the cut counted, a mitigation still
//! seen), a `modprobe.d` file that is not UTF-8 (read, and named) beside
//! one that cannot be read, an environment that is not UTF-8, a 655 MB
//! module with debug info (judged) and xz, zstd and gzip bombs (scanned as
//! a stream). Every run is bounded in memory (at most 256 MiB resident)
//! and time; the time is printed, not asserted.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use xtask::doctor::module;

use crate::support::bounded;
use crate::support::doctor::{bounded_report, knob, FakeMachine};

const RELEASE: &str = "6.14.0-36-generic";
const AMDGPU: &str = "lib/modules/6.14.0-36-generic/kernel/drivers/gpu/drm/amd/amdgpu";

/// An RDNA4 machine on 6.14 with ROCm 7.1.1.
fn machine() -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel(RELEASE)
        .rocm("7.1.1-53", "1.1.0");
    m
}

fn run_doctor(m: &FakeMachine, what: &str) -> (bounded::Bounded, serde_json::Value) {
    bounded_report(&mut m.doctor_command(&["--json"]), what)
}

/// The notes doctor made on the knobs it read, joined.
fn knob_notes(report: &serde_json::Value) -> String {
    report["machine"]["knob_notes"]
        .as_array()
        .unwrap_or_else(|| panic!("no knob_notes in {:#}", report["machine"]))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `could not read` reason for `path`, if listed.
fn unread<'a>(report: &'a serde_json::Value, path: &str) -> Option<&'a str> {
    report["machine"]["unread"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["path"] == path)
        .map(|u| u["why"].as_str().unwrap())
}

#[test]
fn a_million_line_modprobe_file_is_read_with_bounded_work_and_output() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let mut text = String::with_capacity(30 << 20);
    for i in 0..1_000_000 {
        text.push_str(&format!("options amdgpu param_{i}=1\n"));
    }
    text.push_str("options amdgpu cwsr_enable=0\n");
    m.file("etc/modprobe.d/huge.conf", &text);
    let (run, report) = run_doctor(&m, "a million-line modprobe.d file");
    assert!(
        run.run.stdout.len() < 1 << 20,
        "{} bytes",
        run.run.stdout.len()
    );
    let cwsr = knob(&report, "cwsr_enable");
    assert_eq!(cwsr["from"], "/etc/modprobe.d/huge.conf", "{cwsr:#}");
    assert_eq!(cwsr["judgement"], "mitigates", "{cwsr:#}");
    let kept = report["knobs"].as_array().unwrap().len();
    assert!(kept <= 100, "{kept} knobs kept");
    let notes = knob_notes(&report);
    let cut = 1_000_000 - (kept - 1);
    assert!(
        notes.contains(&format!(
            "/etc/modprobe.d/huge.conf: {cut} more amdgpu settings not kept"
        )),
        "{notes}"
    );
    let text = m.doctor(&[]);
    assert!(text.stdout.len() < 1 << 20, "{} bytes", text.stdout.len());
    text.stdout_has(&format!("{cut} more amdgpu settings not kept"));
}

#[test]
fn one_64_mib_options_line_is_read_with_bounded_work() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let mut line = b"options amdgpu".to_vec();
    let end = b" cwsr_enable=0\n";
    let mut i = 0u64;
    while line.len() + 24 + end.len() < 64 << 20 {
        line.extend(format!(" p{i}=0x{i:x}").as_bytes());
        i += 1;
    }
    // and one word far over any parameter's length
    line.extend(b" huge=");
    line.extend(std::iter::repeat_n(
        b'7',
        (64 << 20) - line.len() - end.len() - 1,
    ));
    line.extend(end);
    assert!(line.len() as u64 <= 64 << 20);
    let path = m.root().join("etc/modprobe.d/one-line.conf");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &line).unwrap();
    let (run, report) = run_doctor(&m, "one 64 MiB options line");
    assert!(
        run.run.stdout.len() < 1 << 20,
        "{} bytes",
        run.run.stdout.len()
    );
    assert_eq!(knob(&report, "cwsr_enable")["judgement"], "mitigates");
    let notes = knob_notes(&report);
    assert!(
        notes.contains("/etc/modprobe.d/one-line.conf: ")
            && notes.contains(" more amdgpu settings not kept"),
        "{notes}"
    );
    assert!(
        !report["knobs"].to_string().contains("7777777777"),
        "the long word was kept"
    );
}

#[test]
fn a_modprobe_file_that_is_not_utf8_is_read_and_named() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let path = m.root().join("etc/modprobe.d/latin1.conf");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        b"# r\xe9glage du GPU\noptions amdgpu cwsr_enable=0\n",
    )
    .unwrap();
    let fifo = m.root().join("etc/modprobe.d/fifo.conf");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let (_, report) = run_doctor(&m, "a modprobe.d file that is not UTF-8");
    let cwsr = knob(&report, "cwsr_enable");
    assert_eq!(cwsr["from"], "/etc/modprobe.d/latin1.conf", "{cwsr:#}");
    assert_eq!(cwsr["judgement"], "mitigates", "{cwsr:#}");
    let notes = knob_notes(&report);
    assert!(
        notes.contains("/etc/modprobe.d/latin1.conf: not UTF-8"),
        "{notes}"
    );
    assert_eq!(unread(&report, "/etc/modprobe.d/latin1.conf"), None);
    assert_eq!(
        unread(&report, "/etc/modprobe.d/fifo.conf"),
        Some("is a FIFO, not a file: not read")
    );
}

#[test]
fn an_environment_that_is_not_utf8_does_not_stop_doctor() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let latin1 = |s: &[u8]| std::ffi::OsStr::from_bytes(s).to_owned();
    let mut cmd = m.doctor_command(&["--json"]);
    cmd.env("OLDPWD", latin1(b"/home/user/caf\xe9"))
        .env("HSA_FOO", latin1(b"\xff1"))
        .env(latin1(b"HSA_\xe9"), "1");
    let (_, report) = bounded_report(&mut cmd, "an environment that is not UTF-8");
    assert_eq!(knob(&report, "HSA_FOO")["value"], "\u{fffd}1");
    assert_eq!(knob(&report, "HSA_\u{fffd}")["from"], "environment");
}

/// An amdgpu.ko with the fixed gfx12 trap handler, `.modinfo` and a
/// `.debug_info` section of `debug` zero bytes: its head, the length of
/// the zeros, and its tail (the section headers).
fn module_with_debug_info(debug: u64) -> (Vec<u8>, u64, Vec<u8>) {
    let mut head = vec![0u8; 64];
    head[..6].copy_from_slice(b"\x7fELF\x02\x01");
    for w in module::FIXED {
        head.extend(w.to_le_bytes());
    }
    head.extend(format!("\0vermagic={RELEASE} SMP mod_unload \0srcversion=ABC123\0").as_bytes());
    while !head.len().is_multiple_of(8) {
        head.push(0);
    }
    let shoff = head.len() as u64 + debug;
    head[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    head[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    head[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
    let mut tail = vec![0u8; 128];
    // section 1: .debug_info, PROGBITS, where the zeros are
    tail[64 + 4] = 1;
    tail[64 + 0x18..64 + 0x20].copy_from_slice(&(head.len() as u64).to_le_bytes());
    tail[64 + 0x20..64 + 0x28].copy_from_slice(&debug.to_le_bytes());
    (head, debug, tail)
}

/// The whole module as a stream.
fn module_stream(debug: u64) -> impl Read {
    let (head, zeros, tail) = module_with_debug_info(debug);
    std::io::Cursor::new(head)
        .chain(std::io::repeat(0).take(zeros))
        .chain(std::io::Cursor::new(tail))
}

/// The size of amdgpu.ko of 6.18.3 built with Debian's config and debug
/// info (DESIGN.md: 655 MB).
const UNSTRIPPED: u64 = 655_000_000;

#[test]
fn a_655_mb_module_with_debug_info_is_judged() {
    if !bounded::available() {
        return;
    }
    let m = machine();
    let (head, zeros, tail) = module_with_debug_info(UNSTRIPPED - 256);
    let plain = m.root().join(AMDGPU).join("amdgpu.ko");
    std::fs::create_dir_all(plain.parent().unwrap()).unwrap();
    let mut file = std::fs::File::create(&plain).unwrap();
    file.write_all(&head).unwrap();
    file.seek(SeekFrom::Current(zeros as i64)).unwrap();
    file.write_all(&tail).unwrap();
    drop(file);
    assert!(std::fs::metadata(&plain).unwrap().len() > 600_000_000);
    let (_, report) = run_doctor(&m, "a 655 MB amdgpu.ko");
    let judged = &report["machine"]["amdgpu_file"];
    assert_eq!(judged["trap_handler"], "fixed", "{judged:#}");
    assert!(judged["sha256"].is_string(), "{judged:#}");

    std::fs::remove_file(&plain).unwrap();
    let zst = plain.with_extension("ko.zst");
    let out = std::fs::File::create(&zst).unwrap();
    zstd::stream::copy_encode(module_stream(UNSTRIPPED - 256), out, 1).unwrap();
    let (_, report) = run_doctor(&m, "a 655 MB amdgpu.ko.zst");
    let judged = &report["machine"]["amdgpu_file"];
    assert_eq!(judged["trap_handler"], "fixed", "{judged:#}");
}

/// `len` zero bytes compressed by `codec` into `path`.
fn bomb(path: &Path, codec: &str, len: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let out = std::fs::File::create(path).unwrap();
    let mut zeros = std::io::repeat(0).take(len);
    match codec {
        "xz" => {
            let mut enc = xz2::write::XzEncoder::new(out, 0);
            std::io::copy(&mut zeros, &mut enc).unwrap();
            enc.finish().unwrap();
        }
        "gzip" => {
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
            std::io::copy(&mut zeros, &mut enc).unwrap();
            enc.finish().unwrap();
        }
        _ => zstd::stream::copy_encode(zeros, out, 1).unwrap(),
    }
}

#[test]
fn module_bombs_are_scanned_as_a_stream() {
    if !bounded::available() {
        return;
    }
    for (codec, name, len, why) in [
        ("xz", "amdgpu.ko.xz", 320 << 20, "no ELF header"),
        ("gzip", "amdgpu.ko.gz", 320 << 20, "no ELF header"),
        (
            "zstd",
            "amdgpu.ko.zst",
            3 << 29,
            "decompresses to more than 1.0 GiB",
        ),
    ] {
        let m = machine();
        let path = m.root().join(AMDGPU).join(name);
        bomb(&path, codec, len);
        let size = std::fs::metadata(&path).unwrap().len();
        let (_, report) = run_doctor(&m, &format!("a {size}-byte {codec} bomb"));
        let judged = &report["machine"]["amdgpu_file"];
        assert_eq!(judged["trap_handler"], "cannot-tell", "{judged:#}");
        let text = judged["why"].as_str().unwrap();
        assert!(text.contains(why), "{codec}: {text}");
    }
}
