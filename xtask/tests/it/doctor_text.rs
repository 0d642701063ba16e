//! doctor's text report as a person reads it: wrapped to `COLUMNS` (a
//! word longer than a line, a path, alone on its line; a command cut with
//! ` \` so that a shell still reads it whole), colour only on a terminal
//! or with `--color always` and never from the machine's own text, each
//! long path printed once and then referred to, what could not be read
//! said once, and `-q` printing the verdicts alone. Run on an RDNA4
//! Ubuntu 6.14 machine with a venv holding 13 of Debian's real 7.1.1
//! kernel files.

use std::process::Command;

use crate::installed::TORCH_LIB;
use crate::support::doctor::FakeMachine;
use crate::support::inplace::{debian, place};
use crate::support::{ci, have_tool, Run};

const UBUNTU_24_04: &str = "NAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\nID_LIKE=debian\n";
const ESC: char = '\x1b';

/// RDNA4 on Ubuntu's 6.14 with sid's hipBLASLt in a venv; `None` without
/// Debian's files (a laptop).
fn machine() -> Option<FakeMachine> {
    let sid = debian("sid")?;
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1)
        .file("etc/os-release", UBUNTU_24_04);
    place(&sid, &m.root().join(TORCH_LIB), "libhipblaslt.so");
    Some(m)
}

fn text(m: &FakeMachine, columns: Option<&str>, args: &[&str]) -> Run {
    let mut all = vec!["--python", "/home/user/venv"];
    all.extend(args);
    let mut cmd = m.doctor_command(&all);
    if let Some(c) = columns {
        cmd.env("COLUMNS", c);
    }
    Run::of(cmd.output().unwrap())
}

/// Every line within `width` columns, but for one word standing alone
/// after its indent and key (a path, a link), a command's line also with
/// its ` \`.
fn assert_within(stdout: &str, width: usize) {
    for line in stdout.lines() {
        let body = line.trim_end().trim_end_matches(" \\");
        let before = body.rsplit_once(' ').map_or("", |(a, _)| a);
        let alone = before.trim_end().chars().count() <= 14;
        assert!(
            line.chars().count() <= width || alone,
            "a line over {width} columns:\n{line}\n\n{stdout}"
        );
    }
}

#[test]
fn the_report_wraps_to_columns_under_its_keys_and_commands_still_run_as_pasted() {
    let Some(m) = machine() else { return };
    let narrow = text(&m, Some("60"), &[]);
    assert_eq!(narrow.code, 3, "{}", narrow.stderr);
    assert_within(&narrow.stdout, 60);
    let wide = text(&m, Some("200"), &[]);
    assert_within(&wide.stdout, 200);
    assert!(wide.stdout.lines().count() < narrow.stdout.lines().count());
    let piped = text(&m, None, &[]);
    assert_within(&piped.stdout, 80);
    assert!(
        piped.stdout.lines().any(|l| l.chars().count() > 70),
        "80 columns when piped:\n{}",
        piped.stdout
    );
    // a continuation of `why` sits under the text, not under the key
    let why = narrow
        .stdout
        .lines()
        .position(|l| l.starts_with("  why   "))
        .unwrap();
    assert!(narrow
        .stdout
        .lines()
        .nth(why + 1)
        .unwrap()
        .starts_with("        "));
    // the rewrite command, cut at 60 columns, is one command for a shell
    let lines: Vec<&str> = narrow.stdout.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_start().starts_with("cargo xtask rewrite-hipblaslt"))
        .unwrap_or_else(|| panic!("{}", narrow.stdout));
    let mut command = String::new();
    for line in &lines[start..] {
        match line.trim().strip_suffix(" \\") {
            Some(part) => command.push_str(&format!("{part} ")),
            None => {
                command.push_str(line.trim());
                break;
            }
        }
    }
    assert_eq!(
        command,
        format!("cargo xtask rewrite-hipblaslt /{TORCH_LIB}")
    );
}

