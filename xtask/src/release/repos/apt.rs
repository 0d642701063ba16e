//! The apt repository: `pool/main/<p>/<source>/*.deb`,
//! `dists/<suite>/main/binary-<arch>/Packages` and `Packages.xz`, and
//! `dists/<suite>/Release` with the indexes' SHA-256 and SHA-512, clear-signed
//! as `InRelease` and signed as `Release.gpg`.
//!
//! Written here rather than by apt-ftparchive: the indexes are a `.deb`'s own
//! control paragraph plus its file name, size and digests, so writing them
//! needs no tool a Fedora or Arch host lacks, and their bytes depend on the
//! inputs alone (sorted, dated with the publication's time).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::deb822::{self, Paragraph};
use super::gpg::Signer;
use super::sums::{self, Sums};
use super::Site;

/// The one component.
pub(crate) const COMPONENT: &str = "main";
/// Architectures every repository indexes, whatever its packages are built
/// for (`all` packages are listed under each).
pub(crate) const BASE_ARCHITECTURES: [&str; 1] = ["amd64"];

/// One `.deb` as the indexes list it.
struct Listed {
    package: String,
    version: String,
    architecture: String,
    pool: String,
    stanza: Paragraph,
}

/// Writes the repository below `root` (the `apt/` folder) from `debs`;
/// returns each package's path below `root`, by file name.
pub(crate) fn write(
    root: &Path,
    debs: &[PathBuf],
    site: &Site,
    signer: &Signer,
) -> Result<BTreeMap<String, String>> {
    let mut listed = Vec::new();
    let mut pools = BTreeMap::new();
    for deb in debs {
        let entry = list(root, deb)?;
        let name = deb
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        pools.insert(name, entry.pool.clone());
        listed.push(entry);
    }
    listed
        .sort_by(|a, b| (&a.package, &a.version, &a.pool).cmp(&(&b.package, &b.version, &b.pool)));
    let mut architectures: BTreeSet<String> =
        BASE_ARCHITECTURES.iter().map(|a| (*a).to_owned()).collect();
    architectures.extend(
        listed
            .iter()
            .filter(|l| l.architecture != "all")
            .map(|l| l.architecture.clone()),
    );
    let dists = root.join("dists").join(&site.suite);
    let mut indexes = Vec::new();
    for arch in &architectures {
        let text: String = listed
            .iter()
            .filter(|l| l.architecture == *arch || l.architecture == "all")
            .map(|l| l.stanza.text() + "\n")
            .collect();
        let rel = format!("{COMPONENT}/binary-{arch}/Packages");
        let xz = compress_xz(text.as_bytes())?;
        sums::write(&dists.join(&rel), &text)?;
        sums::write(&dists.join(format!("{rel}.xz")), &xz)?;
        indexes.push((rel.clone(), Sums::of_bytes(text.as_bytes())));
        indexes.push((format!("{rel}.xz"), Sums::of_bytes(&xz)));
    }
    let release = release(site, &architectures, &indexes, signer.time());
    let release_path = dists.join("Release");
    sums::write(&release_path, &release)?;
    sums::write(
        &dists.join("InRelease"),
        signer.clearsign(release.as_bytes(), "Release")?,
    )?;
    sums::write(
        &dists.join("Release.gpg"),
        signer.detach_file(&release_path, true)?,
    )?;
    Ok(pools)
}

/// Puts `deb` in the pool and makes its index stanza.
fn list(root: &Path, deb: &Path) -> Result<Listed> {
    let what = deb.display().to_string();
    let control = deb822::parse_one(
        &super::read::deb_control(deb)?,
        &format!("the control file of {what}"),
    )?;
    let package = control.need("Package", &what)?.to_owned();
    let version = control.need("Version", &what)?.to_owned();
    let architecture = control.need("Architecture", &what)?.to_owned();
    let source = control
        .get("Source")
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or(&package)
        .to_owned();
    let file_name = deb
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let pool = format!(
        "pool/{COMPONENT}/{}/{source}/{file_name}",
        pool_prefix(&source)
    );
    sums::link_or_copy(deb, &root.join(&pool))?;
    let sums = Sums::of_file(deb)?;
    let mut added = Paragraph::default();
    added.push("Filename", &pool);
    added.push("Size", &sums.size.to_string());
    added.push("MD5sum", &sums.md5);
    added.push("SHA1", &sums.sha1);
    added.push("SHA256", &sums.sha256);
    added.push("SHA512", &sums.sha512);
    Ok(Listed {
        package,
        version,
        architecture,
        pool,
        stanza: control.with_before("Description", &added),
    })
}

/// Debian's pool folder of a source: `libf` for `libfoo`, else its first letter.
pub(crate) fn pool_prefix(source: &str) -> String {
    match source.strip_prefix("lib") {
        Some(rest) if !rest.is_empty() => format!(
            "lib{}",
            &rest[..rest.chars().next().map_or(0, char::len_utf8)]
        ),
        _ => source.chars().next().map(String::from).unwrap_or_default(),
    }
}

/// The `Release` text.
fn release(
    site: &Site,
    architectures: &BTreeSet<String>,
    indexes: &[(String, Sums)],
    time: i64,
) -> String {
    let mut text = format!(
        "Origin: {name}\nLabel: {name}\nSuite: {suite}\nCodename: {suite}\nDate: {date}\n\
         Architectures: {archs}\nComponents: {COMPONENT}\nDescription: {name} packages, \
         signed with {fpr}\n",
        name = super::NAME,
        suite = site.suite,
        date = crate::formats::rfc2822(time.max(0) as u64),
        archs = architectures.iter().cloned().collect::<Vec<_>>().join(" "),
        fpr = site.fingerprint,
    );
    let width = indexes
        .iter()
        .map(|(_, s)| s.size.to_string().len())
        .max()
        .unwrap_or(1);
    for (field, pick) in [("SHA256", 0), ("SHA512", 1)] {
        text.push_str(&format!("{field}:\n"));
        for (rel, sums) in indexes {
            let digest = if pick == 0 {
                &sums.sha256
            } else {
                &sums.sha512
            };
            text.push_str(&format!(" {digest} {:>width$} {rel}\n", sums.size));
        }
    }
    text
}

fn compress_xz(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut enc = xz2::write::XzEncoder::new(Vec::new(), 6);
    enc.write_all(bytes).context("compressing Packages")?;
    enc.finish().context("compressing Packages")
}

#[cfg(test)]
mod tests {
    use super::pool_prefix;

    #[test]
    fn pool_folders_are_debians() {
        assert_eq!(pool_prefix("amdgpu-cwsr-off"), "a");
        assert_eq!(pool_prefix("libhipblaslt"), "libh");
        assert_eq!(pool_prefix("lib"), "l");
    }
}
