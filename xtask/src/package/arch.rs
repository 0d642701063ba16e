//! Arch Linux package writer (`.pkg.tar.zst`): `.BUILDINFO`, `.MTREE`
//! and `.PKGINFO` first, as makepkg orders them, then the files.
//!
//! `.MTREE` needs every file's digests, so the file entries are written
//! first, to a scratch file, as a zstd frame of their own; the package is
//! then a frame of the metadata entries followed by that frame (zstd
//! readers, libarchive included, read concatenated frames as one stream).
//! No `.INSTALL` for DKMS packages: the `dkms` package's alpm hooks build
//! and remove every `usr/src/*/dkms.conf` a package ships.

use std::fmt::Write as _;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::compress::{compress_bytes, Compression, Digests, Want};
use super::meta::{Machine, PackageMeta};
use super::tar::{Names, TarWriter};
use super::tree::{FileTree, Kind};
use super::Format;
use super::{scratch, Artifact, Output, Scripts};

/// `<name>-<version>-<release>-any.pkg.tar.zst`
pub fn file_name(meta: &PackageMeta) -> String {
    file_name_for(meta, Machine::Any)
}

/// `<name>-<version>-<release>.src.tar.gz`, the source package
/// `makepkg --source` makes of a PKGBUILD.
pub fn source_file_name(meta: &PackageMeta) -> String {
    format!("{}-{}.src.tar.gz", meta.name, meta.full_version())
}

/// `<name>-<version>-<release>-<arch>.pkg.tar.zst`
pub fn file_name_for(meta: &PackageMeta, machine: Machine) -> String {
    format!(
        "{}-{}-{}.pkg.tar.zst",
        meta.name,
        meta.full_version(),
        machine.arch()
    )
}

/// Writes `<out_dir>/<file_name>`. `scripts` become an `.INSTALL` with
/// `post_install`/`pre_remove` functions when given; `pkgbuild` is the
/// PKGBUILD shipped alongside, whose sha256 `.BUILDINFO` records.
pub fn write(
    meta: &PackageMeta,
    tree: &FileTree,
    scripts: &Scripts,
    pkgbuild: Option<&[u8]>,
    epoch: u64,
    out_dir: &Path,
) -> Result<Artifact> {
    write_for(meta, Machine::Any, tree, scripts, pkgbuild, epoch, out_dir)
}

/// [`write`] for files that run on `machine`.
pub fn write_for(
    meta: &PackageMeta,
    machine: Machine,
    tree: &FileTree,
    scripts: &Scripts,
    pkgbuild: Option<&[u8]>,
    epoch: u64,
    out_dir: &Path,
) -> Result<Artifact> {
    meta.validate(Format::Arch)?;
    let compression = Compression::ARCH;

    // Frame 2: the files, hashed as they stream.
    let mut data = scratch(out_dir)?;
    let mut digests = Vec::new();
    {
        let enc = compression.encoder(std::io::BufWriter::with_capacity(1 << 20, &mut data))?;
        let mut tar = TarWriter::new(enc, epoch, Names::Plain);
        for entry in tree.entries() {
            digests.push(tar.entry(
                entry,
                Want {
                    md5: true,
                    sha256: true,
                },
            )?);
        }
        let mut w = tar
            .finish()?
            .finish()
            .context("compressing the Arch package files")?;
        w.flush().context("writing the Arch package files")?;
    }
    let data_len = data
        .seek(SeekFrom::End(0))
        .context("writing the Arch package files")?;
    data.rewind()
        .context("reading back the Arch package files")?;

    // Frame 1: the metadata entries (no end-of-archive blocks).
    let pkginfo = pkginfo_for(meta, machine, tree, epoch);
    let buildinfo = buildinfo_for(meta, machine, pkgbuild, epoch);
    let install = install(scripts);
    let mut meta_files: Vec<(&str, Vec<u8>)> = vec![
        (".BUILDINFO", buildinfo.into_bytes()),
        (".PKGINFO", pkginfo.into_bytes()),
    ];
    if let Some(i) = &install {
        meta_files.push((".INSTALL", i.clone().into_bytes()));
    }
    let mtree = compress_bytes(
        Compression::Gzip(9),
        mtree(&meta_files, tree, &digests, epoch).as_bytes(),
    )?;
    let head = {
        let enc = compression.encoder(Vec::new())?;
        let mut tar = TarWriter::new(enc, epoch, Names::Plain);
        tar.bytes(".BUILDINFO", 0o644, &meta_files[0].1)?;
        tar.bytes(".MTREE", 0o644, &mtree)?;
        for (name, bytes) in &meta_files[1..] {
            tar.bytes(name, 0o644, bytes)?;
        }
        tar.into_inner()
            .finish()
            .context("compressing the Arch package metadata")?
    };

    let name = file_name_for(meta, machine);
    let mut out = Output::create(out_dir, &name)?;
    {
        let what = || format!("writing {name}");
        let mut w = out.writer();
        w.write_all(&head).with_context(what)?;
        if std::io::copy(&mut data, &mut w).with_context(what)? != data_len {
            bail!("the Arch package files changed size while being copied into {name}");
        }
        w.flush().with_context(what)?;
    }
    out.commit()
}

