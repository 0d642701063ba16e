//! A binary package (`.deb`): the `ar` archive of `debian-binary`,
//! `control.tar.*` and `data.tar.*`, extracted as `dpkg-deb -R` lays it
//! out: the data members at the root of the tree, the control members
//! under `DEBIAN/`. Both go through the same tar reader and [`Sink`] as
//! every archive (the same refusals and limits); anything else in the `ar`
//! is refused. The tree keeps files 0644/0755: the data's other modes
//! (0600, 0440, setuid...) are listed in `DEBIAN/.patchkit-modes`, which
//! the package that carries this one's control takes them from; a data
//! entry not owned by root is refused (such a package is not carried).

use std::io::{BufRead, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::sink::ArchiveMeta;
use super::tar_stream::{stream, stream_meta};
use super::{Limits, Selection};
use crate::apply::state::{FileId, TreeListing};

pub(super) const AR_MAGIC: &[u8] = b"!<arch>\n";
/// Where the control members go, as `dpkg-deb -R` puts them.
pub(crate) const CONTROL_DIR: &str = "DEBIAN";
/// The data's modes other than 0644/0755 (0755 for a folder), in
/// [`CONTROL_DIR`]: `<octal mode> <path>` lines, sorted by path.
pub(crate) const MODES_FILE: &str = ".patchkit-modes";

/// Extracts the package read from `input` (positioned at the `ar` magic) into `dest`.
pub(super) fn deb(mut input: impl BufRead, dest: &Path, limits: Limits) -> Result<TreeListing> {
    let mut magic = [0u8; 8];
    input
        .read_exact(&mut magic)
        .context("reading the ar magic")?;
    let mut manifest = TreeListing::new();
    let (mut version, mut control, mut data) = (false, false, false);
    let mut index = 0;
    while let Some((name, size)) = header(&mut input)? {
        index += 1;
        let mut member = (&mut input).take(size);
        let member_name = name.clone();
        let at = || format!("member {index} (`{member_name}`) of the package");
        match name.as_str() {
            "debian-binary" if index == 1 => {
                let mut text = String::new();
                (&mut member).take(64).read_to_string(&mut text).with_context(at)?;
                if !text.starts_with("2.") {
                    bail!("the package format is `{}`, not 2.x: not a .deb dpkg reads", text.trim());
                }
                version = true;
            }
            n if n.starts_with("control.tar") && version && !control => {
                let dir = dest.join(CONTROL_DIR);
                if std::fs::symlink_metadata(&dir).is_ok() {
                    bail!("the package's data holds a `{CONTROL_DIR}` entry, where its control members go");
                }
                std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
                let got = stream(std::io::BufReader::new(&mut member), &Selection::default(), &dir, limits)
                    .with_context(at)?;
                if got.contains_key(MODES_FILE) {
                    bail!("the package's control holds `{MODES_FILE}`, a name this tool keeps for the data's modes");
                }
                manifest.extend(got.into_iter().map(|(p, id)| (format!("{CONTROL_DIR}/{p}"), id)));
                control = true;
            }
            n if n.starts_with("data.tar") && control && !data => {
                let (got, meta) = stream_meta(std::io::BufReader::with_capacity(1 << 20, &mut member), &Selection::default(), dest, limits)
                    .with_context(at)?;
                if got.keys().any(|p| p == CONTROL_DIR || p.starts_with(&format!("{CONTROL_DIR}/"))) {
                    bail!("the package's data holds a `{CONTROL_DIR}` entry, where its control members go");
                }
                manifest.extend(got);
                if let Some((rel, id)) = keep_meta(dest, &meta)? {
                    manifest.insert(rel, id);
                }
                data = true;
            }
            _ => bail!(
                "{} is not what a .deb holds there (debian-binary, control.tar.*, data.tar.*, in that order)",
                at()
            ),
        }
        // What the member's reader left, and the pad byte of an odd size.
        std::io::copy(&mut member, &mut std::io::sink()).with_context(at)?;
        if size % 2 == 1 {
            let mut pad = [0u8; 1];
            input.read_exact(&mut pad).with_context(at)?;
        }
    }
    if !data {
        bail!("the package ends before its data member: it is truncated or not a .deb");
    }
    Ok(manifest)
}

/// Refuses data not owned by root, and writes the data's modes that the
/// tree does not keep to `DEBIAN/.patchkit-modes` (nothing when there are
/// none); the file's manifest entry.
fn keep_meta(dest: &Path, meta: &ArchiveMeta) -> Result<Option<(String, FileId)>> {
    if let Some((rel, (uid, gid, user, group))) = meta.owners.iter().next() {
        bail!(
            "the package's data entry `{rel}` is owned by {user}:{group} ({uid}:{gid}), not root: \
             a package with files of other owners is not carried"
        );
    }
    if meta.modes.is_empty() {
        return Ok(None);
    }
    let text: String = meta
        .modes
        .iter()
        .map(|(rel, mode)| format!("{mode:04o} {rel}\n"))
        .collect();
    let path = dest.join(CONTROL_DIR).join(MODES_FILE);
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    Ok(Some((
        format!("{CONTROL_DIR}/{MODES_FILE}"),
        FileId {
            mode: 0o100644,
            sha256: crate::shared::hash::sha256_hex(text.as_bytes()),
            size: text.len() as u64,
        },
    )))
}

/// The modes `DEBIAN/.patchkit-modes` of an extracted package lists, by
/// path; empty when it has none.
pub(crate) fn data_modes(tree: &Path) -> Result<std::collections::BTreeMap<String, u32>> {
    let path = tree.join(CONTROL_DIR).join(MODES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let parsed = line
                .split_once(' ')
                .and_then(|(mode, rel)| Some((rel.to_owned(), u32::from_str_radix(mode, 8).ok()?)));
            parsed
                .with_context(|| format!("{}:{}: not `<octal mode> <path>`", path.display(), i + 1))
        })
        .collect()
}

