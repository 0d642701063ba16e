//! Rules of this repository, checked as tests: every recipe parses and
//! plans, every patch folder belongs to a recipe, every module says what it
//! is for, no import cycle between modules, no function over 80 lines.

use crate::support::module_graph::{self, Graph};
use crate::support::repo_root;
use crate::support::rust_text::{blank_comments_and_literals, functions, rust_files};

#[test]
fn every_recipe_parses_and_plans() {
    let root = repo_root();
    let names = xtask::input::recipe::list(&root).unwrap();
    assert!(names.contains(&"demo-hello".to_owned()), "{names:?}");
    for name in names {
        let recipe = xtask::input::recipe::Recipe::load(&root, &name)
            .unwrap_or_else(|e| panic!("recipe {name}: {e:#}"));
        let plan =
            xtask::line::plan::plan(&recipe).unwrap_or_else(|e| panic!("plan {name}: {e:#}"));
        assert_eq!(plan.patches.len(), recipe.patches.len());
    }
}

#[test]
fn every_patch_folder_belongs_to_a_recipe() {
    let root = repo_root();
    let names = xtask::input::recipe::list(&root).unwrap();
    for entry in std::fs::read_dir(root.join("patches")).unwrap() {
        let entry = entry.unwrap();
        let folder = entry.file_name().into_string().unwrap();
        if entry.path().is_dir() {
            assert!(
                names.contains(&folder),
                "patches/{folder}/ has no recipes/{folder}.toml"
            );
        }
    }
}

