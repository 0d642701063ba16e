//! The rpm format (`rpm`): binary packages written by [`super::rpm`], the
//! `.src.rpm` of [`super::srpm`] from the rendered spec, rpm's grammar of
//! names and releases, and the `%post`/`%preun` pair of Fedora-style DKMS
//! packages.

use std::path::Path;

use anyhow::{Context, Result};

use super::compress::Compression;
use super::format::{file_name, PackageFormat, ScriptTemplates, Sources};
use super::meta::{Architecture, Grammar, PackageMeta};
use super::packing::Packing;
use super::{names, rpm, srpm, Artifact, Package};
use crate::shared::hash::memo::Want;

/// The `.rpm`.
pub(crate) struct Rpm;

/// rpm's names and releases: letters, digits and a few marks.
pub(super) static GRAMMAR: Grammar = Grammar {
    name_rule: "letters, digits and `._+-`, not starting with `-`",
    name_ok,
    release_rule: "letters, digits and `._+~`, starting with a digit",
    release_ok,
};

fn name_ok(name: &str) -> bool {
    name.chars().next().is_some_and(|first| first != '-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
}

fn release_ok(r: &str) -> bool {
    r.starts_with(|c: char| c.is_ascii_digit())
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+~".contains(c))
}

impl PackageFormat for Rpm {
    fn name(&self) -> &'static str {
        "rpm"
    }

    fn label(&self) -> &'static str {
        "rpm"
    }

    /// `<name>-<version>-<release>.<arch>.rpm`
    fn file_name(&self, meta: &PackageMeta, machine: Architecture) -> String {
        format!(
            "{}-{}-{}.{}.rpm",
            meta.name,
            meta.about.version,
            meta.about.release,
            machine.rpm()
        )
    }

    fn grammar(&self) -> &'static Grammar {
        &GRAMMAR
    }

    fn digests(&self) -> Want {
        Want::SHA256
    }

    fn compression(&self) -> Compression {
        Compression::RPM
    }

    /// `%post` and `%preun`.
    fn dkms_scripts(&self) -> ScriptTemplates {
        ScriptTemplates {
            post_install: Some("rpm-post"),
            pre_remove: Some("rpm-preun"),
            install: None,
        }
    }

    /// `<name>-<version>-<release>.src.rpm`
    fn source_packages(&self, meta: &PackageMeta) -> Vec<String> {
        vec![names::srpm(meta)]
    }

    /// Source0 the orig tarball, then (dkms) Source1 dkms.conf, then the
    /// patches in series order.
    fn write_source_packages(&self, src: &Sources, out_dir: &Path) -> Result<Vec<Artifact>> {
        let spec_name = format!("{}.spec", src.meta.name);
        let spec = src
            .rendered
            .get(&format!("rpm/{spec_name}"))
            .with_context(|| format!("the spec rpm/{spec_name} was not rendered"))?;
        let mut sources = vec![(file_name(src.orig), src.orig)];
        sources.extend(
            src.extra
                .iter()
                .map(|(name, path)| (name.clone(), path.as_path())),
        );
        let patches: Vec<(String, &Path)> = src
            .patches
            .iter()
            .map(|(name, path)| (name.clone(), path.as_path()))
            .collect();
        let written = srpm::write(
            src.meta,
            &srpm::SourceRpm {
                spec_name: &spec_name,
                spec,
                sources: &sources,
                patches: &patches,
                build_arch: "noarch",
            },
            src.epoch,
            out_dir,
            src.packing,
        )?;
        Ok(vec![written])
    }

    fn write(&self, pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
        rpm::write(pkg, out_dir, packing)
    }
}
