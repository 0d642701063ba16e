//! Rules of this repository, checked as tests: every recipe parses and
//! plans, every patch folder belongs to a recipe, every module says what it
//! is for.

use std::path::Path;

use crate::support::repo_root;

#[test]
fn every_recipe_parses_and_plans() {
    let root = repo_root();
    let names = xtask::recipe::list(&root).unwrap();
    assert!(names.contains(&"demo-hello".to_owned()), "{names:?}");
    for name in names {
        let recipe = xtask::recipe::Recipe::load(&root, &name)
            .unwrap_or_else(|e| panic!("recipe {name}: {e:#}"));
        let plan = xtask::plan::plan(&recipe).unwrap_or_else(|e| panic!("plan {name}: {e:#}"));
        assert_eq!(plan.patches.len(), recipe.patches.len());
    }
}

#[test]
fn every_patch_folder_belongs_to_a_recipe() {
    let root = repo_root();
    let names = xtask::recipe::list(&root).unwrap();
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
    fn walk(dir: &Path, missing: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, missing);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if !text.trim_start().starts_with("//!") {
                    missing.push(path.display().to_string());
                }
            }
        }
    }
    let mut missing = Vec::new();
    walk(&repo_root().join("xtask/src"), &mut missing);
    walk(&repo_root().join("xtask/tests"), &mut missing);
    assert!(
        missing.is_empty(),
        "modules without a `//!` line: {missing:?}"
    );
}

#[test]
fn the_demo_plan_is_stable() {
    let root = repo_root();
    let recipe = xtask::recipe::Recipe::load(&root, "demo-hello").unwrap();
    let json = xtask::plan::to_json(&xtask::plan::plan(&recipe).unwrap()).unwrap();
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
