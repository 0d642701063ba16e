//! `.deb` writer: `debian-binary`, `control.tar.xz` (control, md5sums,
//! maintainer scripts) and `data.tar.xz` in an `ar` archive (`.zst` or
//! `.gz` members when the build's [`Packing`] says), plus the
//! `copyright` (DEP-5) and `changelog.Debian.gz` that Debian policy asks
//! of every binary package.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::compress::Compression;
use super::meta::{Architecture, PackageMeta};
use super::packing::Packing;
use super::tar::{Names, TarWriter};
use super::tree::{FileTree, Kind};
use super::Format;
use super::{ar, names, rfc2822, scratch, Artifact, Output, Package, Scripts};
use crate::shared::hash::memo::Want;

/// Writes `<out_dir>/<file name>` holding the package's tree (which should
/// not carry `usr/share/doc/<name>`: it is generated here).
pub(crate) fn write(pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
    let (meta, machine, tree, scripts, epoch) =
        (pkg.meta, pkg.machine, pkg.tree, pkg.scripts, pkg.epoch);
    meta.validate(Format::Deb)?;
    let mut tree = tree.clone();
    let doc = format!("usr/share/doc/{}", meta.name);
    tree.add_dir(&doc)?;
    tree.add_bytes(&format!("{doc}/copyright"), copyright(meta)?, false)?;
    let changelog = packing.compress(Compression::Gzip(9), changelog(meta, epoch).as_bytes())?;
    tree.add_bytes(&format!("{doc}/changelog.Debian.gz"), changelog, false)?;
    if let Some(text) = lintian_overrides(meta) {
        // A tree may bring overrides of its own: ours go after them.
        let path = format!("usr/share/lintian/overrides/{}", meta.name);
        let own = tree.get(&path).map(|e| e.text()).transpose()?;
        tree.remove(&path);
        tree.add_bytes(&path, own.unwrap_or_default() + &text, false)?;
    }

    let data = Data::write(&tree, epoch, packing, out_dir)?;
    let control_tar = control_tar(meta, machine, &tree, scripts, &data.md5sums, epoch, packing)?;
    data.into_deb(
        out_dir,
        &names::file_name(Format::Deb, meta, machine),
        epoch,
        &control_tar,
    )
}

/// A package's `data.tar` member, written first to a scratch file (it is
/// the large one), with the `md5sums` taken on the way.
pub(super) struct Data {
    file: std::fs::File,
    len: u64,
    compression: Compression,
    /// `md5sums` as dh_md5sums writes it: a conffile's digest is kept by
    /// dpkg with the conffile itself, so conffiles are left out.
    pub(crate) md5sums: String,
}

impl Data {
    /// In the `.deb` compression of `packing`.
    pub(super) fn write(
        tree: &FileTree,
        epoch: u64,
        packing: &Packing,
        out_dir: &Path,
    ) -> Result<Data> {
        let compression = packing.deb();
        let name = format!("data.tar.{}", compression.extension());
        let mut file = scratch(out_dir)?;
        let mut md5sums = String::new();
        {
            let buffered = std::io::BufWriter::with_capacity(1 << 20, &mut file);
            let enc = packing.encoder(compression, buffered)?;
            let mut tar = TarWriter::new(enc, epoch, Names::DotSlash);
            tar.root()?;
            for entry in tree.entries() {
                let digests = tar.entry(entry, Want::MD5, &packing.digests)?;
                if let Some(md5) = digests.md5.filter(|_| !entry.config) {
                    md5sums.push_str(&format!("{}  {}\n", hex::encode(md5), entry.path));
                }
            }
            let mut buf = tar
                .finish()?
                .finish()
                .with_context(|| format!("compressing {name}"))?;
            buf.flush().with_context(|| format!("writing {name}"))?;
        }
        let len = file
            .seek(SeekFrom::End(0))
            .with_context(|| format!("writing {name}"))?;
        file.rewind()
            .with_context(|| format!("reading back {name}"))?;
        Ok(Data {
            file,
            len,
            compression,
            md5sums,
        })
    }

