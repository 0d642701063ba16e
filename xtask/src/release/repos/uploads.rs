//! What a packager uploads (`upload/`): each Debian source package with
//! its `.dsc` clear-signed and a signed `<source>_<version>_source.changes`
//! (the fields and order of `dpkg-genchanges -S`, what `debsign` then
//! signs), for dput to a PPA or an archive; and signed copies of the source
//! rpms (`rpmsign --addsign`) for COPR or OBS. The files in `dist/` are
//! never changed: the signed ones are copies.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::deb822::{self, Paragraph};
use super::gpg::Signer;
use super::sums::{self, Sums};

/// Writes the uploads into `dir`; returns the `.changes` files written,
/// relative to `dir`.
pub(crate) fn write(
    dir: &Path,
    dscs: &[PathBuf],
    srpms: &[PathBuf],
    signer: &Signer,
) -> Result<Vec<String>> {
    let mut changes = Vec::new();
    for dsc in dscs {
        changes.push(format!(
            "debian/{}",
            source_upload(&dir.join("debian"), dsc, signer)?
        ));
    }
    if !srpms.is_empty() {
        super::rpm_md::sign_copies(&dir.join("rpm"), srpms, signer)?;
    }
    Ok(changes)
}

/// The source package of `dsc`, signed, with its `.changes`: the name of
/// the `.changes`.
fn source_upload(dir: &Path, dsc: &Path, signer: &Signer) -> Result<String> {
    let what = dsc.display().to_string();
    let text = std::fs::read_to_string(dsc).with_context(|| format!("reading {what}"))?;
    let paragraph = deb822::parse_one(&text, &what)?;
    let source = paragraph.need("Source", &what)?.to_owned();
    let version = paragraph.need("Version", &what)?.to_owned();
    let folder = dsc.parent().context("a .dsc without a folder")?;
    let names: Vec<String> = paragraph
        .lines_of("Files")
        .iter()
        .filter_map(|line| line.split_whitespace().nth(2).map(str::to_owned))
        .collect();
    let Some(debian_tar) = names.iter().find(|n| n.contains(".debian.tar.")) else {
        bail!("{what} lists no .debian.tar.*: only `3.0 (quilt)` source packages are uploaded");
    };
    let debian_tar = folder.join(debian_tar);
    let changelog = String::from_utf8(super::read::tarball_file(&debian_tar, "debian/changelog")?)
        .with_context(|| format!("debian/changelog of {} is not UTF-8", debian_tar.display()))?;
    let control = String::from_utf8(super::read::tarball_file(&debian_tar, "debian/control")?)
        .with_context(|| format!("debian/control of {} is not UTF-8", debian_tar.display()))?;
    let control_what = format!("debian/control of {}", debian_tar.display());
    let source_paragraph = deb822::parse(&control, &control_what)?
        .into_iter()
        .next()
        .with_context(|| format!("{control_what} is empty"))?;
    let entry = Entry::first(
        &changelog,
        &format!("debian/changelog of {}", debian_tar.display()),
    )?;

    let dsc_name = dsc
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let signed_dsc = signer.clearsign(text.as_bytes(), &what)?;
    sums::write(&dir.join(&dsc_name), &signed_dsc)?;
    let mut files = vec![(dsc_name, Sums::of_bytes(&signed_dsc))];
    for name in &names {
        let from = folder.join(name);
        sums::link_or_copy(&from, &dir.join(name))?;
        files.push((name.clone(), Sums::of_file(&from)?));
    }
    let head = Head {
        source: &source,
        version: &version,
        control: &source_paragraph,
    };
    let text = changes(&head, &entry, &files, &control_what)?;
    let upstream_version = version.split_once(':').map_or(version.as_str(), |(_, v)| v);
    let name = format!("{source}_{upstream_version}_source.changes");
    sums::write(&dir.join(&name), signer.clearsign(text.as_bytes(), &name)?)?;
    Ok(name)
}

/// What the `.changes` says of the source package.
struct Head<'a> {
    source: &'a str,
    version: &'a str,
    /// The source paragraph of `debian/control`.
    control: &'a Paragraph,
}

