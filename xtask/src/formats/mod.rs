//! Deterministic package writers: `.deb`, `.rpm`, Arch `.pkg.tar.zst`,
//! the DKMS source tarball and plain `.tar.gz`, and the source packages
//! build farms take (Debian `.dsc`, `.src.rpm`), each streamed from a
//! [`FileTree`] to a file with fixed owners, modes and mtimes
//! (`SOURCE_DATE_EPOCH`), so the same inputs give the same bytes.
//!
//! Nothing here holds a tree or a whole payload in memory: file contents
//! stream through the compressors to files in the output directory, and
//! formats whose headers need digests of what follows (deb md5sums, rpm,
//! Arch .MTREE) stream the payload to a temporary file there first.
//!
//! Each format is one [`PackageFormat`] implementation in its own
//! `format_<name>.rs`; [`Format::get`] is the one `match` over formats.

pub(crate) mod ar;
pub(crate) mod arch;
mod chunk_cache;
pub(crate) mod chunked;
pub(crate) mod compress;
mod cpio;
pub(crate) mod deb;
pub(crate) mod deb_carried;
pub(crate) mod dsc;
pub(crate) mod encoder;
pub(crate) mod entry_write;
pub(crate) mod format;
mod format_arch;
mod format_deb;
#[cfg(test)]
mod format_plain;
mod format_rpm;
mod format_tar;
pub(crate) mod meta;
pub mod names;
pub(crate) mod packing;
mod pool;
pub mod rpm;
mod rpm_header;
mod rpm_tags;
pub(crate) mod scripts;
pub(crate) mod srcinfo;
pub(crate) mod srpm;
pub(crate) mod tally;
pub mod tar;
pub mod tarball;
pub(crate) mod tree;
mod xz_blocks;

use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub(crate) use chunk_cache::ChunkCache;
pub use compress::Compression;
pub(crate) use format::{PackageFormat, Sources};
pub use meta::{About, Architecture, Grammar, PackageMeta, Relations};
pub use packing::Packing;
pub use scripts::Scripts;
pub use tree::FileTree;

/// A package format: what a recipe's `target.formats` names, what
/// `--formats` takes; its [`PackageFormat`] implementation, in its writer's
/// file, says everything else. Adding a format is that file, a variant and
/// its arm in [`Format::get`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    Deb,
    Rpm,
    Arch,
    /// The plain DKMS source tarball (`dkms ldtarball`).
    Tar,
    /// A format that exists only in unit tests, to show what adding one takes.
    #[cfg(test)]
    Plain,
}

impl Format {
    /// Every format, in the order formats are listed and built.
    pub const ALL: &'static [Format] = &[
        Format::Deb,
        Format::Rpm,
        Format::Arch,
        Format::Tar,
        #[cfg(test)]
        Format::Plain,
    ];

    /// The format's implementation: the one `match` over formats.
    pub fn get(self) -> &'static dyn PackageFormat {
        match self {
            Format::Deb => &format_deb::Deb,
            Format::Rpm => &format_rpm::Rpm,
            Format::Arch => &format_arch::Arch,
            Format::Tar => &format_tar::DkmsTarball,
            #[cfg(test)]
            Format::Plain => &format_plain::Plain,
        }
    }

    /// The format a recipe or the command line names `name`.
    pub(crate) fn from_name(name: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.as_str() == name)
    }

    /// `deb`, `rpm`, `arch`, `tar`: the recipe's and the command line's word.
    pub fn as_str(self) -> &'static str {
        self.get().name()
    }

    /// The name of the format's rules in messages.
    pub(crate) fn label(self) -> &'static str {
        self.get().label()
    }

    /// What a package name and release must look like in this format.
    pub(crate) fn grammar(self) -> &'static Grammar {
        self.get().grammar()
    }
}

impl serde::Serialize for Format {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One binary package to write: what every writer takes.
#[derive(Debug, Clone, Copy)]
pub struct Package<'a> {
    pub meta: &'a PackageMeta,
    /// What the files run on: `all`/`noarch`/`any` or the host's machine.
    pub machine: Architecture,
    /// The installed files, paths relative to `/`.
    pub tree: &'a FileTree,
    /// The maintainer scripts, in this format's words.
    pub scripts: &'a Scripts,
    /// Arch: the PKGBUILD shipped beside the package (recorded by its
    /// sha256 in `.BUILDINFO`).
    pub pkgbuild: Option<&'a [u8]>,
    /// `SOURCE_DATE_EPOCH`: every mtime and date.
    pub epoch: u64,
}

impl Package<'_> {
    #[cfg(test)]
    /// The name the writer of `format` gives this package.
    pub(crate) fn file_name(&self, format: Format) -> String {
        format.get().file_name(self.meta, self.machine)
    }
}

/// Writes `pkg` as `format` into `out_dir`, named [`Package::file_name`],
/// with the compression, chunk cache and digest memo of `packing`.
pub fn write(format: Format, pkg: &Package, out_dir: &Path, packing: &Packing) -> Result<Artifact> {
    let format = format.get();
    pkg.tree.take_digests(format.digests(), &packing.digests)?;
    format.write(pkg, out_dir, packing)
}

/// A written package file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub path: PathBuf,
    pub size: u64,
}

/// A file being written in `dir` that appears under its final name only
/// when [`Output::commit`] succeeds.
pub struct Output {
    file: tempfile::NamedTempFile,
    dest: PathBuf,
}

impl Output {
    pub fn create(dir: &Path, name: &str) -> Result<Output> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating output directory {}", dir.display()))?;
        let file = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .tempfile_in(dir)
            .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
        Ok(Output {
            file,
            dest: dir.join(name),
        })
    }

    pub fn writer(&mut self) -> BufWriter<&mut File> {
        BufWriter::with_capacity(1 << 20, self.file.as_file_mut())
    }

    pub fn commit(self) -> Result<Artifact> {
        let Output { file, dest } = self;
        let mut f = file.as_file();
        f.flush()
            .and_then(|_| f.sync_all())
            .with_context(|| format!("writing {}", dest.display()))?;
        let size = f
            .seek(std::io::SeekFrom::End(0))
            .with_context(|| format!("writing {}", dest.display()))?;
        let mut perms = f
            .metadata()
            .with_context(|| format!("reading {}", dest.display()))?
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
        std::fs::set_permissions(file.path(), perms)
            .with_context(|| format!("setting the mode of {}", dest.display()))?;
        file.persist(&dest)
            .with_context(|| format!("renaming the finished package to {}", dest.display()))?;
        Ok(Artifact { path: dest, size })
    }
}

/// A scratch file in `dir` (same file system as the output, never a
/// memory-backed /tmp), deleted when dropped.
pub(crate) fn scratch(dir: &Path) -> Result<File> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating output directory {}", dir.display()))?;
    tempfile::tempfile_in(dir)
        .with_context(|| format!("creating a scratch file in {}", dir.display()))
}

/// `Thu, 01 Jan 2025 00:00:00 +0000` (RFC 2822, UTC) for `epoch`.
pub(crate) fn rfc2822(epoch: u64) -> String {
    let days = (epoch / 86400) as i64;
    let secs = epoch % 86400;
    let (y, m, d) = civil_from_days(days);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        WEEKDAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Howard Hinnant's days-to-civil for the proleptic Gregorian calendar.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z.rem_euclid(146097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_dates_in_utc() {
        assert_eq!(super::rfc2822(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(
            super::rfc2822(1735787045),
            "Thu, 02 Jan 2025 03:04:05 +0000"
        );
    }
}