    /// The `.deb`: `debian-binary`, then `control_tar`, then this data,
    /// in an ar archive published as `out_dir/file_name`.
    pub(super) fn into_deb(
        mut self,
        out_dir: &Path,
        file_name: &str,
        epoch: u64,
        control_tar: &[u8],
    ) -> Result<Artifact> {
        let ext = self.compression.extension();
        let (control_name, data_name) = (format!("control.tar.{ext}"), format!("data.tar.{ext}"));
        let mut out = Output::create(out_dir, file_name)?;
        {
            let mut w = out.writer();
            let what = || format!("writing {file_name}");
            w.write_all(ar::MAGIC).with_context(what)?;
            ar::member(&mut w, "debian-binary", epoch, b"2.0\n").with_context(what)?;
            ar::member(&mut w, &control_name, epoch, control_tar).with_context(what)?;
            w.write_all(&ar::member_header(&data_name, epoch, self.len))
                .with_context(what)?;
            let copied = std::io::copy(&mut self.file, &mut w).with_context(what)?;
            if copied != self.len {
                bail!("{data_name} shrank while being copied into {file_name}");
            }
            ar::pad(&mut w, self.len).with_context(what)?;
            w.flush().with_context(what)?;
        }
        out.commit()
    }
}

/// Installed-Size as dpkg-gencontrol counts the package build folder after
/// dh_installdeb: KiB per file rounded up, 1 per directory and symlink, the
/// folder itself and `DEBIAN/` with its `control_members` included.
pub(super) fn installed_size<'a>(
    tree: &FileTree,
    control_members: impl Iterator<Item = &'a [u8]>,
) -> u64 {
    let files: u64 = tree
        .entries()
        .map(|e| match e.kind {
            Kind::File(_) => e.size.div_ceil(1024),
            _ => 1,
        })
        .sum();
    let control: u64 = control_members
        .map(|bytes| (bytes.len() as u64).div_ceil(1024))
        .sum();
    files + 2 + control
}

/// A `control.tar` of `members` (name without `./`, mode, bytes), sorted,
/// in the `.deb` compression of `packing`.
pub(super) fn control_members_tar(
    mut members: Vec<(String, u32, Vec<u8>)>,
    epoch: u64,
    packing: &Packing,
) -> Result<Vec<u8>> {
    members.sort_by(|a, b| a.0.cmp(&b.0));
    let compression = packing.deb();
    let enc = packing.encoder(compression, Vec::new())?;
    let mut tar = TarWriter::new(enc, epoch, Names::DotSlash);
    tar.root()?;
    for (name, mode, bytes) in &members {
        tar.bytes(&format!("./{name}"), *mode, bytes)?;
    }
    tar.finish()?
        .finish()
        .with_context(|| format!("compressing control.tar.{}", compression.extension()))
}

fn control_tar(
    meta: &PackageMeta,
    machine: Architecture,
    tree: &FileTree,
    scripts: &Scripts,
    md5sums: &str,
    epoch: u64,
    packing: &Packing,
) -> Result<Vec<u8>> {
    let mut files: Vec<(String, u32, Vec<u8>)> = control_area(tree, scripts)
        .into_iter()
        .map(|(name, mode, bytes)| (name.trim_start_matches("./").to_owned(), mode, bytes))
        .collect();
    files.push((
        "control".to_owned(),
        0o644,
        control_for(meta, machine, tree, scripts).into_bytes(),
    ));
    files.push(("md5sums".to_owned(), 0o644, md5sums.as_bytes().to_vec()));
    control_members_tar(files, epoch, packing)
}

/// The control members besides `control` and `md5sums`: `conffiles` and
/// the maintainer scripts.
fn control_area(tree: &FileTree, scripts: &Scripts) -> Vec<(&'static str, u32, Vec<u8>)> {
    let mut files = Vec::new();
    let conffiles: String = tree
        .config_files()
        .map(|e| format!("/{}\n", e.path))
        .collect();
    if !conffiles.is_empty() {
        files.push(("./conffiles", 0o644, conffiles.into_bytes()));
    }
    if let Some(s) = &scripts.post_install {
        files.push(("./postinst", 0o755, s.clone().into_bytes()));
    }
    if let Some(s) = &scripts.pre_remove {
        files.push(("./prerm", 0o755, s.clone().into_bytes()));
    }
    files
}

