//! A format that exists only in unit tests (`plain`: the tree as a
//! `.plain.tar.gz`, its scripts under `.scripts/`), to show what adding a
//! format takes: this file and the variant with its arm in
//! [`super::Format::get`]. Everything else (the recipe's and the command
//! line's lists, file names, grammar, the DKMS scripts, the writer) asks
//! its [`PackageFormat`] implementation.

use std::path::Path;

use anyhow::Result;

use super::compress::Compression;
use super::format::{PackageFormat, ScriptTemplates, Sources};
use super::meta::{Architecture, Grammar, PackageMeta};
use super::packing::Packing;
use super::{format_rpm, tar, tarball, Artifact, Package};
use crate::shared::hash::memo::Want;

/// The `.plain.tar.gz`.
pub(crate) struct Plain;

impl PackageFormat for Plain {
    fn name(&self) -> &'static str {
        "plain"
    }

    fn label(&self) -> &'static str {
        "plain tarball"
    }

    fn file_name(&self, meta: &PackageMeta, _machine: Architecture) -> String {
        format!("{}-{}.plain.tar.gz", meta.name, meta.full_version())
    }

    fn grammar(&self) -> &'static Grammar {
        &format_rpm::GRAMMAR
    }

    fn digests(&self) -> Want {
        Want::default()
    }

    fn compression(&self) -> Compression {
        Compression::TARBALL
    }

    /// Debian's pair, kept under `.scripts/` in the tarball.
    fn dkms_scripts(&self) -> ScriptTemplates {
        ScriptTemplates {
            post_install: Some("postinst"),
            pre_remove: Some("prerm"),
            install: None,
        }
    }

    fn source_packages(&self, _meta: &PackageMeta) -> Vec<String> {
        Vec::new()
    }

    fn write_source_packages(&self, _src: &Sources, _out_dir: &Path) -> Result<Vec<Artifact>> {
        Ok(Vec::new())
    }

    fn write(&self, pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
        pkg.meta.validate(super::Format::Plain)?;
        let mut tree = pkg.tree.clone();
        let scripts = [
            ("post-install", &pkg.scripts.post_install),
            ("pre-remove", &pkg.scripts.pre_remove),
        ];
        for (name, text) in scripts {
            if let Some(text) = text {
                tree.add_bytes(&format!(".scripts/{name}"), text.clone().into_bytes(), true)?;
            }
        }
        let name = self.file_name(pkg.meta, pkg.machine);
        tarball::write_tar_gz(&tree, tar::Names::Plain, pkg.epoch, out_dir, &name, packing)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::process::Command;

    use super::super::meta::tests::sample;
    use super::super::{write, Architecture, FileTree, Format, Package, Scripts};

    /// The DKMS scripts of every format as `templates/scripts/` holds
    /// them (rendering them is `release`'s, whose tests do; what a format
    /// picks is what this asks).
    fn template_scripts() -> BTreeMap<String, String> {
        let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates");
        let mut out = BTreeMap::new();
        for format in Format::ALL {
            for name in format.get().dkms_scripts().names() {
                let file = templates.join(format!("scripts/{name}.hbs"));
                let text = std::fs::read_to_string(&file).unwrap();
                out.insert(format!("scripts/{name}"), text);
            }
        }
        out
    }

    use super::*;

    #[test]
    fn the_new_format_is_listed_and_named() {
        assert_eq!(Format::from_name("plain"), Some(Format::Plain));
        assert!(Format::ALL.contains(&Format::Plain));
        assert_eq!(Format::Plain.as_str(), "plain");
        assert_eq!(serde_json::to_string(&Format::Plain).unwrap(), "\"plain\"");
        let meta = sample();
        meta.validate(Format::Plain).unwrap();
        let mut bad = sample();
        bad.name = "-bad".into();
        let err = bad.validate(Format::Plain).unwrap_err().to_string();
        assert!(
            err.contains("invalid plain tarball package metadata"),
            "{err}"
        );
    }

    #[test]
    fn a_dkms_package_of_the_new_format_runs_dkms() {
        let rendered = template_scripts();
        let scripts = Format::Plain.get().dkms_scripts().fill(&rendered).unwrap();
        assert!(
            scripts.post_install.as_deref().unwrap().contains("dkms"),
            "{scripts:?}"
        );
        let out = tempfile::tempdir().unwrap();
        let mut tree = FileTree::new();
        tree.add_bytes(
            "usr/src/patchkit-hello-0.1.0/dkms.conf",
            b"PACKAGE_NAME=x\n".to_vec(),
            false,
        )
        .unwrap();
        let meta = sample();
        let pkg = Package {
            meta: &meta,
            machine: Architecture::Any,
            tree: &tree,
            scripts: &scripts,
            pkgbuild: None,
            epoch: 1_767_225_600,
        };
        let artifact = write(Format::Plain, &pkg, out.path(), &Packing::default()).unwrap();
        assert_eq!(artifact.path, out.path().join(pkg.file_name(Format::Plain)));
        let listing = Command::new("tar")
            .arg("-tzf")
            .arg(&artifact.path)
            .output()
            .unwrap();
        assert!(listing.status.success());
        let listing = String::from_utf8(listing.stdout).unwrap();
        for entry in [
            ".scripts/post-install",
            ".scripts/pre-remove",
            "usr/src/patchkit-hello-0.1.0/dkms.conf",
        ] {
            assert!(
                listing.lines().any(|l| l == entry),
                "{entry} missing from {listing}"
            );
        }
        let none = Scripts::default();
        assert_ne!(scripts, none);
    }
}
