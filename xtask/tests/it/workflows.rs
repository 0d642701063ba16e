//! The GitHub Actions workflows as a repository rule: each parses and
//! passes actionlint, each `cargo xtask` command it runs exists, the kernel
//! workflow's matrix names every kernel recipe (DKMS and config) with its
//! kind, its pin state and, for DKMS, a kernel in its range, and the release
//! workflow builds the wheel as pyproject.toml says, with the tools CI pins.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support::{repo_recipes_of_kind, repo_root, Project};

fn workflow(name: &str) -> Value {
    let path = repo_root().join(".github/workflows").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `cargo xtask <command>` of every run step of every job, and the
/// ids of run steps that are not `cargo xtask`.
fn commands(doc: &Value) -> (Vec<String>, Vec<String>) {
    let (mut xtask, mut other) = (Vec::new(), Vec::new());
    for job in doc["jobs"].as_object().expect("jobs").values() {
        for step in job["steps"].as_array().expect("steps") {
            let Some(run) = step["run"].as_str() else {
                continue;
            };
            let lines: Vec<&str> = run.lines().map(str::trim).collect();
            let xtask_lines: Vec<&str> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("cargo xtask "))
                .collect();
            if xtask_lines.is_empty() {
                other.push(step["id"].as_str().unwrap_or("(no id)").to_owned());
            }
            for rest in xtask_lines {
                xtask.push(rest.split_whitespace().next().unwrap().to_owned());
            }
        }
    }
    (xtask, other)
}

#[test]
fn every_workflow_names_only_existing_xtask_commands() {
    let p = Project::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(repo_root().join(".github/workflows")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.ends_with(".yml") {
            continue;
        }
        let (xtask, _) = commands(&workflow(&name));
        // the release builds the user's command with maturin, not xtask
        assert!(
            !xtask.is_empty() || name == "release.yml",
            "{name} runs no cargo xtask command"
        );
        for command in &xtask {
            p.xtask(&[command, "--help"]).success();
        }
        seen += 1;
    }
    assert!(seen >= 3, "the hipblaslt, kernel and release workflows");
}

#[test]
fn the_kernel_workflow_builds_every_kernel_recipe_that_is_pinned() {
    use xtask::input::recipe::{Kind, Recipe};

    let doc = workflow("kernel.yml");
    let job = &doc["jobs"]["build"];
    let (xtask, other) = commands(&doc);
    for command in ["build-dkms", "build-config", "verify", "plan"] {
        assert!(xtask.contains(&command.to_owned()), "{command}: {xtask:?}");
    }
    // `lock` is the maintainer's reviewed step, never CI's.
    assert!(!xtask.contains(&"lock".to_owned()), "{xtask:?}");
    assert_eq!(other, ["deps", "setup", "check"], "the non-xtask steps");

    let root = repo_root();
    let mut matrix = BTreeMap::new();
    for entry in job["strategy"]["matrix"]["include"].as_array().unwrap() {
        let recipe = entry["recipe"].as_str().unwrap().to_owned();
        let kind = entry["kind"]
            .as_str()
            .expect("kind: dkms or config")
            .to_owned();
        let kernel = entry["kernel"].as_str().map(str::to_owned);
        let pinned = entry["pinned"].as_bool().expect("pinned: true or false");
        assert!(
            matrix
                .insert(recipe.clone(), (kind, kernel, pinned))
                .is_none(),
            "{recipe} twice"
        );
    }
    let kernel_recipes: Vec<String> = xtask::input::recipe::list(&root)
        .unwrap()
        .into_iter()
        .filter(|name| name.starts_with("amdgpu-"))
        .filter(|name| {
            Recipe::load(&root, name)
                .is_ok_and(|r| matches!(r.kind, Kind::Dkms(_) | Kind::Config(_)))
        })
        .collect();
    assert!(kernel_recipes.len() >= 9, "{kernel_recipes:?}");
    assert!(
        kernel_recipes.contains(&"amdgpu-cwsr-off".to_owned()),
        "{kernel_recipes:?}"
    );
    assert_eq!(
        matrix.keys().cloned().collect::<Vec<_>>(),
        kernel_recipes,
        "the matrix names every kernel recipe, DKMS and config, and only those"
    );
    for (name, (kind, kernel, pinned)) in &matrix {
        let recipe = Recipe::load(&root, name).unwrap();
        assert_eq!(kind, recipe.kind.name().as_str(), "{name}: kind");
        // Pinned means what `plan` means by it, for either kind: nothing
        // UNPINNED (a config recipe's local source is pinned by the commit).
        assert_eq!(
            *pinned,
            recipe.unpinned().is_empty(),
            "{name}: `pinned` in kernel.yml must say whether the recipe is pinned ({:?} unpinned)",
            recipe.unpinned()
        );
        match recipe.kind {
            Kind::Dkms(_) => {
                let kernel = kernel
                    .as_deref()
                    .unwrap_or_else(|| panic!("{name}: a DKMS recipe needs `kernel`"));
                xtask::input::target::check_kernel(&recipe, kernel)
                    .unwrap_or_else(|e| panic!("{name}: kernel {kernel}: {e:#}"));
            }
            _ => assert!(kernel.is_none(), "{name}: a config recipe has no kernel"),
        }
    }

    // Every step after the plan runs only for pinned recipes; each build
    // step for its kind; the artifact is dist/<recipe>.
    let steps = job["steps"].as_array().unwrap();
    let plan = steps
        .iter()
        .position(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.starts_with("cargo xtask plan"))
        })
        .expect("a plan step");
    for step in &steps[plan + 1..] {
        let cond = step["if"].as_str().unwrap_or_default();
        assert!(
            cond == "matrix.pinned" || cond.starts_with("matrix.pinned && "),
            "{step}"
        );
    }
    let upload = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact"))
        })
        .expect("an upload step");
    assert_eq!(upload["with"]["path"], "dist/${{ matrix.recipe }}");
    for (command, kind) in [("build-dkms", "dkms"), ("build-config", "config")] {
        let step = steps
            .iter()
            .find(|s| {
                s["run"]
                    .as_str()
                    .is_some_and(|r| r.starts_with(&format!("cargo xtask {command} ")))
            })
            .unwrap_or_else(|| panic!("a {command} step"));
        assert_eq!(
            step["if"],
            format!("matrix.pinned && matrix.kind == '{kind}'"),
            "{step}"
        );
        let run = step["run"].as_str().unwrap();
        assert!(
            run.contains("${{ matrix.recipe }}") && run.contains("--out dist/${{ matrix.recipe }}"),
            "{run}"
        );
        assert_eq!(
            run.contains("--kernel ${{ matrix.kernel }}"),
            kind == "dkms",
            "{run}"
        );
    }
}