/// [`control`] for files that run on `machine`.
pub(crate) fn control_for(
    meta: &PackageMeta,
    machine: Architecture,
    tree: &FileTree,
    scripts: &Scripts,
) -> String {
    let control = control_area(tree, scripts);
    let kib = installed_size(tree, control.iter().map(|(_, _, bytes)| bytes.as_slice()));
    let mut c = format!("Package: {}\n", meta.name);
    if let Some(source) = meta.source.as_ref().filter(|s| **s != meta.name) {
        c.push_str(&format!("Source: {source}\n"));
    }
    c.push_str(&format!(
        "Version: {}\nArchitecture: {}\nMaintainer: {}\nInstalled-Size: {kib}\n",
        meta.full_version(),
        machine.deb(),
        meta.about.maintainer
    ));
    if !meta.depends.is_empty() {
        c.push_str(&format!("Depends: {}\n", meta.depends.join(", ")));
    }
    let r = &meta.relations;
    for (field, names) in [
        ("Conflicts", &r.conflicts),
        ("Replaces", &r.replaces),
        ("Provides", &r.provides),
    ] {
        if !names.is_empty() {
            c.push_str(&format!("{field}: {}\n", names.join(", ")));
        }
    }
    c.push_str(&format!(
        "Section: {}\nPriority: optional\n{}Description: {}\n",
        machine.section().0,
        meta.about
            .homepage
            .as_ref()
            .map(|h| format!("Homepage: {h}\n"))
            .unwrap_or_default(),
        meta.about.summary.trim()
    ));
    c.push_str(&extended_description(&meta.about.description));
    c
}