#[test]
fn colour_only_when_asked_or_on_a_terminal_and_never_from_the_machine() {
    let Some(m) = machine() else { return };
    let piped = text(&m, None, &[]);
    assert!(!piped.stdout.contains(ESC), "piped: no escape");
    let never = text(&m, None, &["--color", "never"]);
    assert_eq!(never.stdout, piped.stdout);
    let always = text(&m, None, &["--color", "always"]);
    assert!(
        always.stdout.contains("\x1b[1;31mAFFECTED\x1b[0m"),
        "{}",
        always.stdout
    );
    let stripped = strip_sgr(&always.stdout);
    assert_eq!(stripped, piped.stdout, "colour changes no text");

    // a file name carrying an escape shows escaped, coloured or not
    std::fs::write(
        m.root().join("proc/sys/kernel/osrelease"),
        "6.14.0-36\x1b[2J-generic\n",
    )
    .unwrap();
    let hostile = text(&m, None, &["--color", "always"]);
    assert!(
        hostile.stdout.contains("6.14.0-36\\x1b[2J-generic"),
        "{}",
        hostile.stdout
    );
    assert!(
        !strip_sgr(&hostile.stdout).contains(ESC),
        "{}",
        hostile.stdout
    );
    std::fs::write(
        m.root().join("proc/sys/kernel/osrelease"),
        "6.14.0-36-generic\n",
    )
    .unwrap();

    // on a terminal (script(1)'s pty): colour, unless NO_COLOR
    if !have_tool("script") {
        assert!(!ci(), "CI must have script (bsdutils)");
        return;
    }
    let on_tty = |no_color: bool| {
        let cmd = m.doctor_command(&["--python", "/home/user/venv"]);
        let mut line = format!("stty cols 70; {}", shell_words(&cmd));
        if no_color {
            line = format!("export NO_COLOR=1; {line}");
        }
        let mut script = Command::new("script");
        script.args(["-qec", &line, "/dev/null"]);
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => script.env(k, v),
                None => script.env_remove(k),
            };
        }
        Run::of(
            script
                .env_remove("COLUMNS")
                .env_remove("NO_COLOR")
                .output()
                .unwrap(),
        )
    };
    let tty = on_tty(false);
    assert!(tty.stdout.contains("\x1b[1;31mAFFECTED"), "{}", tty.stdout);
    assert_within(&strip_sgr(&tty.stdout).replace('\r', ""), 70);
    let plain = on_tty(true);
    assert!(!plain.stdout.contains(ESC), "NO_COLOR: {}", plain.stdout);
}

/// `cmd`'s program and arguments, quoted for `sh -c`.
fn shell_words(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|w| format!("'{}'", w.to_string_lossy().replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text without our SGR codes (`ESC [ digits ; m`).
fn strip_sgr(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('m').unwrap();
        assert!(after[..end].chars().all(|c| c.is_ascii_digit() || c == ';'));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn each_path_is_printed_once_and_what_was_not_read_is_said_once() {
    let Some(m) = machine() else { return };
    let run = text(&m, Some("200"), &[]);
    let out = &run.stdout;
    let library = format!("/{TORCH_LIB}/libhipblaslt.so");
    assert_eq!(out.matches(&library).count(), 1, "{out}");
    let kernel_file = out
        .split_whitespace()
        .find(|w| w.starts_with("TensileLibrary_") && w.contains("_gfx120"))
        .unwrap_or_else(|| panic!("the kernel file that proves it: {out}"))
        .trim_end_matches(')');
    assert_eq!(out.matches(kernel_file).count(), 1, "{out}");
    assert!(
        !out.contains(&format!("/{TORCH_LIB}/hipblaslt/library/")),
        "{out}"
    );
    assert!(
        out.contains("library [1] switches expert scheduling on"),
        "{out}"
    );
    // the folder is in the command, which must run as printed
    assert!(
        out.contains(&format!("cargo xtask rewrite-hipblaslt /{TORCH_LIB}\n")),
        "{out}"
    );
    // ROCm was not in /opt/rocm, and the library doctor did read is below
    assert!(!out.contains("ROCm       could not read"), "{out}");
    assert!(out.contains("ROCm       none in /opt/rocm"), "{out}");
    assert!(!out.contains("hipBLASLt  could not read"), "{out}");
    assert_eq!(out.matches("/opt/rocm/.info/version").count(), 1, "{out}");
    assert_eq!(out.matches("/var/lib/dkms").count(), 1, "{out}");
}

#[test]
fn quiet_prints_one_line_per_fault_and_the_closing_line() {
    let Some(m) = machine() else { return };
    let (_, report) = m.report_with(&["--python", "/home/user/venv"]);
    let faults = report["faults"].as_array().unwrap();
    for columns in ["60", "200"] {
        let run = text(&m, Some(columns), &["-q"]);
        assert_eq!(run.code, 3, "{}", run.stderr);
        let lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.len(), faults.len() + 1, "{}", run.stdout);
        assert!(
            lines[0].starts_with("AFFECTED      cwsr-expert-sched"),
            "{}",
            run.stdout
        );
        assert_eq!(
            *lines.last().unwrap(),
            "1 known fault affects this machine: cwsr-expert-sched (exit status 3)"
        );
    }
}
