//! Recipe parsing and validation through the real binary: every problem at
//! once, each as `path:line:col: message` naming the key, exit status 2.

use crate::support::{line_of, Project, Run};

const GOOD: &str = r#"
[package]
name = "demo"
version = "1.0"
summary = "a demo"
description = "a demo package"
license = "GPL-2.0-only"
maintainer = "A Person <a@example.org>"

[source]
git = "https://example.org/linux.git"
commit = "b7851f8c66191cd23a0a08bd484465ad74bbbb7d"
ref = "v6.19-rc1"
paths = ["drivers/gpu/drm/amd"]

[[patch]]
file = "0001-fix.patch"

[[patch]]
name = "0002-upstream.patch"
git = "https://example.org/linux.git"
commit = "7a5fb05b5b18e531989aa55b10dfa4be0633207e"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

[target]
kind = "dkms"
kernel = ">=6.11, <6.12.64"

[dkms]
tree = "drivers/gpu/drm/amd"
make = "make -C ${kernel_source_dir} M=${dkms_tree}/${PACKAGE_NAME}/${PACKAGE_VERSION}/build/amdgpu"

[[dkms.module]]
name = "amdgpu"
location = "amdgpu"
"#;

fn project_with(recipe: &str) -> Project {
    let p = Project::new();
    p.recipe("demo", recipe)
        .file("patches/demo/series", "0001-fix.patch\n")
        .file("patches/demo/0001-fix.patch", "--- a/x\n+++ b/x\n");
    p
}

/// `plan demo` of a project holding `text` as its recipe, which must be
/// refused as invalid input (exit 2).
#[track_caller]
fn plan_refuses(text: &str) -> Run {
    let run = project_with(text).xtask(&["plan", "demo"]);
    run.fails_with(2);
    run
}

#[test]
fn a_valid_recipe_plans() {
    let p = project_with(GOOD);
    p.xtask(&["plan", "demo"])
        .success()
        .stdout_has("b7851f8c66191cd23a0a08bd484465ad74bbbb7d")
        .stdout_has("0002-upstream.patch");
}

#[test]
fn an_unknown_key_is_named_with_its_place() {
    let text = GOOD.replace("license =", "colour = \"red\"\nlicense =");
    let run = plan_refuses(&text);
    run.stderr_has(&format!(
        "recipes/demo.toml:{}:1: `package.colour`: unknown field `colour`",
        line_of(&text, "colour")
    ));
}

#[test]
fn an_unknown_table_is_named() {
    let text = format!("{GOOD}\n[extra]\nx = 1\n");
    plan_refuses(&text).stderr_has("`extra`: unknown field `extra`");
}