#[test]
fn every_module_opens_with_a_doc_line() {
    let mut missing = Vec::new();
    for dir in ["xtask/src", "xtask/tests", "bench/src", "bench/tests"] {
        for path in rust_files(&repo_root().join(dir)) {
            let text = std::fs::read_to_string(&path).unwrap();
            if !text.trim_start().starts_with("//!") {
                missing.push(path.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules without a `//!` line: {missing:?}"
    );
}

/// Settings are read in one place and passed: no environment variable is
/// read in xtask/src outside the settings module and the two mains.
#[test]
fn the_environment_is_read_only_by_settings_and_the_mains() {
    let src = repo_root().join("xtask/src");
    let mut found = Vec::new();
    for path in rust_files(&src) {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == "shared/settings.rs" || rel == "main.rs" || rel.starts_with("bin/") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("]
                .iter()
                .any(|call| code.contains(call))
            {
                found.push(format!("xtask/src/{rel}:{}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "environment read outside shared/settings.rs and the mains: {found:?} (take it from the Workspace's settings.env)"
    );
}

/// The library's doctests are off (`doctest = false` in xtask/Cargo.toml):
/// a code block in a doc comment is marked as something other than Rust,
/// so no example is left untested.
#[test]
fn no_doc_comment_holds_an_untested_rust_example() {
    let mut found = Vec::new();
    for path in rust_files(&repo_root().join("xtask/src")) {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut open = false;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_start();
            let Some(doc) = line
                .strip_prefix("//!")
                .or_else(|| line.strip_prefix("///"))
            else {
                continue;
            };
            let Some(info) = doc.trim_start().strip_prefix("```") else {
                continue;
            };
            if !open && ["", "rust", "no_run", "should_panic"].contains(&info.trim()) {
                found.push(format!("{}:{}", path.display(), n + 1));
            }
            open = !open;
        }
    }
    assert!(
        found.is_empty(),
        "Rust examples in doc comments, which no doctest runs: {found:?} (mark them ```text)"
    );
}

/// The sources of the workspace's crates: the product, and the bench.
const CRATE_SOURCES: [&str; 2] = ["xtask/src", "bench/src"];

/// Dependencies point one way: no cycle between a crate's top-level
/// modules, nor between the sibling files of a directory module. A cycle
/// is named with every edge in it and the first `use` or path that makes
/// that edge.
#[test]
fn no_import_cycles() {
    for shown in CRATE_SOURCES {
        let graphs = module_graph::read_crate(&repo_root().join(shown), shown);
        let mut found = graphs.top.describe_cycles("between top-level modules");
        for (dir, siblings) in &graphs.siblings {
            found.extend(siblings.describe_cycles(&format!("between the files of {dir}/")));
        }
        assert!(
            found.is_empty(),
            "import cycles in {shown} (move the shared type below both, or \
             pass it in):\n{}",
            found.join("\n")
        );
    }
}

/// The longest a function in `xtask/src` or `bench/src` may be, from its
/// `fn` line to its closing brace.
const MAX_FN_LINES: usize = 80;

/// Every function fits in a head: none in `xtask/src` or `bench/src` spans
/// more than [`MAX_FN_LINES`] lines (tests included).
#[test]
fn functions_stay_short() {
    let mut long = Vec::new();
    for shown in CRATE_SOURCES {
        let src = repo_root().join(shown);
        for path in rust_files(&src) {
            let rel = path.strip_prefix(&src).unwrap().display().to_string();
            let blanked = blank_comments_and_literals(&std::fs::read_to_string(&path).unwrap());
            for f in functions(&blanked) {
                if f.lines > MAX_FN_LINES {
                    long.push((f.lines, format!("{shown}/{rel}:{} {}", f.line, f.name)));
                }
            }
        }
    }
    long.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let shown: Vec<String> = long
        .iter()
        .map(|(lines, place)| format!("{lines:5} lines  {place}"))
        .collect();
    assert!(
        long.is_empty(),
        "{} functions over {MAX_FN_LINES} lines (split each by meaning):\n{}",
        long.len(),
        shown.join("\n")
    );
}

#[test]
fn the_demo_plan_is_stable() {
    let root = repo_root();
    let recipe = xtask::input::recipe::Recipe::load(&root, "demo-hello").unwrap();
    let json = xtask::input::plan::to_json(&xtask::line::plan::plan(&recipe).unwrap()).unwrap();
    insta::assert_snapshot!("plan_demo_hello_json", json);
}

/// `cargo xtask` goes through the launcher, quietly; the launcher has no
/// dependencies (so it builds in a second and can show cargo's progress for
/// the minutes of xtask's first build) and builds the `xtask` binary it
/// then runs.
#[test]
fn the_xtask_alias_runs_the_dependency_free_launcher() {
    let root = repo_root();
    let config: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap()).unwrap();
    let alias = config["alias"]["xtask"].as_str().unwrap();
    let words: Vec<&str> = alias.split_whitespace().collect();
    assert_eq!(
        words,
        ["run", "--quiet", "--package", "xtask-run", "--"],
        "{alias}"
    );
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("xtask-run/Cargo.toml")).unwrap())
            .unwrap();
    for table in ["dependencies", "build-dependencies"] {
        assert!(
            !manifest.contains_key(table),
            "xtask-run/Cargo.toml has [{table}]: the launcher must build in a second"
        );
    }
    let source = std::fs::read_to_string(root.join("xtask-run/src/main.rs")).unwrap();
    assert!(
        source.contains(r#""--package", "xtask", "--bin", "xtask""#),
        "the launcher must build the xtask binary it runs"
    );
}

/// The pieces the two tests above stand on, on small sources whose answer
/// is known.
mod scanner {
    use super::*;
    use crate::support::module_graph::{referenced_modules, resolve};
    use crate::support::rust_text::{line_at, matching_brace};

    /// `src` with each of `parts` replaced by as many spaces.
    fn spaced(src: &str, parts: &[&str]) -> String {
        parts.iter().fold(src.to_owned(), |text, part| {
            text.replacen(part, &" ".repeat(part.len()), 1)
        })
    }

    #[test]
    fn comments_and_strings_become_spaces_of_the_same_length() {
        let src = "let a = \"x { \\\" }\"; // { not code\nlet b = 1; /* a { /* nested } */ still */ let c = 2;\n";
        assert_eq!(
            blank_comments_and_literals(src),
            spaced(
                src,
                &[
                    "\"x { \\\" }\"",
                    "// { not code",
                    "/* a { /* nested } */ still */"
                ]
            )
        );
    }

    #[test]
    fn raw_strings_chars_and_byte_literals_are_blanked_lifetimes_kept() {
        let src = "r#\"a \" { b\"#; br\"}\"; b'{'; '\\''; '}'; '\u{e9}'; fn f<'a>(x: &'a str) {}";
        let literals = [
            "r#\"a \" { b\"#",
            "br\"}\"",
            "b'{'",
            "'\\''",
            "'}'",
            "'\u{e9}'",
        ];
        assert_eq!(blank_comments_and_literals(src), spaced(src, &literals));
        let escaped = "let r#type = 1; let cr = '\\u{7B}';";
        assert_eq!(
            blank_comments_and_literals(escaped),
            spaced(escaped, &["'\\u{7B}'"])
        );
    }

    #[test]
    fn braces_match_across_lines_and_nesting() {
        let text = "fn f() {\n    if x { y() }\n}\n";
        let open = text.find('{').unwrap();
        assert_eq!(matching_brace(text, open), Some(text.rfind('}').unwrap()));
        assert_eq!(line_at(text, text.rfind('}').unwrap()), 3);
    }

    #[test]
    fn functions_span_from_their_fn_line_to_their_closing_brace() {
        let src = "\
trait T {
    fn declared(&self);
}
fn outer(a: [u8; 4]) -> u8 {
    fn inner() {}
    let s = \"}\";
    a[0]
}
";
        let found = functions(&blank_comments_and_literals(src));
        let spans: Vec<(&str, usize, usize)> = found
            .iter()
            .map(|f| (f.name.as_str(), f.line, f.lines))
            .collect();
        assert_eq!(spans, [("outer", 4, 5), ("inner", 5, 1)]);
    }

    fn path(p: &str) -> Vec<String> {
        p.split("::").map(str::to_owned).collect()
    }

    #[test]
    fn paths_resolve_from_the_module_and_its_inline_modules() {
        let module = path("doctor::verdict");
        assert_eq!(
            resolve(&module, &path("super::probe::Gpu")),
            Some(path("doctor::probe::Gpu"))
        );
        assert_eq!(
            resolve(&module, &path("crate::recipe::Kind")),
            Some(path("recipe::Kind"))
        );
        assert_eq!(resolve(&module, &path("super::super::super::x")), None);
        assert_eq!(resolve(&module, &path("std::fs")), None);
        // `super` in `mod tests` is the file itself; `super::super` its siblings.
        let src = "\
use crate::{fetch::{self, Fetched}, patch as p};
fn f() { crate::verify::scan(); } // crate::commented::out
#[cfg(test)]
mod tests {
    use super::{assess, *};
    use super::super::testing::elf;
}
";
        let found: Vec<(usize, String)> =
            referenced_modules(&blank_comments_and_literals(src), &module)
                .into_iter()
                .map(|(offset, target)| (line_at(src, offset), target.join("::")))
                .collect();
        let expected = [
            (1, "fetch"),
            (1, "fetch::Fetched"),
            (1, "patch"),
            (1, ""),
            (2, "verify::scan"),
            (5, "doctor::verdict::assess"),
            (5, "doctor::verdict"),
            (6, "doctor::testing::elf"),
        ];
        let mut found = found;
        found.sort();
        let mut expected: Vec<(usize, String)> =
            expected.iter().map(|&(l, t)| (l, t.to_owned())).collect();
        expected.sort();
        found.dedup();
        assert_eq!(found, expected);
    }

    #[test]
    fn a_tiny_cycle_is_found_with_its_edges_and_a_tail_is_not_in_it() {
        let mut graph = Graph::default();
        for node in ["a", "b", "c", "d"] {
            graph.nodes.insert(node.to_owned());
        }
        graph.add("a", "b", "a.rs:1".into());
        graph.add("b", "a", "b.rs:2".into());
        graph.add("b", "a", "b.rs:9".into());
        graph.add("c", "a", "c.rs:3".into());
        graph.add("b", "d", "b.rs:4".into());
        assert_eq!(
            graph.describe_cycles("between test modules"),
            [
                "cycle between test modules: a, b",
                "    a -> b  (a.rs:1)",
                "    b -> a  (b.rs:2)"
            ]
        );
        graph.add("d", "c", "d.rs:5".into());
        let cycles = graph.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(cycles[0].len(), 4, "{cycles:?}");
    }

    /// Every level (the top, a folder's files, a folder's folder), a file
    /// brought in by `#[path]` counted as its declaring module's, and paths
    /// through a parent's imports followed.
    #[test]
    fn a_crate_on_disk_gives_every_level() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            (
                "lib.rs",
                "pub mod a;\npub mod b;\npub mod c;\npub use c::C;\n",
            ),
            (
                "a/mod.rs",
                "//! a\nmod x;\nmod y;\nuse crate::b::B;\npub use y::Y;\nmod z;\n",
            ),
            ("a/z/mod.rs", "//! z\nmod p;\nmod q;\npub use q::Q;\n"),
            ("a/z/p.rs", "//! p\nuse super::Q;\n"),
            ("a/z/q.rs", "//! q\nfn f() { crate::a::z::p::g() }\n"),
            (
                "a/x.rs",
                "//! x\nuse super::Y;\nfn f() -> crate::C { crate::C }\n",
            ),
            ("a/y.rs", "//! y\n#[path = \"y_tests.rs\"]\nmod tests;\n"),
            ("a/y_tests.rs", "//! y's tests\nuse crate::a::x::X;\n"),
            ("b.rs", "//! b\npub fn f() { crate::a::x::g() }\n"),
            ("c.rs", "//! c\nuse crate::a::Y;\n"),
            ("main.rs", "//! the binary\nuse crate::b;\n"),
        ];
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let graphs = module_graph::read_crate(dir.path(), "src");
        assert_eq!(
            graphs.top.describe_cycles("top"),
            [
                "cycle top: a, b, c",
                "    a -> b  (src/a/mod.rs:4)",
                "    a -> c  (src/a/x.rs:3)",
                "    b -> a  (src/b.rs:2)",
                "    c -> a  (src/c.rs:2)"
            ]
        );
        assert_eq!(
            graphs.siblings["a"].describe_cycles("in a/"),
            [
                "cycle in a/: x, y",
                "    x -> y  (src/a/x.rs:2)",
                "    y -> x  (src/a/y_tests.rs:2)"
            ]
        );
        assert_eq!(
            graphs.siblings["a/z"].describe_cycles("in a/z/"),
            [
                "cycle in a/z/: p, q",
                "    p -> q  (src/a/z/p.rs:2)",
                "    q -> p  (src/a/z/q.rs:2)"
            ]
        );
    }
}