/// The next member's name and size, `None` at the end of the archive.
fn header(input: &mut impl BufRead) -> Result<Option<(String, u64)>> {
    if input.fill_buf()?.is_empty() {
        return Ok(None);
    }
    let mut h = [0u8; 60];
    input
        .read_exact(&mut h)
        .context("the package ends inside an ar member header: it is truncated")?;
    if &h[58..60] != b"`\n" {
        bail!("an ar member header of the package is damaged (no end marker)");
    }
    let name = String::from_utf8_lossy(&h[..16])
        .trim_end()
        .trim_end_matches('/')
        .to_owned();
    let size = std::str::from_utf8(&h[48..58])
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .with_context(|| format!("the ar member `{name}` has no readable size"))?;
    Ok(Some((name, size)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, bytes) in entries {
            let mut h = tar::Header::new_gnu();
            h.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append(&h, *bytes).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn deb_of(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = AR_MAGIC.to_vec();
        for (name, bytes) in members {
            crate::formats::ar::member(&mut out, name, 0, bytes).unwrap();
        }
        out
    }

    fn extract(deb: &[u8]) -> Result<TreeListing> {
        let dir = tempfile::tempdir().unwrap();
        deb_read(deb, dir.path())
    }

    fn deb_read(bytes: &[u8], dest: &Path) -> Result<TreeListing> {
        deb(std::io::BufReader::new(bytes), dest, Limits::DEFAULT)
    }

    #[test]
    fn a_deb_lands_as_dpkg_deb_r_lays_it_out() {
        let bytes = deb_of(&[
            ("debian-binary", b"2.0\n".to_vec()),
            ("control.tar", tar_of(&[("./control", b"Package: x\n")])),
            ("data.tar", tar_of(&[("./usr/lib/x.co", b"abc")])),
        ]);
        let got = extract(&bytes).unwrap();
        let paths: Vec<&str> = got.keys().map(String::as_str).collect();
        assert_eq!(paths, ["DEBIAN/control", "usr/lib/x.co"]);
    }

    #[test]
    fn a_deb_is_refused_when_it_escapes_misorders_or_ends_early() {
        let control = ("control.tar", tar_of(&[("./control", b"Package: x\n")]));
        let version = ("debian-binary", b"2.0\n".to_vec());
        let escape = deb_of(&[
            version.clone(),
            control.clone(),
            ("data.tar", tar_of(&[("../evil", b"x")])),
        ]);
        assert!(format!("{:#}", extract(&escape).unwrap_err()).contains("refused"));
        let shadow = deb_of(&[
            version.clone(),
            control.clone(),
            ("data.tar", tar_of(&[("./DEBIAN/postinst", b"x")])),
        ]);
        assert!(extract(&shadow).is_err());
        let misordered = deb_of(&[control.clone(), version.clone()]);
        assert!(
            format!("{:#}", extract(&misordered).unwrap_err()).contains("not what a .deb holds")
        );
        let no_data = deb_of(&[version, control]);
        assert!(format!("{:#}", extract(&no_data).unwrap_err()).contains("before its data member"));
    }
}
