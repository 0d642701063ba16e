//! Rendered packaging files: snapshots of the demo recipe's files, and
//! hostile recipe text that must come out inert wherever a shell reads it.

use std::path::Path;
use std::process::Command;

use xtask::input::recipe::Recipe;
use xtask::release::packaging::dkms_files::{self as packaging, Inputs};
use xtask::release::render::{Rendered, Renderer};

use crate::support::tools::stdout;
use crate::support::{repo_root, Project};

fn inputs() -> Inputs {
    Inputs {
        epoch: 1767225600,
        orig_tarball: "patchkit-hello_0.1.0.orig.tar.gz".to_owned(),
        orig_sha256: "1".repeat(64),
        source_dir: "patchkit-hello-0.1.0".to_owned(),
        patch_sha256: vec!["2".repeat(64)],
        tree_entries: vec![
            "Kbuild".to_owned(),
            "Makefile".to_owned(),
            "patchkit_hello.c".to_owned(),
        ],
    }
}

fn render(root: &Path, recipe: &str) -> Rendered {
    let recipe = Recipe::load(root, recipe).unwrap();
    let plan = xtask::line::plan::plan(&recipe).unwrap();
    let renderer = Renderer::new(&repo_root().join("templates")).unwrap();
    packaging::render(
        &renderer,
        &packaging::values(&recipe, &plan, &inputs()).unwrap(),
    )
    .unwrap()
}

/// The packaging files of config recipe `recipe` under `root`.
fn render_config(root: &Path, recipe: &str) -> Rendered {
    let recipe = Recipe::load(root, recipe).unwrap();
    let plan = xtask::line::plan::plan(&recipe).unwrap();
    let renderer = Renderer::new(&repo_root().join("templates")).unwrap();
    let inputs = xtask::release::packaging::config_files::Inputs {
        orig_tarball: format!(
            "{}_{}.orig.tar.gz",
            recipe.name, recipe.package.about.version
        ),
        orig_sha256: "1".repeat(64),
        source_dir: format!("{}-{}", recipe.name, recipe.package.about.version),
        patch_sha256: vec!["2".repeat(64); recipe.patches.len()],
    };
    let values = xtask::release::packaging::config_files::values(&recipe, &plan, &inputs).unwrap();
    xtask::release::packaging::config_files::render(&renderer, &values).unwrap()
}

#[test]
fn the_cwsr_off_packaging_files_are_as_reviewed() {
    let files = render_config(&repo_root(), "amdgpu-cwsr-off");
    for (name, text) in &files {
        insta::assert_snapshot!(
            format!("render_cwsr_off__{}", name.replace('/', "__")),
            text
        );
    }
}

#[test]
fn the_demo_packaging_files_are_as_reviewed() {
    let files = render(&repo_root(), "demo-hello");
    for (name, text) in &files {
        insta::assert_snapshot!(format!("render_demo__{}", name.replace('/', "__")), text);
    }
}

#[test]
fn every_template_is_used() {
    let files = render(&repo_root(), "demo-hello");
    let config = render_config(&repo_root(), "amdgpu-cwsr-off");
    for template in xtask::release::render::template_files(&repo_root().join("templates")).unwrap()
    {
        let name = template.trim_end_matches(".hbs");
        if name.starts_with("repos/") {
            let used = xtask::release::repos::keyring::TEMPLATES.contains(&name);
            assert!(used, "templates/{template} is never rendered");
            continue;
        }
        if let Some(name) = name.strip_prefix("config/") {
            let used = config.contains_key(name)
                || (name == "rpm/spec" && config.keys().any(|k| k.ends_with(".spec")));
            assert!(used, "templates/{template} is never rendered");
            continue;
        }
        let used = files.contains_key(name)
            || (name == "rpm/spec" && files.keys().any(|k| k.ends_with(".spec")))
            || (name == "arch/PKGBUILD" && files.contains_key("arch/PKGBUILD"))
            || (name == "scripts/arch-install" && files.keys().any(|k| k.ends_with(".install")));
        assert!(used, "templates/{template} is never rendered");
    }
}

const HOSTILE: &str = r#"
[package]
name = "evil"
version = "1.0"
summary = "it's $(touch CANARY) `touch CANARY` \"quoted\" 100% %{_bindir}"
description = """
Line one with $(touch CANARY) and `touch CANARY`.

See %files
/etc/shadow
Depends: rootkit
"""
license = "GPL-2.0-only'; touch CANARY; '"
homepage = "https://example.org/'$(touch%20CANARY)'"
maintainer = "Eve '$(touch CANARY)' <eve@example.org>"

[source]
local = "src"