#[test]
fn the_rewrite_job_builds_every_rewrite_recipe_in_a_debian_container() {
    let doc = workflow("hipblaslt.yml");
    let job = &doc["jobs"]["rewrite"];
    let mut matrix: Vec<String> = job["strategy"]["matrix"]["include"]
        .as_array()
        .expect("a matrix")
        .iter()
        .map(|e| {
            let image = e["image"].as_str().unwrap();
            assert!(
                image.starts_with("debian:"),
                "{image}: apt must reach Debian's archive"
            );
            e["recipe"].as_str().unwrap().to_owned()
        })
        .collect();
    matrix.sort();
    let recipes: Vec<String> = repo_recipes_of_kind(xtask::input::recipe::KindName::Rewrite);
    assert!(!recipes.is_empty());
    assert_eq!(matrix, recipes);
    let runs: Vec<&str> = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect();
    assert!(
        runs.contains(&"cargo xtask build ${{ matrix.recipe }} --out dist/${{ matrix.recipe }}")
    );
}

#[test]
fn every_workflow_passes_actionlint() {
    let Some(actionlint) = crate::support::wheel_tool("actionlint") else {
        return;
    };
    // shellcheck and pyflakes are not part of the bench: actionlint's own
    // checks (syntax, expressions, action inputs, deprecated runtimes)
    let out = std::process::Command::new(actionlint)
        .args(["-no-color", "-shellcheck=", "-pyflakes="])
        .current_dir(repo_root())
        .output()
        .expect("running actionlint");
    assert!(
        out.status.success(),
        "actionlint on .github/workflows/:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_release_builds_the_wheel_as_pyproject_says_with_the_pinned_tools() {
    let doc = workflow("release.yml");
    assert_eq!(doc["on"]["push"]["tags"][0], "v*");
    let steps = doc["jobs"]["wheel"]["steps"].as_array().unwrap();
    let run = |id: &str| -> String {
        steps
            .iter()
            .find(|s| s["id"] == id)
            .and_then(|s| s["run"].as_str())
            .unwrap_or_else(|| panic!("a run step with id {id}"))
            .to_owned()
    };
    // every setting of the build is pyproject.toml's: no flag but --out
    assert_eq!(run("wheel"), "maturin build --release --out dist/release");
    assert_eq!(run("audit"), "auditwheel show dist/release/*.whl");
    assert_eq!(
        run("tarball"),
        "bash wheel/tarball dist/release/*.whl dist/release"
    );
    assert!(run("check").contains("pip install dist/release/*.whl"));
    // the tools are the versions .ci/setup gives CI's wheel test
    let setup = std::fs::read_to_string(repo_root().join(".ci/setup")).unwrap();
    let tools = run("tools");
    for pin in tools.split_whitespace().filter(|w| w.contains("==")) {
        assert!(
            setup.contains(pin),
            "{pin} of release.yml is not .ci/setup's"
        );
    }
    assert!(
        tools.contains("maturin==")
            && tools.contains("ziglang==")
            && tools.contains("auditwheel==")
    );
    let pyproject = std::fs::read_to_string(repo_root().join("pyproject.toml")).unwrap();
    for setting in [
        "bindings = \"bin\"",
        "compatibility = \"manylinux_2_28\"",
        "no-default-features = true",
        "wheel/zigcc",
        "data = \"wheel/data\"",
    ] {
        assert!(pyproject.contains(setting), "pyproject.toml: {setting}");
    }
}
