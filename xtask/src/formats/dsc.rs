//! Debian source package writer, format `3.0 (quilt)`: the
//! `<src>_<version>-<release>.debian.tar.xz` holding `debian/` (patches in
//! `debian/patches/` with their `series`) and the unsigned `.dsc` that
//! names it and the `.orig.tar.gz` beside it, with the fields, sizes and
//! md5/sha1/sha256 checksums in the order dpkg-source writes them.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::compress::Compression;
use super::packing::Packing;
use super::tar::{write_tree, Names};
use super::tree::FileTree;
use super::{Artifact, Output};

/// The source-stanza fields of `debian/control` a `.dsc` carries, in
/// dpkg-source's order (after Format, Source, Binary, Architecture and
/// Version). Other source fields (Section, Priority, Rules-Requires-Root)
/// stay in `debian/control` only.
const SOURCE_FIELDS: &[&str] = &[
    "Maintainer",
    "Uploaders",
    "Homepage",
    "Standards-Version",
    "Vcs-Browser",
    "Vcs-Git",
    "Testsuite",
    "Build-Depends",
    "Build-Depends-Arch",
    "Build-Depends-Indep",
    "Build-Conflicts",
    "Build-Conflicts-Arch",
    "Build-Conflicts-Indep",
];

/// A Debian source package to write.
pub(crate) struct DebianSource<'a> {
    /// Upstream version (`0.1.0`) and Debian revision (`1`).
    pub(crate) version: &'a str,
    pub(crate) revision: &'a str,
    /// Everything that goes below `debian/`, by path relative to it
    /// (`control`, `rules`, `source/format`, `patches/series`, ...).
    pub(crate) debian: &'a FileTree,
    /// The `<src>_<version>.orig.tar.gz` the `.dsc` names; it must lie in
    /// the output folder.
    pub(crate) orig: &'a Path,
}

/// Writes the `.debian.tar.xz` and then the `.dsc` into `out_dir` (the
/// folder of the orig tarball), returning both.
pub(crate) fn write(
    src: &DebianSource,
    epoch: u64,
    out_dir: &Path,
    packing: &Packing,
) -> Result<Vec<Artifact>> {
    let control = control_text(src.debian)?;
    let stanzas = parse_control(&control)?;
    let (source, binaries) = stanzas
        .split_first()
        .context("debian/control has no source stanza")?;
    let name = field(source, "Source")
        .context("debian/control's first stanza has no `Source:` field")?
        .to_owned();
    if binaries.is_empty() {
        bail!("debian/control of {name} names no binary package: add a `Package:` stanza");
    }
    check_changelog(src, &name)?;
    if src.debian.get("source/format").is_none() {
        bail!("debian/ of {name} has no source/format: render templates/debian/source/format");
    }
    let orig_name = orig_name(src, &name, out_dir)?;
    let tar = debian_tar(src, &name, epoch, out_dir, packing)?;
    let tar_name = super::names::debian_tar(&name, src.version, src.revision);
    let files = [
        (orig_name.to_owned(), sums(src.orig)?),
        (tar_name, sums(&tar.path)?),
    ];
    let packages = binary_packages(binaries)?;
    let dsc = dsc_text(src, &name, source, binaries, &packages, &files);
    let dsc_file = super::names::dsc(&name, src.version, src.revision);
    let mut out = Output::create(out_dir, &dsc_file)?;
    out.writer()
        .write_all(dsc.as_bytes())
        .with_context(|| format!("writing {dsc_file}"))?;
    Ok(vec![tar, out.commit()?])
}

/// The orig tarball's file name, which must be `<name>_<version>.orig.tar.gz`
/// in `out_dir`.
fn orig_name<'a>(src: &DebianSource<'a>, name: &str, out_dir: &Path) -> Result<&'a str> {
    let orig_name = src
        .orig
        .file_name()
        .and_then(|n| n.to_str())
        .context("the orig tarball has no file name")?;
    let want = super::names::orig(name, src.version);
    if orig_name != want || src.orig.parent() != Some(out_dir) {
        bail!(
            "the .dsc of {name} needs {want} in {}, not {}",
            out_dir.display(),
            src.orig.display()
        );
    }
    Ok(orig_name)
}

/// The `.debian.tar.xz`: `debian/...` entries, as dpkg-source writes them.
fn debian_tar(
    src: &DebianSource,
    name: &str,
    epoch: u64,
    out_dir: &Path,
    packing: &Packing,
) -> Result<Artifact> {
    let tar_name = super::names::debian_tar(name, src.version, src.revision);
    let debian = src.debian.nested("debian")?;
    let mut out = Output::create(out_dir, &tar_name)?;
    {
        let enc = packing.encoder(Compression::DEB, out.writer())?;
        let enc = write_tree(enc, &debian, epoch, Names::Plain)?;
        let mut w = enc
            .finish()
            .with_context(|| format!("compressing {tar_name}"))?;
        w.flush().with_context(|| format!("writing {tar_name}"))?;
    }
    out.commit()
}

/// Each binary stanza's `Package` and `Architecture`.
fn binary_packages(binaries: &[Vec<(String, String)>]) -> Result<Vec<(&str, &str)>> {
    binaries
        .iter()
        .map(|b| {
            let package = field(b, "Package").context("a binary stanza has no `Package:` field")?;
            let arch = field(b, "Architecture")
                .with_context(|| format!("binary package {package} has no `Architecture:`"))?;
            Ok((package, arch))
        })
        .collect()
}

