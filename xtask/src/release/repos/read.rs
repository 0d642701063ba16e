//! What the indexes need from the packages they list, read from the
//! packages themselves: a `.deb`'s `control`, a file of a source package's
//! `debian.tar.*`, an Arch package's `.PKGINFO` and file list. Reading
//! only: nothing here writes.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// The `control` file of the `.deb` at `path`.
pub(crate) fn deb_control(path: &Path) -> Result<String> {
    let what = || format!("reading the control file of {}", path.display());
    let mut input =
        BufReader::new(File::open(path).with_context(|| format!("opening {}", path.display()))?);
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic).with_context(what)?;
    if &magic != b"!<arch>\n" {
        bail!("{} is not a .deb (no ar magic)", path.display());
    }
    loop {
        let mut header = [0u8; 60];
        if input.read_exact(&mut header).is_err() {
            bail!("{} has no control.tar member", path.display());
        }
        let name = String::from_utf8_lossy(&header[..16]).trim().to_owned();
        let size: u64 = String::from_utf8_lossy(&header[48..58])
            .trim()
            .parse()
            .with_context(|| format!("{}: a member size that is not a number", path.display()))?;
        if let Some(codec) = name.strip_prefix("control.tar") {
            let member = (&mut input).take(size);
            let file =
                tar_file(decoder(codec, member)?, &["./control", "control"]).with_context(what)?;
            let bytes = file.with_context(|| format!("{} has no control file", path.display()))?;
            return String::from_utf8(bytes)
                .with_context(|| format!("the control file of {} is not UTF-8", path.display()));
        }
        std::io::copy(
            &mut (&mut input).take(size + size % 2),
            &mut std::io::sink(),
        )
        .with_context(what)?;
    }
}

/// The file `name` (`debian/changelog`) of the compressed tarball at `path`
/// (`.tar.xz`, `.tar.gz`, `.tar.zst`, `.tar`).
pub(crate) fn tarball_file(path: &Path, name: &str) -> Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let file_name = path.file_name().unwrap_or_default().to_string_lossy();
    let codec = file_name
        .rsplit_once(".tar")
        .map(|(_, ext)| ext.to_owned())
        .unwrap_or_default();
    let found = tar_file(decoder(&codec, BufReader::new(file))?, &[name])
        .with_context(|| format!("reading {}", path.display()))?;
    found.with_context(|| format!("{} holds no {name}", path.display()))
}

/// An Arch package's `.PKGINFO` text and the paths it installs (folders
/// with a trailing `/`), sorted, as `repo-add` lists them.
pub(crate) fn pkginfo(path: &Path) -> Result<(String, Vec<String>)> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let what = || format!("reading the Arch package {}", path.display());
    let mut archive = tar::Archive::new(decoder(".zst", BufReader::new(file))?);
    let mut info = None;
    let mut files = Vec::new();
    for entry in archive.entries().with_context(what)? {
        let mut entry = entry.with_context(what)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let name = name.trim_start_matches("./").to_owned();
        if name == ".PKGINFO" {
            let mut text = String::new();
            entry.read_to_string(&mut text).with_context(what)?;
            info = Some(text);
        } else if !name.starts_with('.') && !name.is_empty() {
            let dir = entry.header().entry_type().is_dir() && !name.ends_with('/');
            files.push(if dir { format!("{name}/") } else { name });
        }
    }
    let info = info.with_context(|| format!("{} has no .PKGINFO", path.display()))?;
    files.sort();
    files.dedup();
    Ok((info, files))
}

/// A reader of `input` decompressed by the codec its extension names.
fn decoder<'a>(extension: &str, input: impl Read + 'a) -> Result<Box<dyn Read + 'a>> {
    Ok(match extension.trim_start_matches('.') {
        "" => Box::new(input),
        "gz" => Box::new(flate2::read::MultiGzDecoder::new(input)),
        "xz" => Box::new(xz2::read::XzDecoder::new_multi_decoder(input)),
        "zst" => Box::new(zstd::stream::read::Decoder::new(input).context("starting zstd")?),
        other => bail!("`.{other}` is not a compression this reads (gz, xz, zst)"),
    })
}

/// The bytes of the first entry of the tar stream named one of `names`.
fn tar_file(input: impl Read, names: &[&str]) -> Result<Option<Vec<u8>>> {
    let mut archive = tar::Archive::new(input);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if names.contains(&path.as_str()) {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes)?;
            return Ok(Some(bytes));
        }
    }
    Ok(None)
}
