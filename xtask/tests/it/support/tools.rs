//! The real tools tests check outputs with (lintian, rpmlint, pacman,
//! dpkg-deb, bsdtar and any other command), run one way: C locale, UTC, and
//! a failure that names the command and shows what it printed.

use std::path::Path;
use std::process::Command;

use super::Run;

/// `sh -c script` in `dir`, which must succeed.
pub(crate) fn sh(dir: &Path, script: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
}

/// Runs `cmd` and returns what it did, whatever its exit status.
pub(crate) fn run(cmd: &mut Command) -> Run {
    Run::of(
        cmd.output()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e}")),
    )
}

/// Runs `cmd`, which must succeed, and returns its stdout.
#[track_caller]
pub(crate) fn stdout(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert_eq!(out.code, 0, "{cmd:?} failed:\n{}{}", out.stdout, out.stderr);
    out.stdout
}

/// Runs `cmd`, which must succeed, and returns its stdout then its stderr.
#[track_caller]
pub(crate) fn stdout_and_stderr(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert_eq!(out.code, 0, "{cmd:?} failed:\n{}{}", out.stdout, out.stderr);
    out.stdout + &out.stderr
}

/// `<program> <args> <file>` in the C locale and UTC, as a package's user
/// would read it back.
pub(crate) fn tool(program: &str, args: &[&str], file: &Path) -> Run {
    run(Command::new(program)
        .args(args)
        .arg(file)
        .env("LC_ALL", "C.UTF-8")
        .env("TZ", "UTC"))
}

/// `<program> <args> <file>`, which must succeed: its stdout.
#[track_caller]
pub(crate) fn read_back(program: &str, args: &[&str], file: &Path) -> String {
    let out = tool(program, args, file);
    assert_eq!(
        out.code,
        0,
        "{program} {args:?} {}:\n{}{}",
        file.display(),
        out.stdout,
        out.stderr
    );
    out.stdout
}

/// `pacman -Qip <pkg>`: the package's fields as pacman reads them.
#[track_caller]
pub(crate) fn pacman_info(pkg: &Path) -> String {
    read_back("pacman", &["-Qip"], pkg)
}

/// `dpkg-deb --info <deb>`: the control file and the archive's members.
#[track_caller]
pub(crate) fn deb_info(deb: &Path) -> String {
    read_back("dpkg-deb", &["--info"], deb)
}

/// `bsdtar -tf <archive>`: the entries' names.
#[track_caller]
pub(crate) fn bsdtar_list(archive: &Path) -> String {
    read_back("bsdtar", &["-tf"], archive)
}

/// `bsdtar -xf <archive> -C <dir>` (the folder is made first).
#[track_caller]
pub(crate) fn bsdtar_unpack(archive: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    stdout(
        Command::new("bsdtar")
            .arg("-xf")
            .arg(archive)
            .arg("-C")
            .arg(dir),
    );
}

/// What lintian said of a package that has no error and no warning.
pub(crate) struct Lintian {
    /// Everything lintian printed.
    pub(crate) report: String,
    /// The tag lines (`I: …`, `P: …`, `X: …`), notes (`N:`) left out.
    pub(crate) tags: Vec<String>,
}

impl Lintian {
    /// Asserts every tag left is one of `tags` and, when `levels` is given,
    /// of one of those levels (`'I'`, `'P'`, …).
    #[track_caller]
    pub(crate) fn assert_only(&self, levels: Option<&[char]>, tags: &[&str]) {
        for tag in &self.tags {
            let level = tag.chars().next().unwrap_or(' ');
            assert!(
                levels.is_none_or(|l| l.contains(&level)) && tags.iter().any(|t| tag.ends_with(t)),
                "lintian tag {tag:?} is not one of {tags:?}:\n{}",
                self.report
            );
        }
    }
}

/// `lintian --pedantic --display-info` on a `.deb`, `.dsc` or `.changes`:
/// fails the test on any error or warning (by lintian's exit status and by
/// the tags it printed); the other tags are returned for the caller to
/// judge.
#[track_caller]
pub(crate) fn lintian(path: &Path) -> Lintian {
    let out = tool(
        "lintian",
        &[
            "--pedantic",
            "--display-info",
            "--tag-display-limit",
            "0",
            "--fail-on",
            "error,warning",
        ],
        path,
    );
    let report = format!("{}{}", out.stdout, out.stderr);
    let tags: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| l.len() > 2 && l.as_bytes()[1] == b':' && !l.starts_with("N:"))
        .map(str::to_owned)
        .collect();
    let bad: Vec<&String> = tags
        .iter()
        .filter(|t| t.starts_with("E:") || t.starts_with("W:"))
        .collect();
    assert!(
        bad.is_empty() && out.code == 0,
        "lintian {}: errors or warnings (exit {}):\n{report}",
        path.display(),
        out.code
    );
    Lintian { report, tags }
}

/// `rpmlint <rpm>`: its error and warning lines (`…: E: …`, `…: W: …`).
pub(crate) fn rpmlint_findings(rpm: &Path) -> (Vec<String>, Run) {
    let out = run(Command::new("rpmlint").arg(rpm).env("LC_ALL", "C.UTF-8"));
    let findings = out
        .stdout
        .lines()
        .filter(|l| l.contains(": E: ") || l.contains(": W: "))
        .map(str::to_owned)
        .collect();
    (findings, out)
}

/// A copy of the program `from` at `to`, made by cp rather than
/// `std::fs::copy`: a file this process held open for writing would be
/// inherited by another test's fork until its exec, and running the copy
/// then fails with "Text file busy".
pub(crate) fn copy_program(from: &Path, to: &Path) {
    run(Command::new("cp").arg(from).arg(to)).success();
}