/// `.PKGINFO`: one `key = value` per line; every value was validated to
/// be a single line.
pub fn pkginfo(meta: &PackageMeta, tree: &FileTree, epoch: u64) -> String {
    pkginfo_for(meta, Machine::Any, tree, epoch)
}

fn pkginfo_for(meta: &PackageMeta, machine: Machine, tree: &FileTree, epoch: u64) -> String {
    let size: u64 = tree.entries().filter(|e| !e.is_dir()).map(|e| e.size).sum();
    let mut p = String::from("# Generated by rocm-patchkit\n");
    let _ = write!(
        p,
        "pkgname = {name}\npkgbase = {name}\npkgver = {ver}\npkgdesc = {desc}\n{url}\
         builddate = {epoch}\npackager = {packager}\nsize = {size}\narch = {arch}\nlicense = {license}\n",
        arch = machine.arch(),
        name = meta.name,
        ver = meta.full_version(),
        desc = meta.summary.trim(),
        url = meta
            .homepage
            .as_ref()
            .map(|h| format!("url = {h}\n"))
            .unwrap_or_default(),
        packager = meta.maintainer,
        license = meta.license,
    );
    for dep in &meta.depends {
        let _ = writeln!(p, "depend = {dep}");
    }
    let r = &meta.relations;
    // No `replaces`: pacman's names a real package to swap on upgrade, and a
    // conflict with the virtual name already lets pacman remove the other.
    for (key, names) in [("conflict", &r.conflicts), ("provides", &r.provides)] {
        for name in names {
            let _ = writeln!(p, "{key} = {name}");
        }
    }
    for entry in tree.config_files() {
        let _ = writeln!(p, "backup = {}", entry.path);
    }
    p
}

/// `.BUILDINFO` format 2.
pub fn buildinfo(meta: &PackageMeta, pkgbuild: Option<&[u8]>, epoch: u64) -> String {
    buildinfo_for(meta, Machine::Any, pkgbuild, epoch)
}

fn buildinfo_for(
    meta: &PackageMeta,
    machine: Machine,
    pkgbuild: Option<&[u8]>,
    epoch: u64,
) -> String {
    let mut b = format!(
        "format = 2\npkgname = {name}\npkgbase = {name}\npkgver = {ver}\npkgarch = {arch}\n",
        arch = machine.arch(),
        name = meta.name,
        ver = meta.full_version()
    );
    if let Some(pkgbuild) = pkgbuild {
        let _ = writeln!(
            b,
            "pkgbuild_sha256sum = {}",
            hex::encode(Sha256::digest(pkgbuild))
        );
    }
    let _ = write!(
        b,
        "packager = {}\nbuilddate = {epoch}\nbuilddir = /build\nstartdir = /build\n\
         buildtool = rocm-patchkit\nbuildtoolver = {}\n",
        meta.maintainer,
        env!("CARGO_PKG_VERSION")
    );
    b
}