/// Continuation lines of a Description: each line indented by one space,
/// blank lines as ` .`, long lines word-wrapped at 79 columns.
pub(crate) fn extended_description(text: &str) -> String {
    let mut out = String::new();
    let mut blank_pending = false;
    for line in text.trim().lines() {
        let line = line.trim_end().replace('\t', "    ");
        if line.trim().is_empty() || line.trim() == "." {
            blank_pending = !out.is_empty();
            continue;
        }
        if blank_pending {
            out.push_str(" .\n");
            blank_pending = false;
        }
        let mut current = String::new();
        for word in line.split(' ') {
            if !current.is_empty() && current.len() + 1 + word.len() > 78 {
                out.push_str(&format!(" {current}\n"));
                current.clear();
            } else if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        out.push_str(&format!(" {current}\n"));
    }
    out
}

/// Lintian overrides shipped in the package. The changelog holds one
/// entry, so for revisions 1 and 0.1 lintian takes the package for a new
/// Debian upload that should close its ITP bug (`initial-upload-closes-no-bugs`);
/// these packages are not uploaded to Debian, which that tag's text names
/// as the case to override.
pub(crate) fn lintian_overrides(meta: &PackageMeta) -> Option<String> {
    matches!(meta.about.release.as_str(), "1" | "0.1")
        .then(|| format!("{}: initial-upload-closes-no-bugs\n", meta.name))
}

/// Debian changelog with one entry for this version, dated `epoch`, under
/// the source package's name.
pub(crate) fn changelog(meta: &PackageMeta, epoch: u64) -> String {
    let mut c = format!(
        "{} ({}) unstable; urgency=medium\n\n",
        source_name(meta),
        meta.full_version()
    );
    for change in &meta.changes {
        c.push_str(&changelog_item(change));
    }
    c.push_str(&format!(
        "\n -- {}  {}\n",
        meta.about.maintainer,
        rfc2822(epoch)
    ));
    c
}

/// `  * text`, word-wrapped at 80 columns with continuation lines indented
/// under the text (a word longer than a line keeps a line of its own).
fn changelog_item(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from("  *");
    for word in text.split_whitespace() {
        if line.len() > 4 && line.len() + 1 + word.len() > 80 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Architecture-readable `copyright` (DEP-5) for licences whose text Debian
/// ships in `/usr/share/common-licenses`, and for MIT (Debian's `Expat`),
/// whose short text goes in the file itself.
pub(crate) fn copyright(meta: &PackageMeta) -> Result<String> {
    let (short, text) = match meta.about.license.trim() {
        "MIT" => ("Expat", EXPAT.to_owned()),
        other => {
            let (short, file) = match other {
                "GPL-2.0-only" | "GPL-2.0" => ("GPL-2", "GPL-2"),
                "GPL-2.0-or-later" | "GPL-2.0+" => ("GPL-2+", "GPL-2"),
                "GPL-3.0-only" | "GPL-3.0" => ("GPL-3", "GPL-3"),
                "GPL-3.0-or-later" | "GPL-3.0+" => ("GPL-3+", "GPL-3"),
                "LGPL-2.1-only" => ("LGPL-2.1", "LGPL-2.1"),
                "LGPL-2.1-or-later" => ("LGPL-2.1+", "LGPL-2.1"),
                "Apache-2.0" => ("Apache-2.0", "Apache-2.0"),
                "MPL-2.0" => ("MPL-2.0", "MPL-2.0"),
                other => bail!(
                    "license {other:?} has no text in /usr/share/common-licenses; use MIT or a GPL, LGPL, Apache-2.0 or MPL-2.0 SPDX identifier"
                ),
            };
            (
                short,
                format!(
                    " On Debian systems, the complete text of this license can be found in\n \
                     /usr/share/common-licenses/{file}.\n"
                ),
            )
        }
    };
    let holders = meta
        .copyright
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join("\n           ");
    Ok(format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: {name}\n\
         {url}\
         \n\
         Files: *\n\
         Copyright: {holders}\n\
         License: {short}\n\
         \n\
         License: {short}\n{text}",
        name = source_name(meta),
        url = meta
            .about
            .homepage
            .as_ref()
            .map(|h| format!("Source: {h}\n"))
            .unwrap_or_default(),
    ))
}

/// The Debian source package's name: `meta.source`, else the package's.
fn source_name(meta: &PackageMeta) -> &str {
    meta.source.as_deref().unwrap_or(&meta.name)
}

/// The MIT (Expat) licence as a DEP-5 license paragraph body.
const EXPAT: &str = " Permission is hereby granted, free of charge, to any person obtaining a copy
 of this software and associated documentation files (the \"Software\"), to deal
 in the Software without restriction, including without limitation the rights
 to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 copies of the Software, and to permit persons to whom the Software is
 furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in
 all copies or substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
 THE SOFTWARE.
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::meta::tests::sample;

    #[test]
    fn description_folds_blank_lines_and_wraps() {
        let long = "word ".repeat(30);
        let d = extended_description(&format!("first\n\n\nsecond\n.\n{long}"));
        assert!(d.starts_with(" first\n .\n second\n .\n word"));
        assert!(d.lines().all(|l| l.len() <= 80 && l.starts_with(' ')));
    }

    #[test]
    fn changelog_items_wrap_at_80_columns() {
        let item = changelog_item(&"word ".repeat(40));
        assert!(item.starts_with("  * word word"), "{item}");
        assert!(
            item.lines().skip(1).all(|l| l.starts_with("    word")),
            "{item}"
        );
        assert!(item.lines().all(|l| l.len() <= 80), "{item}");
        assert_eq!(item.split_whitespace().filter(|w| *w == "word").count(), 40);
        let long = "x".repeat(90);
        assert_eq!(changelog_item(&long), format!("  * {long}\n"));
    }

    #[test]
    fn changelog_is_dated_in_utc() {
        let c = changelog(&sample(), 0);
        assert!(
            c.starts_with("patchkit-hello-dkms (0.1.0-1) unstable; urgency=medium\n\n  * Initial")
        );
        assert!(c.ends_with(">  Thu, 01 Jan 1970 00:00:00 +0000\n"));
    }
}