/// One digest of a file's [`Sums`], as hex.
type SumOf = fn(&Sums) -> &str;

/// The `.dsc` text, fields in dpkg-source's order.
fn dsc_text(
    src: &DebianSource,
    name: &str,
    source: &[(String, String)],
    binaries: &[Vec<(String, String)>],
    packages: &[(&str, &str)],
    files: &[(String, Sums)],
) -> String {
    let mut archs: Vec<&str> = Vec::new();
    for (_, arch) in packages {
        for a in arch.split_whitespace() {
            if !archs.contains(&a) {
                archs.push(a);
            }
        }
    }
    let mut dsc = String::from("Format: 3.0 (quilt)\n");
    dsc.push_str(&format!("Source: {name}\n"));
    let names: Vec<&str> = packages.iter().map(|(p, _)| *p).collect();
    dsc.push_str(&format!("Binary: {}\n", names.join(", ")));
    dsc.push_str(&format!("Architecture: {}\n", archs.join(" ")));
    dsc.push_str(&format!("Version: {}-{}\n", src.version, src.revision));
    for key in SOURCE_FIELDS {
        if let Some(value) = field(source, key) {
            dsc.push_str(&format!("{key}: {value}\n"));
        }
    }
    dsc.push_str("Package-List:\n");
    let section = field(source, "Section").unwrap_or("misc");
    let priority = field(source, "Priority").unwrap_or("optional");
    for (b, (package, arch)) in binaries.iter().zip(packages) {
        dsc.push_str(&format!(
            " {package} deb {} {} arch={}\n",
            field(b, "Section").unwrap_or(section),
            field(b, "Priority").unwrap_or(priority),
            arch.split_whitespace().collect::<Vec<_>>().join(",")
        ));
    }
    let sums: [(&str, SumOf); 3] = [
        ("Checksums-Sha1", |s| &s.sha1),
        ("Checksums-Sha256", |s| &s.sha256),
        ("Files", |s| &s.md5),
    ];
    for (title, digest) in sums {
        dsc.push_str(&format!("{title}:\n"));
        for (file, s) in files {
            dsc.push_str(&format!(" {} {} {file}\n", digest(s), s.size));
        }
    }
    dsc
}

/// The text of `control` in a `debian/` tree.
fn control_text(debian: &FileTree) -> Result<String> {
    let entry = debian
        .get("control")
        .filter(|e| !e.is_dir())
        .context("debian/ has no control file: render templates/debian/control")?;
    entry.text()
}

/// The changelog's first line must name this source and version, as
/// dpkg-source takes them from there.
fn check_changelog(src: &DebianSource, name: &str) -> Result<()> {
    let entry = src
        .debian
        .get("changelog")
        .filter(|e| !e.is_dir())
        .with_context(|| format!("debian/ of {name} has no changelog"))?;
    let text = entry.text()?;
    let want = format!("{name} ({}-{})", src.version, src.revision);
    if !text.starts_with(&want) {
        bail!(
            "debian/changelog of {name} starts `{}`, not `{want}`: its top entry must be this version",
            text.lines().next().unwrap_or_default()
        );
    }
    Ok(())
}

/// deb822 stanzas as ordered `(field, value)` lists; continuation lines
/// are kept with their newlines and leading space.
fn parse_control(text: &str) -> Result<Vec<Vec<(String, String)>>> {
    let mut stanzas: Vec<Vec<(String, String)>> = Vec::new();
    let mut current: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                stanzas.push(std::mem::take(&mut current));
            }
        } else if line.starts_with([' ', '\t']) {
            let Some(last) = current.last_mut() else {
                bail!(
                    "debian/control:{}: a continuation line with no field before it",
                    i + 1
                );
            };
            last.1.push('\n');
            last.1.push_str(line);
        } else if let Some((key, value)) = line.split_once(':') {
            current.push((key.trim().to_owned(), value.trim().to_owned()));
        } else if !line.starts_with('#') {
            bail!(
                "debian/control:{}: `{line}` is not a `Field: value` line",
                i + 1
            );
        }
    }
    if !current.is_empty() {
        stanzas.push(current);
    }
    Ok(stanzas)
}

fn field<'a>(stanza: &'a [(String, String)], key: &str) -> Option<&'a str> {
    stanza
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

/// Size and the three digests a `.dsc` lists.
struct Sums {
    size: u64,
    md5: String,
    sha1: String,
    sha256: String,
}

fn sums(path: &Path) -> Result<Sums> {
    let (mut md5, mut sha1, mut sha256) = (Md5::new(), Sha1::new(), Sha256::new());
    let size = crate::shared::hash::read_blocks(path, |block| {
        md5.update(block);
        sha1.update(block);
        sha256.update(block);
    })?;
    Ok(Sums {
        size,
        md5: hex::encode(md5.finalize()),
        sha1: hex::encode(sha1.finalize()),
        sha256: hex::encode(sha256.finalize()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_stanzas_keep_order_and_continuations() {
        let text = "Source: x\nBuild-Depends: a,\n b\n\nPackage: x-dkms\nArchitecture: all\nDescription: s\n long\n";
        let s = parse_control(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(field(&s[0], "build-depends"), Some("a,\n b"));
        assert_eq!(field(&s[1], "Description"), Some("s\n long"));
        assert!(parse_control("Source x\n").is_err());
    }
}
