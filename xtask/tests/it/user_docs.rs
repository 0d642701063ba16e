//! The installed command's man pages and completions: the files the wheel
//! and the tarball ship (`wheel/data/data/share/`) are the ones the CLI renders
//! today, and the man pages list the same commands and flags as `--help`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use xtask::cli::user::docs;

use crate::support::repo_root;

/// `wheel/data/data/`: the `data/` of maturin's `data` folder, which goes below the
/// environment's prefix.
fn share_root() -> std::path::PathBuf {
    repo_root().join("wheel/data/data")
}

/// Every file below `dir`, relative, sorted.
fn files_below(dir: &Path) -> BTreeSet<String> {
    crate::support::snapshot(dir)
        .into_iter()
        .map(|(rel, _)| rel)
        .collect()
}

/// As rust-analyzer's generated files: a file that differs from what the
/// CLI renders is written again and the test fails, naming it (commit it).
#[test]
fn the_shipped_man_pages_and_completions_are_the_ones_the_cli_renders() {
    let root = share_root();
    let want = docs::share_files();
    let mut stale = Vec::new();
    for (rel, text) in &want {
        let path = root.join(rel);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            stale.push(rel.clone());
        }
    }
    let wanted: BTreeSet<String> = want.iter().map(|(rel, _)| rel.clone()).collect();
    for rel in files_below(&root) {
        if !wanted.contains(&rel) {
            std::fs::remove_file(root.join(&rel)).unwrap();
            stale.push(format!("{rel} (removed: the CLI renders no such file)"));
        }
    }
    assert!(
        stale.is_empty(),
        "wheel/data/ was not what the CLI renders and has been written again; commit it:\n  {}",
        stale.join("\n  ")
    );
}

/// `rocm-patchkit [command] --help`.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rocm-patchkit"))
        .args(args)
        .arg("--help")
        .env("COLUMNS", "200")
        .output()
        .expect("running rocm-patchkit --help");
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

/// The long flags and the commands `--help` lists.
fn listed_by_help(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut flags, mut commands) = (BTreeSet::new(), BTreeSet::new());
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let item = line.trim_start();
        let indent = line.len() - item.len();
        if section == "Options:" && item.starts_with('-') {
            flags.extend(long_flags(item.split("  ").next().unwrap()));
        } else if section == "Commands:" && indent == 2 {
            commands.insert(item.split_whitespace().next().unwrap().to_owned());
        }
    }
    commands.remove("help");
    (flags, commands)
}

/// The long flags and the commands a man page lists (`.TP` items of its
/// OPTIONS and SUBCOMMANDS sections).
fn listed_by_man(roff: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let plain = roff
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "");
    let (mut flags, mut commands) = (BTreeSet::new(), BTreeSet::new());
    let mut section = "";
    let mut lines = plain.lines();
    while let Some(line) = lines.next() {
        if let Some(name) = line.strip_prefix(".SH ") {
            section = if name.contains("OPTIONS") {
                "options"
            } else if name.contains("SUBCOMMANDS") {
                "commands"
            } else {
                ""
            };
        } else if line == ".TP" {
            let item = lines.next().unwrap_or("");
            match section {
                "options" => flags.extend(long_flags(item)),
                "commands" => {
                    let name = item.split('(').next().unwrap();
                    commands.insert(name.trim_start_matches("rocm-patchkit-").to_owned());
                }
                _ => {}
            }
        }
    }
    commands.remove("help");
    (flags, commands)
}

fn long_flags(item: &str) -> Vec<String> {
    item.split([' ', ',', '=', '<', '['])
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn help_and_man_pages_list_the_same_commands_and_flags() {
    let pages: std::collections::BTreeMap<String, String> = docs::man_pages().into_iter().collect();
    let top = &pages["share/man/man1/rocm-patchkit.1"];
    let (top_flags, commands) = listed_by_help(&help(&[]));
    assert_eq!(listed_by_man(top), (top_flags.clone(), commands.clone()));
    for want in ["doctor", "rewrite-hipblaslt", "verify", "completions"] {
        assert!(commands.contains(want), "{want} in {commands:?}");
    }
    for command in &commands {
        let page = &pages[&format!("share/man/man1/rocm-patchkit-{command}.1")];
        let (flags, subs) = listed_by_help(&help(&[command]));
        assert!(subs.is_empty(), "{command} has no commands of its own");
        let (man_flags, _) = listed_by_man(page);
        assert_eq!(
            man_flags, flags,
            "rocm-patchkit-{command}.1 and {command} --help"
        );
        assert!(flags.contains("--help"), "{command}: {flags:?}");
    }
    let (doctor, _) = listed_by_help(&help(&["doctor"]));
    for flag in [
        "--pid",
        "--python",
        "--json",
        "--root",
        "--knowledge",
        "--quiet",
    ] {
        assert!(doctor.contains(flag), "doctor {flag}: {doctor:?}");
    }
    let (rewrite, _) = listed_by_help(&help(&["rewrite-hipblaslt"]));
    for flag in ["--check", "--undo", "--all", "--python"] {
        assert!(
            rewrite.contains(flag),
            "rewrite-hipblaslt {flag}: {rewrite:?}"
        );
    }
}

#[test]
fn completions_for_each_shell_name_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_rocm-patchkit"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "completions {shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        for word in ["rewrite-hipblaslt", "doctor", "python", "undo", "knowledge"] {
            assert!(text.contains(word), "{shell} completion names {word}");
        }
        let shipped = docs::Shell::ALL
            .iter()
            .find(|s| format!("{s:?}").to_lowercase() == shell)
            .unwrap()
            .path();
        assert_eq!(
            std::fs::read_to_string(share_root().join(shipped)).unwrap(),
            text,
            "the shipped {shell} completion is what `completions {shell}` prints"
        );
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_rocm-patchkit"))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