#[test]
fn a_wrong_type_is_named_and_not_also_reported_missing() {
    let text = GOOD.replace("version = \"1.0\"", "version = 3");
    let run = plan_refuses(&text);
    run.stderr_has(&format!(
        "recipes/demo.toml:{}:11: `package.version`: invalid type: integer `3`",
        line_of(&text, "version = 3")
    ));
    assert!(
        !run.stderr.contains("missing key `package.version`"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_short_commit_id_is_refused() {
    let text = GOOD.replace(
        "commit = \"b7851f8c66191cd23a0a08bd484465ad74bbbb7d\"",
        "commit = \"b7851f8c\"",
    );
    plan_refuses(&text).stderr_has(&format!(
        "recipes/demo.toml:{}:10: `source.commit`: `b7851f8c` is not a full commit id",
        line_of(&text, "\"b7851f8c\"")
    ));
}

#[test]
fn a_non_hex_sha256_is_refused() {
    let text = GOOD.replace(
        "0000000000000000000000000000000000000000000000000000000000000000",
        "not-a-hash",
    );
    plan_refuses(&text).stderr_has("`patch[1].sha256`: `not-a-hash` is not a sha256");
}

#[test]
fn a_bad_package_compression_is_named_with_its_place() {
    let text = GOOD.replace("license =", "compression = \"xz:9\"\nlicense =");
    project_with(&text)
        .xtask(&["plan", "demo"])
        .fails_with(2)
        .stderr_has(&format!(
            "recipes/demo.toml:{}:15: `package.compression`: `xz:9`: the xz level must be a number from 0 to 6",
            line_of(&text, "compression =")
        ));
    let text = GOOD.replace("license =", "compression = \"lz4\"\nlicense =");
    project_with(&text)
        .xtask(&["plan", "demo"])
        .fails_with(2)
        .stderr_has("`package.compression`: `lz4` is not a compression: use xz[:0-6], zstd[:1-19] or gzip[:1-9]");
}

#[test]
fn a_package_compression_is_planned() {
    let text = GOOD.replace("license =", "compression = \"zstd\"\nlicense =");
    project_with(&text)
        .xtask(&["plan", "demo", "--json"])
        .success()
        .stdout_has("\"compression\": \"zstd:12\"");
}

#[test]
fn a_missing_patch_file_is_named() {
    let p = project_with(GOOD);
    std::fs::remove_file(p.root().join("patches/demo/0001-fix.patch")).unwrap();
    let run = p.xtask(&["plan", "demo"]);
    run.fails_with(2)
        .stderr_has(&format!("recipes/demo.toml:{}:8: `patch[0].file`: patch file patches/demo/0001-fix.patch is missing", line_of(GOOD, "0001-fix.patch")))
        .stderr_has("patches/demo/series:1:1: `0001-fix.patch` is listed but patches/demo has no such file");
}

#[test]
fn series_and_folder_must_agree() {
    let p = project_with(GOOD);
    p.file("patches/demo/0003-stray.patch", "");
    p.xtask(&["plan", "demo"])
        .fails_with(2)
        .stderr_has("`0003-stray.patch` is in the folder but not listed in the series");
    p.file("patches/demo/series", "0001-fix.patch\n0003-stray.patch\n");
    p.xtask(&["plan", "demo"])
        .fails_with(2)
        .stderr_has("patches/demo/series:2:1: `0003-stray.patch` is in the series but no `[[patch]] file = \"0003-stray.patch\"` of the recipe uses it");
}

#[test]
fn duplicate_patch_names_are_refused() {
    let text = GOOD.replace(
        "name = \"0002-upstream.patch\"",
        "name = \"0001-fix.patch\"",
    );
    plan_refuses(&text)
        .stderr_has("duplicate patch name `0001-fix.patch` (first used by patch[0])");
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = GOOD
        .replace("license =", "colour = \"red\"\nlicense =")
        .replace("b7851f8c66191cd23a0a08bd484465ad74bbbb7d", "abc")
        .replace(
            "0000000000000000000000000000000000000000000000000000000000000000",
            "xyz",
        )
        .replace(">=6.11, <6.12.64", "6.12")
        .replace(
            "kind = \"dkms\"",
            "kind = \"dkms\"\nformats = [\"deb\", \"zip\"]",
        );
    let run = plan_refuses(&text);
    for needle in [
        "`package.colour`",
        "`source.commit`",
        "`patch[1].sha256`",
        "`target.kernel`",
        "`zip` is not one of",
    ] {
        run.stderr_has(needle);
    }
    let located = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("recipes/demo.toml:"))
        .count();
    assert_eq!(located, 5, "{}", run.stderr);
}

#[test]
fn keys_of_another_source_kind_are_refused() {
    let text = GOOD.replace("paths = [\"drivers/gpu/drm/amd\"]", "strip = 1");
    plan_refuses(&text).stderr_has("`strip` does not apply to a git source");
}

#[test]
fn a_toml_syntax_error_is_located() {
    let run = project_with("[package\nname = 1\n").xtask(&["plan", "demo"]);
    run.fails_with(2).stderr_has("recipes/demo.toml:1:");
}

#[test]
fn an_unknown_recipe_is_a_plain_failure() {
    Project::new()
        .xtask(&["plan", "nope"])
        .fails_with(1)
        .stderr_has("no recipe named `nope`");
}

#[test]
fn plan_json_is_stable_and_sorted() {
    let p = project_with(GOOD);
    let first = p
        .xtask(&["plan", "demo", "--json"])
        .success()
        .stdout
        .clone();
    let second = p
        .xtask(&["plan", "demo", "--json"])
        .success()
        .stdout
        .clone();
    assert_eq!(first, second);
    let value: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(
        value["patches"][1]["commit"],
        "7a5fb05b5b18e531989aa55b10dfa4be0633207e"
    );
    assert_eq!(value["unpinned"], serde_json::json!([]));
    insta::assert_snapshot!("plan_demo_json", first);
}

#[test]
fn plan_names_what_is_unpinned() {
    let text = GOOD
        .replace(
            "commit = \"b7851f8c66191cd23a0a08bd484465ad74bbbb7d\"\n",
            "",
        )
        .replace(
            "sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n",
            "",
        );
    let run = project_with(&text).xtask(&["plan", "demo"]);
    run.success()
        .stdout_has("unpinned source, patch 0002-upstream.patch (run `cargo xtask lock demo`");
}

#[test]
fn dkms_modules_are_checked() {
    let text = GOOD
        .replace("name = \"amdgpu\"", "name = \"amd gpu\"")
        .replace("location = \"amdgpu\"", "location = \"../x\"");
    plan_refuses(&text)
        .stderr_has("`dkms.module[0].name`: `amd gpu` is not a module name")
        .stderr_has("`dkms.module[0].location`: `../x` must be a relative path");
}

#[test]
fn a_patch_fuzz_is_planned_and_bounded() {
    let text = GOOD.replace(
        "file = \"0001-fix.patch\"\n",
        "file = \"0001-fix.patch\"\nfuzz = 2\n",
    );
    let json = project_with(&text).xtask(&["plan", "demo", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&json.success().stdout).unwrap();
    assert_eq!(plan["patches"][0]["fuzz"], 2);
    assert!(plan["patches"][1].get("fuzz").is_none(), "{plan}");

    let text = GOOD.replace(
        "file = \"0001-fix.patch\"\n",
        "file = \"0001-fix.patch\"\nfuzz = 9\n",
    );
    plan_refuses(&text).stderr_has(&format!(
        "recipes/demo.toml:{}:8: `patch[0].fuzz` must be between 0 and 3",
        line_of(&text, "fuzz = 9")
    ));
}

#[test]
fn fix_pins_are_checked_where_they_are_written() {
    let text = GOOD.replace(
        "sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"",
        "produces = { \"drivers/x.h\" = \"f98c735b2905\", \"../y\" = \"07999b4649ded0805594a39e3a7f16cee5fda408\" }\n\
         diff_sha256 = \"xyz\"\nurls = [\"ftp://example.org/x.patch\"]\npinned_from = [\"\"]",
    );
    let run = plan_refuses(&text);
    let line = |needle: &str| line_of(&text, needle);
    run.stderr_has(&format!(
        "recipes/demo.toml:{}:30: `patch[1].produces`: `f98c735b2905` for `drivers/x.h` is not a full git blob id",
        line("f98c735b2905")
    ))
    .stderr_has("`patch[1].produces`: `../y`:")
    .stderr_has(&format!(
        "recipes/demo.toml:{}:15: `patch[1].diff_sha256`: `xyz` is not a sha256",
        line("diff_sha256")
    ))
    .stderr_has("`patch[1].urls`: `ftp://example.org/x.patch` uses `ftp`")
    .stderr_has("`patch[1].pinned_from`: each entry names one public record");
}

#[test]
fn fix_pins_do_not_apply_to_a_curated_file() {
    let text = GOOD.replace(
        "file = \"0001-fix.patch\"\n",
        "file = \"0001-fix.patch\"\nproduces = { \"x\" = \"07999b4649ded0805594a39e3a7f16cee5fda408\" }\n",
    );
    plan_refuses(&text).stderr_has("`produces` does not apply to a file patch");
}

/// Every shipped recipe is pinned, or says in `why_unpinned` (shown by
/// `list`) and in its comment why not; every remote pin names the public
/// records it was checked against (`pinned_from`); every kernel recipe is
/// pinned and pins its upstream fix by the blobs it produces.
#[test]
fn no_shipped_recipe_is_unpinned_without_saying_why() {
    use xtask::input::recipe::{PatchOrigin, Recipe, Source};
    let root = crate::support::repo_root();
    for name in xtask::input::recipe::list(&root).unwrap() {
        let r = Recipe::load(&root, &name).unwrap();
        let text = std::fs::read_to_string(&r.path).unwrap();
        for (input, why) in r.unpinned_reasons() {
            let why = why.unwrap_or_else(|| {
                panic!("{name}: {input} is unpinned and `why_unpinned` does not say why")
            });
            assert!(
                text.lines()
                    .any(|l| l.starts_with('#') && l.contains("not pinned")),
                "{name}: the comment must say what is not pinned and why ({why})"
            );
        }
        if matches!(r.source, Source::Tarball { .. } | Source::Git { .. })
            && r.source.pin().is_some()
        {
            assert!(
                !r.source_pinned_from.is_empty(),
                "{name}: `source.pinned_from` must name the records of its pin"
            );
        }
        for patch in &r.patches {
            if patch.pin.is_pinned() {
                assert!(
                    !patch.pin.pinned_from.is_empty(),
                    "{name}: {} names no records",
                    patch.name
                );
            }
        }
        if name.starts_with("amdgpu-expert-sched-") {
            assert!(r.unpinned().is_empty(), "{name}: {:?}", r.unpinned());
            let fix = r
                .patches
                .iter()
                .find(|p| matches!(p.origin, PatchOrigin::Git { .. }))
                .unwrap();
            assert_eq!(fix.pin.produces.len(), 2, "{name}: both trap-handler files");
            assert!(fix.pin.urls.len() >= 2, "{name}: cgit and a mirror");
            assert!(
                r.source_pinned_from.len() >= 2,
                "{name}: two records of the tarball"
            );
        }
    }
}

#[test]
fn list_shows_every_kernel_recipe_pinned_and_says_why_others_are_not() {
    let p = Project::new();
    let mut cmd = p.command(&["list"]);
    cmd.env("PATCHKIT_ROOT", crate::support::repo_root());
    let run = Run::of(cmd.output().unwrap());
    run.success();
    assert!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("amdgpu-expert-sched-"))
            .count()
            == 7
    );
    for line in run.stdout.lines().filter(|l| l.starts_with("amdgpu-")) {
        assert!(line.contains("  pinned"), "{line}");
    }
    run.stdout_has("source: the commit the rocm-7.1.1 tag points at is in no public record");
}

/// The blobs the 6.12 and 6.13 recipes pin for the 6.12.64 backport are
/// the trap-handler files of Debian's linux-source-6.12 (6.12.117, which
/// carries that backport), and every kernel recipe pins the same gfx12
/// assembly, which mainline b7851f8c leaves too: computed here from the
/// real tarball with `git hash-object`.
#[test]
fn the_backport_pins_are_the_files_of_debian_linux_source_6_12() {
    use xtask::input::recipe::Recipe;
    let tarball = std::path::Path::new("/usr/src/linux-source-6.12.tar.xz");
    if !tarball.is_file() {
        assert!(
            !crate::support::ci(),
            "CI installs linux-source-6.12 (.ci/setup)"
        );
        eprintln!("skipped: {} is not installed", tarball.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("tar")
        .args([
            "-xJf",
            tarball.to_str().unwrap(),
            "--strip-components=1",
            "-C",
        ])
        .arg(dir.path())
        .args([
            "--wildcards",
            "*/amdkfd/cwsr_trap_handler.h",
            "*/amdkfd/cwsr_trap_handler_gfx12.asm",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let blob = |rel: &str| {
        let out = std::process::Command::new("git")
            .arg("hash-object")
            .arg(dir.path().join(rel))
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let root = crate::support::repo_root();
    let asm = "drivers/gpu/drm/amd/amdkfd/cwsr_trap_handler_gfx12.asm";
    let header = "drivers/gpu/drm/amd/amdkfd/cwsr_trap_handler.h";
    for series in ["6.12", "6.13", "6.14", "6.15", "6.16", "6.17", "6.18"] {
        let r = Recipe::load(&root, &format!("amdgpu-expert-sched-{series}")).unwrap();
        let fix = &r.patches.last().unwrap().pin.produces;
        assert_eq!(fix[asm], blob(asm), "{series}: {asm}");
        if matches!(series, "6.12" | "6.13") {
            assert_eq!(fix[header], blob(header), "{series}: {header}");
        } else {
            assert!(
                fix[header].starts_with("f98c735b2905"),
                "{series}: mainline's post-image"
            );
        }
    }
}