fn install(scripts: &Scripts) -> Option<String> {
    if let Some(whole) = &scripts.arch_install {
        return Some(whole.clone());
    }
    if scripts.post_install.is_none() && scripts.pre_remove.is_none() {
        return None;
    }
    let mut s = String::new();
    for (func, body) in [
        ("post_install", &scripts.post_install),
        ("pre_remove", &scripts.pre_remove),
    ] {
        if let Some(body) = body {
            let _ = write!(s, "{func}() {{\n{}\n}}\n\n", body.trim_end());
        }
    }
    Some(s)
}

/// The `.MTREE` text (before gzip), as `bsdtar --format=mtree` with
/// makepkg's keywords writes it.
fn mtree(
    meta_files: &[(&str, Vec<u8>)],
    tree: &FileTree,
    digests: &[Digests],
    epoch: u64,
) -> String {
    let mut m = String::from("#mtree\n/set type=file uid=0 gid=0 mode=644\n");
    let file_line = |m: &mut String, name: &str, mode: u32, size: u64, d: &Digests| {
        let _ = write!(m, "./{} time={epoch}.0", escape(name));
        if mode != 0o644 {
            let _ = write!(m, " mode={mode:o}");
        }
        let _ = write!(m, " size={size}");
        if let (Some(md5), Some(sha)) = (d.md5, d.sha256) {
            let _ = write!(
                m,
                " md5digest={} sha256digest={}",
                hex::encode(md5),
                hex::encode(sha)
            );
        }
        m.push('\n');
    };
    for (name, bytes) in meta_files {
        let d = Digests {
            md5: Some(md5::Md5::digest(bytes).into()),
            sha256: Some(Sha256::digest(bytes).into()),
        };
        file_line(&mut m, name, 0o644, bytes.len() as u64, &d);
    }
    for (entry, d) in tree.entries().zip(digests) {
        match &entry.kind {
            Kind::Dir => {
                let _ = writeln!(
                    m,
                    "./{} time={epoch}.0 mode={:o} type=dir",
                    escape(&entry.path),
                    entry.mode
                );
            }
            Kind::Symlink(target) => {
                let _ = writeln!(
                    m,
                    "./{} time={epoch}.0 mode=777 type=link link={}",
                    escape(&entry.path),
                    escape(target)
                );
            }
            Kind::File(_) => file_line(&mut m, &entry.path, entry.mode, entry.size, d),
        }
    }
    m
}

/// mtree's vis(3)-style escaping: anything but printable ASCII other than
/// space, `\` and `#` becomes `\ooo`.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_graphic() && b != b'\\' && b != b'#' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\{b:03o}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::meta::tests::sample;

    #[test]
    fn pkginfo_has_one_line_per_key() {
        let mut t = FileTree::new();
        t.add_bytes("usr/src/x/a", "abc", false).unwrap();
        let p = pkginfo(&sample(), &t, 42);
        assert!(p.contains("pkgver = 0.1.0-1\n"));
        assert!(p.contains("size = 3\n"));
        assert!(p.contains("depend = dkms\n"));
        assert!(p.lines().skip(1).all(|l| l.contains(" = ")));
    }

    #[test]
    fn configuration_files_are_backed_up() {
        let mut t = FileTree::new();
        t.add_bytes("etc/modprobe.d/x.conf", "o", false).unwrap();
        t.add_bytes("usr/lib/modprobe.d/y.conf", "o", false)
            .unwrap();
        t.mark_config("etc/modprobe.d/x.conf").unwrap();
        let p = pkginfo(&sample(), &t, 42);
        let backup: Vec<_> = p.lines().filter(|l| l.starts_with("backup = ")).collect();
        assert_eq!(backup, ["backup = etc/modprobe.d/x.conf"]);
    }

    #[test]
    fn mtree_escapes_odd_names() {
        assert_eq!(escape("a b#c"), r"a\040b\043c");
    }
}