/// The `.changes` text, as `dpkg-genchanges -S` writes it.
fn changes(
    head: &Head,
    entry: &Entry,
    files: &[(String, Sums)],
    control_what: &str,
) -> Result<String> {
    let section = head.control.get("Section").unwrap_or("misc");
    let priority = head.control.get("Priority").unwrap_or("optional");
    let maintainer = head.control.need("Maintainer", control_what)?;
    let mut text = format!(
        "Format: 1.8\nDate: {}\nSource: {}\nArchitecture: source\nVersion: {}\nDistribution: {}\n\
         Urgency: {}\nMaintainer: {maintainer}\nChanged-By: {}\nChanges:\n",
        entry.date, head.source, head.version, entry.distribution, entry.urgency, entry.changed_by
    );
    for line in &entry.lines {
        if line.trim().is_empty() {
            text.push_str(" .\n");
        } else {
            text.push_str(&format!(" {line}\n"));
        }
    }
    text.push_str("Checksums-Sha1:\n");
    for (name, s) in files {
        text.push_str(&format!(" {} {} {name}\n", s.sha1, s.size));
    }
    text.push_str("Checksums-Sha256:\n");
    for (name, s) in files {
        text.push_str(&format!(" {} {} {name}\n", s.sha256, s.size));
    }
    text.push_str("Files:\n");
    for (name, s) in files {
        text.push_str(&format!(
            " {} {} {section} {priority} {name}\n",
            s.md5, s.size
        ));
    }
    Ok(text)
}

/// The newest entry of a `debian/changelog`.
struct Entry {
    /// Its heading and text lines, the trailer and the blank lines before
    /// it left out.
    lines: Vec<String>,
    distribution: String,
    urgency: String,
    changed_by: String,
    date: String,
}

impl Entry {
    fn first(changelog: &str, what: &str) -> Result<Entry> {
        let mut lines = changelog.lines();
        let heading = lines.next().unwrap_or("");
        let (Some((_, after)), Some((_, urgency))) =
            (heading.split_once(") "), heading.split_once("urgency="))
        else {
            bail!("{what}:1: not a `source (version) distribution; urgency=...` heading");
        };
        let distribution = after.split(';').next().unwrap_or("").trim().to_owned();
        let mut body = vec![heading.to_owned()];
        for (i, line) in lines.enumerate() {
            if let Some(trailer) = line.strip_prefix(" -- ") {
                let Some((by, date)) = trailer.split_once("  ") else {
                    bail!(
                        "{what}:{}: the trailer has no two spaces before its date",
                        i + 2
                    );
                };
                while body.last().is_some_and(|l| l.trim().is_empty()) {
                    body.pop();
                }
                return Ok(Entry {
                    lines: body,
                    distribution,
                    urgency: urgency.split_whitespace().next().unwrap_or("").to_owned(),
                    changed_by: by.trim().to_owned(),
                    date: date.trim().to_owned(),
                });
            }
            body.push(line.to_owned());
        }
        bail!("{what}: the first entry has no ` -- Name <address>  date` trailer")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_changes_text_is_dpkg_genchanges_form() {
        let changelog = "x (1.0-1) unstable; urgency=medium\n\n  * One.\n    Two.\n\n -- A B <a@b.c>  Thu, 01 Jan 2026 00:00:00 +0000\n";
        let entry = Entry::first(changelog, "changelog").unwrap();
        let control = deb822::parse_one(
            "Source: x\nSection: kernel\nPriority: optional\nMaintainer: A B <a@b.c>\n",
            "c",
        )
        .unwrap();
        let head = Head {
            source: "x",
            version: "1.0-1",
            control: &control,
        };
        let files = vec![("x_1.0-1.dsc".to_owned(), Sums::of_bytes(b"d"))];
        let text = changes(&head, &entry, &files, "c").unwrap();
        assert!(text.starts_with("Format: 1.8\nDate: Thu, 01 Jan 2026 00:00:00 +0000\nSource: x\n"));
        assert!(text.contains("Distribution: unstable\nUrgency: medium\nMaintainer: A B <a@b.c>\nChanged-By: A B <a@b.c>\n"));
        assert!(text.contains("Changes:\n x (1.0-1) unstable; urgency=medium\n .\n   * One.\n     Two.\nChecksums-Sha1:\n"));
        assert!(text.ends_with(&format!(
            "Files:\n {} 1 kernel optional x_1.0-1.dsc\n",
            Sums::of_bytes(b"d").md5
        )));
    }

    #[test]
    fn a_changelog_without_a_trailer_is_refused_by_name() {
        let err = Entry::first("x (1) unstable; urgency=low\n\n  * a\n", "c.log")
            .err()
            .unwrap();
        assert!(err.to_string().contains("c.log"), "{err}");
    }
}
