//! The pacman repository (`pacman/`): the packages with their detached
//! binary signatures (`.sig`), `rocm-patchkit.db.tar.gz` and
//! `rocm-patchkit.files.tar.gz`, each also under its short name
//! (`rocm-patchkit.db`, a copy: a published folder holds no symlink), and
//! a `.sig` beside each database.
//!
//! Written here rather than by repo-add: an entry is the package's
//! `.PKGINFO` in `desc` form plus its sizes, digests and signature (the
//! mapping is repo-add's own), and repo-add stamps the database with the
//! current time; ours is a tarball of fixed owners and the publication's
//! time, gzip without a name or a time.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::gpg::Signer;
use super::sums::{self, Sums};

/// One package's entry: its folder name and its `desc` and `files` texts.
struct Entry {
    folder: String,
    desc: String,
    files: String,
}

/// The fields of `desc` in repo-add's order: (`desc` name, `.PKGINFO` key).
/// `None` keys are filled from the file itself.
const FIELDS: [(&str, Option<&str>); 23] = [
    ("FILENAME", None),
    ("NAME", Some("pkgname")),
    ("BASE", Some("pkgbase")),
    ("VERSION", Some("pkgver")),
    ("DESC", Some("pkgdesc")),
    ("GROUPS", Some("group")),
    ("CSIZE", None),
    ("ISIZE", Some("size")),
    ("MD5SUM", None),
    ("SHA256SUM", None),
    ("PGPSIG", None),
    ("URL", Some("url")),
    ("LICENSE", Some("license")),
    ("ARCH", Some("arch")),
    ("BUILDDATE", Some("builddate")),
    ("PACKAGER", Some("packager")),
    ("REPLACES", Some("replaces")),
    ("CONFLICTS", Some("conflict")),
    ("PROVIDES", Some("provides")),
    ("DEPENDS", Some("depend")),
    ("OPTDEPENDS", Some("optdepend")),
    ("MAKEDEPENDS", Some("makedepend")),
    ("CHECKDEPENDS", Some("checkdepend")),
];

/// Keys that may appear more than once (every value kept); of the others
/// the last wins, as repo-add reads them.
const LISTS: [&str; 9] = [
    "group",
    "license",
    "replaces",
    "depend",
    "conflict",
    "provides",
    "optdepend",
    "makedepend",
    "checkdepend",
];

/// Writes the repository `name` into `dir` from `packages`.
pub(crate) fn write(dir: &Path, name: &str, packages: &[PathBuf], signer: &Signer) -> Result<()> {
    let mut entries = Vec::new();
    for package in packages {
        let file_name = package
            .file_name()
            .context("a package without a file name")?;
        let copy = dir.join(file_name);
        sums::link_or_copy(package, &copy)?;
        let sig = signer.detach_file(&copy, false)?;
        let mut sig_name = file_name.to_os_string();
        sig_name.push(".sig");
        sums::write(&dir.join(sig_name), &sig)?;
        entries.push(entry(&copy, &sig)?);
    }
    entries.sort_by(|a, b| a.folder.cmp(&b.folder));
    let time = signer.time().max(0) as u64;
    let db = database(&entries, false, time)?;
    let files = database(&entries, true, time)?;
    for (short, bytes) in [("db", db), ("files", files)] {
        for file in [format!("{name}.{short}.tar.gz"), format!("{name}.{short}")] {
            let path = dir.join(&file);
            sums::write(&path, &bytes)?;
            sums::write(
                &dir.join(format!("{file}.sig")),
                signer.detach_file(&path, false)?,
            )?;
        }
    }
    Ok(())
}

/// The entry of the package at `path`, signed by `sig`.
fn entry(path: &Path, sig: &[u8]) -> Result<Entry> {
    let (info, paths) = super::read::pkginfo(path)?;
    let mut values: Vec<(String, String)> = Vec::new();
    for line in info.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.split_once(" = ") else {
            continue;
        };
        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
        let key = key.trim().to_owned();
        if !LISTS.contains(&key.as_str()) {
            values.retain(|(k, _)| *k != key);
        }
        values.push((key, value));
    }
    let get = |key: &str| -> Vec<String> {
        values
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let (name, version) = (get("pkgname").concat(), get("pkgver").concat());
    anyhow::ensure!(
        !name.is_empty() && !version.is_empty(),
        "{}: .PKGINFO names no pkgname or pkgver",
        path.display()
    );
    let file_sums = Sums::of_file(path)?;
    let mut desc = String::new();
    for (field, key) in FIELDS {
        let list = match (field, key) {
            (_, Some(key)) => get(key),
            ("FILENAME", _) => vec![path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()],
            ("CSIZE", _) => vec![file_sums.size.to_string()],
            ("MD5SUM", _) => vec![file_sums.md5.clone()],
            ("SHA256SUM", _) => vec![file_sums.sha256.clone()],
            _ => vec![base64(sig)],
        };
        let list: Vec<_> = list.into_iter().filter(|v| !v.is_empty()).collect();
        if !list.is_empty() {
            desc.push_str(&format!("%{field}%\n{}\n\n", list.join("\n")));
        }
    }
    let mut files = String::from("%FILES%\n");
    for p in paths {
        files.push_str(&p);
        files.push('\n');
    }
    Ok(Entry {
        folder: format!("{name}-{version}"),
        desc,
        files,
    })
}

/// The database tarball, gzip-compressed: a folder per package with its
/// `desc` (and its `files` for the files database).
fn database(entries: &[Entry], with_files: bool, time: u64) -> Result<Vec<u8>> {
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    let header = |path: &str, size: usize, dir: bool| -> Result<tar::Header> {
        let mut h = tar::Header::new_ustar();
        h.set_path(path)?;
        h.set_size(size as u64);
        h.set_mode(if dir { 0o755 } else { 0o644 });
        h.set_entry_type(if dir {
            tar::EntryType::Directory
        } else {
            tar::EntryType::Regular
        });
        h.set_mtime(time);
        h.set_uid(0);
        h.set_gid(0);
        h.set_username("root")?;
        h.set_groupname("root")?;
        h.set_cksum();
        Ok(h)
    };
    for entry in entries {
        let dir = header(&format!("{}/", entry.folder), 0, true)?;
        tar.append(&dir, std::io::empty())?;
        let mut members = vec![("desc", &entry.desc)];
        if with_files {
            members.insert(0, ("files", &entry.files));
        }
        for (name, text) in members {
            let h = header(&format!("{}/{name}", entry.folder), text.len(), false)?;
            tar.append(&h, text.as_bytes())?;
        }
    }
    let mut gz = tar.into_inner().context("writing the pacman database")?;
    gz.flush().context("writing the pacman database")?;
    gz.finish().context("compressing the pacman database")
}

/// Standard base64 with padding, as `base64` prints it (no line breaks).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_pads_as_the_tool_does() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
