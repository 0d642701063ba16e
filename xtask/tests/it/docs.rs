//! The user-facing Markdown holds together: every relative link of
//! README.md, ARCHITECTURE.md and docs/*.md leads to a file that exists,
//! and a `#anchor` to a heading of that file (GitHub's slugs); README's
//! first screen holds the user's three paths; every docs/ page is linked
//! from README.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::repo_root;

/// The lines of README.md a newcomer sees first.
const FIRST_SCREEN: usize = 60;

/// The Markdown files whose links are checked: README.md, ARCHITECTURE.md
/// and every page of `docs/`, sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// The `ARCHITECTURE.md` of each group folder of `xtask/src` (every
/// folder but `bin/`), of `xtask/tests` and of `bench`, sorted.
fn folder_maps(root: &Path) -> Vec<PathBuf> {
    let mut maps: Vec<PathBuf> = std::fs::read_dir(root.join("xtask/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.ends_with("bin"))
        .map(|p| p.join("ARCHITECTURE.md"))
        .collect();
    maps.sort();
    maps.push(root.join("xtask/tests/ARCHITECTURE.md"));
    maps.push(root.join("bench/ARCHITECTURE.md"));
    maps
}

/// The lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// `line` with its inline code spans (`` `...` ``) blanked, so that link
/// syntax shown as code is not taken for a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The targets of the inline links `[text](target)` and of the reference
/// definitions `[label]: target` of one line (code spans left out).
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    if let Some(rest) = line.trim_start().strip_prefix('[') {
        if let Some((_, target)) = rest.split_once("]: ") {
            out.push(target.split_whitespace().next().unwrap_or("").to_owned());
        }
    }
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(['<', '>']).to_owned());
        rest = &after[end..];
    }
    out
}

/// Whether a target leaves the repository (a URL or a mail address).
fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// GitHub's anchor of a heading's text: inline links reduced to their
/// text, lower case, every character but letters, digits, `-`, `_` and
/// spaces dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        rest = rest[at + 2..].split_once(')').map_or("", |(_, r)| r);
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a Markdown file's headings give, GitHub's way: the second
/// heading of one slug gets `-1`, the third `-2`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// What is wrong with each relative link of `file` (one line per broken
/// link: file, line, target and why), checked against the files below
/// `root`.
fn broken_links(root: &Path, file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let shown = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let mut broken = Vec::new();
    for (number, line) in prose_lines(&text) {
        for target in link_targets(line) {
            if target.is_empty() || is_external(&target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.to_path_buf()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{shown}:{number}: {target}: no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let is_markdown = resolved.extension().is_some_and(|e| e == "md");
            if is_markdown
                && !anchors(&std::fs::read_to_string(&resolved).unwrap()).contains(anchor)
            {
                broken.push(format!("{shown}:{number}: {target}: no heading #{anchor}"));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_leads_to_a_file_and_a_heading() {
    let root = repo_root();
    let mut files = markdown_files(&root);
    files.extend(folder_maps(&root));
    assert!(
        files.len() > 10,
        "README, ARCHITECTURE and docs/: {files:?}"
    );
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(&root, f)).collect();
    assert!(
        broken.is_empty(),
        "broken links (fix the path, or the #anchor to a heading's GitHub slug):\n  {}",
        broken.join("\n  ")
    );
}

/// The checker itself: a missing file, a missing heading and a link shown
/// as code are told apart on a folder of the test's own.
#[test]
fn the_link_checker_finds_a_missing_file_and_a_missing_heading() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(
        docs.join("page.md"),
        "# A page\n\n## The crash you had: `doctor --log`, firmware\n\n## Twice\n\n## Twice\n",
    )
    .unwrap();
    let readme = dir.path().join("README.md");
    std::fs::write(
        &readme,
        "[ok](docs/page.md) [ok](docs/page.md#the-crash-you-had-doctor---log-firmware)\n\
         [ok](docs/page.md#twice-1) [ok](#top) `[not a link](nowhere.md)`\n\
         ```sh\n[not a link](nowhere.md)\n```\n\
         [gone](docs/gone.md) and [no heading](docs/page.md#twice-2)\n\
         [ref]: docs/missing.md\n\n# Top\n",
    )
    .unwrap();
    assert_eq!(
        broken_links(dir.path(), &readme),
        [
            "README.md:6: docs/gone.md: no such file",
            "README.md:6: docs/page.md#twice-2: no heading #twice-2",
            "README.md:7: docs/missing.md: no such file",
        ]
    );
}

#[test]
fn readme_first_screen_holds_the_three_user_paths() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let first: Vec<&str> = readme.lines().take(FIRST_SCREEN).collect();
    let first = first.join("\n");
    for (path, command) in [
        ("diagnose", "rocm-patchkit doctor"),
        ("fix the library", "rocm-patchkit rewrite-hipblaslt"),
        (
            "fix the kernel",
            "cargo xtask build-dkms amdgpu-expert-sched-",
        ),
        ("the kernel's stop-gap", "amdgpu.cwsr_enable=0"),
        (
            "the tests, as .ci/run runs them",
            "cargo test --workspace --locked",
        ),
    ] {
        assert!(
            first.contains(command),
            "README's first {FIRST_SCREEN} lines name no `{command}` ({path})"
        );
    }
    let ci = std::fs::read_to_string(repo_root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l == "cargo test --workspace --locked"),
        ".ci/run runs the test command README shows"
    );
}

#[test]
fn readme_links_every_docs_page() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let linked: BTreeSet<String> = prose_lines(&readme)
        .into_iter()
        .flat_map(|(_, line)| link_targets(line))
        .collect();
    for page in markdown_files(&root).iter().skip(2) {
        let rel = page.strip_prefix(&root).unwrap().display().to_string();
        assert!(linked.contains(&rel), "README.md links no {rel}");
        let text = std::fs::read_to_string(page).unwrap();
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        assert!(
            lines.next().is_some_and(|l| l.starts_with("# ")),
            "{rel} opens with its title"
        );
        assert!(
            lines.next().is_some_and(|l| !l.starts_with('#')),
            "{rel} says what it is for before its first section"
        );
    }
}

/// Every group folder has its map, linked from ARCHITECTURE.md, opening
/// with its title and what the folder holds.
#[test]
fn every_group_folder_has_a_map_the_top_one_links() {
    let root = repo_root();
    let top = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let linked: BTreeSet<String> = prose_lines(&top)
        .into_iter()
        .flat_map(|(_, line)| link_targets(line))
        .collect();
    for map in folder_maps(&root) {
        let rel = map.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&map)
            .unwrap_or_else(|e| panic!("{rel}: {e} (every group folder has its map)"));
        assert!(linked.contains(&rel), "ARCHITECTURE.md links no {rel}");
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        assert!(
            lines.next().is_some_and(|l| l.starts_with("# ")),
            "{rel} opens with its title"
        );
        assert!(
            text.contains("## Entry points"),
            "{rel} has an \"Entry points\" section"
        );
    }
}