[target]
kind = "dkms"
kernel = ">=6.1"

[dkms]
make = "make -C ${kernel_source_dir} M=$(pwd) \"$(touch CANARY)\" `touch CANARY`"

[[dkms.module]]
name = "evil"
"#;

#[test]
fn hostile_recipe_text_stays_inert() {
    let p = Project::new();
    p.recipe("evil", HOSTILE).file("src/evil.c", "");
    let files = render(p.root(), "evil");
    let dir = p.root().join("rendered");
    for (name, text) in &files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    // Files a shell sources: sourcing them runs nothing and keeps every value literal.
    for (file, var, expected) in [
        (
            "dkms.conf",
            "MAKE[0]",
            "make -C ${kernel_source_dir} M=$(pwd) \"$(touch CANARY)\" `touch CANARY`",
        ),
        (
            "arch/PKGBUILD",
            "pkgdesc",
            "it's $(touch CANARY) `touch CANARY` \"quoted\" 100% %{_bindir}",
        ),
        (
            "arch/PKGBUILD",
            "license[0]",
            "GPL-2.0-only'; touch CANARY; '",
        ),
    ] {
        let out = stdout(
            Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "set -eu; source ./{file}; printf '%s' \"${{{var}}}\""
                ))
                .current_dir(&dir),
        );
        assert_eq!(out, expected, "{file} {var}");
    }
    // Scripts parse, and none of the hostile text reached them.
    for script in [
        "scripts/postinst",
        "scripts/prerm",
        "scripts/rpm-post",
        "scripts/rpm-preun",
    ] {
        let status = Command::new("sh")
            .arg("-n")
            .arg(dir.join(script))
            .status()
            .unwrap();
        assert!(status.success(), "{script} does not parse");
        assert!(!files[script].contains("CANARY"));
    }
    assert!(
        !dir.join("CANARY").exists(),
        "a rendered file ran a command"
    );
    // RPM: `%` cannot start a macro or a section.
    let spec = &files["rpm/evil-dkms.spec"];
    assert!(spec.contains("100%% %%{_bindir}"), "{spec}");
    assert!(spec.contains("\nSee %%files\n/etc/shadow"), "{spec}");
    assert_eq!(spec.matches("\n%files\n").count(), 1);
    // Debian control: the description cannot start a field of its own.
    let control = &files["debian/control"];
    assert!(control.contains("\n Depends: rootkit\n"), "{control}");
    assert!(control.contains("\n .\n See %files\n"), "{control}");
}

#[test]
fn hostile_config_recipe_text_stays_inert() {
    let package = &HOSTILE[..HOSTILE.find("[target]").unwrap()];
    let recipe = format!(
        "{package}[target]\nkind = \"config\"\nformats = [\"deb\", \"rpm\", \"arch\"]\n\n\
         [config]\nfiles = [{{ source = \"evil.conf\", dest = \"/etc/modprobe.d/evil.conf\" }}]\n"
    );
    let p = Project::new();
    p.recipe("evil", &recipe).file("src/evil.conf", "");
    let files = render_config(p.root(), "evil");
    let dir = p.root().join("rendered");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("PKGBUILD"), &files["arch/PKGBUILD"]).unwrap();
    // Sourcing the PKGBUILD runs nothing and keeps every value literal.
    let out = stdout(
        Command::new("bash")
            .arg("-c")
            .arg("set -eu; source ./PKGBUILD; printf '%s|%s|%s' \"$pkgdesc\" \"${license[0]}\" \"${backup[0]}\"")
            .current_dir(&dir),
    );
    assert_eq!(
        out,
        "it's $(touch CANARY) `touch CANARY` \"quoted\" 100% %{_bindir}|\
         GPL-2.0-only'; touch CANARY; '|etc/modprobe.d/evil.conf"
    );
    assert!(!dir.join("CANARY").exists(), "the PKGBUILD ran a command");
    // RPM: `%` cannot start a macro or a section; one %files, one %config.
    let spec = &files["rpm/evil.spec"];
    assert!(spec.contains("100%% %%{_bindir}"), "{spec}");
    assert!(spec.contains("\nSee %%files\n/etc/shadow"), "{spec}");
    assert_eq!(spec.matches("\n%files\n").count(), 1);
    assert!(
        spec.ends_with("\n%files\n%config(noreplace) /etc/modprobe.d/evil.conf\n"),
        "{spec}"
    );
    // Debian control: the description cannot start a field of its own;
    // debian/rules names only the recipe's checked paths.
    let control = &files["debian/control"];
    assert!(control.contains("\n Depends: rootkit\n"), "{control}");
    assert!(!files["debian/rules"].contains("CANARY"));
}
