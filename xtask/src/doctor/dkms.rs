//! Our DKMS packages on the machine: the versions registered in
//! /var/lib/dkms, the kernels they are built for, and which one the loaded
//! amdgpu is (its MODULE_VERSION, else its `srcversion` against the built
//! `.ko`, `.ko.xz`, `.ko.zst` or `.ko.gz`, read without modinfo or root).
//! Reads only, through [`super::fsread`].

use std::io::Read;
use std::path::{Path, PathBuf};

use super::fsread::Unread;
use super::fsread::{self, Kind, Root};
use super::machine::{AmdgpuModule, DkmsPackage};
use super::probe::Probe;

impl Probe<'_> {
    pub(super) fn dkms(
        &self,
        amdgpu: Option<&AmdgpuModule>,
        release: Option<&str>,
        unread: &mut Vec<Unread>,
    ) -> Vec<DkmsPackage> {
        let base = "var/lib/dkms";
        let fs = self.fs();
        let entries = match fs.list(Path::new(base)) {
            Ok(entries) => entries,
            Err(u) => {
                let why = match u.why.as_str() {
                    "does not exist" => "does not exist: no DKMS modules (or dkms not installed)",
                    why => why,
                };
                unread.push(self.unread(base, why));
                return Vec::new();
            }
        };
        let loaded_version = amdgpu.and_then(|a| a.version.as_deref());
        let mut out = Vec::new();
        for entry in entries.into_iter().filter(|e| fs.is_dir(&e.path)) {
            let Ok(name) = entry.name.into_string() else {
                continue;
            };
            let versions = match fs.list(&entry.path) {
                Ok(versions) => versions,
                Err(u) => {
                    unread.push(u);
                    continue;
                }
            };
            for entry in versions {
                let version = entry.name.to_string_lossy().into_owned();
                let is_version_dir = entry.kind == Kind::Dir
                    && !version.starts_with("kernel-")
                    && version != "original_module";
                if !is_version_dir {
                    continue;
                }
                let mut built_for: Vec<String> = fs
                    .list(&entry.path)
                    .into_iter()
                    .flatten()
                    .filter(|e| e.name != "source" && e.name != "build" && fs.is_dir(&e.path))
                    .map(|e| e.name.to_string_lossy().into_owned())
                    .collect();
                built_for.sort();
                let ours = self.ours.contains(&name);
                let loaded = ours && loaded_version == Some(version.as_str());
                out.push(DkmsPackage {
                    loaded,
                    loaded_by: loaded.then(|| "version".to_owned()),
                    name: name.clone(),
                    version,
                    ours,
                    built_for,
                });
            }
        }
        out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
        let srcversion = amdgpu.and_then(|a| a.srcversion.as_deref());
        if let (false, Some(srcversion), Some(release)) =
            (out.iter().any(|p| p.loaded), srcversion, release)
        {
            self.match_srcversion(&mut out, base, srcversion, release, unread);
        }
        out
    }

    /// Marks the build of ours for the running kernel whose amdgpu module has
    /// the loaded module's srcversion.
    fn match_srcversion(
        &self,
        packages: &mut [DkmsPackage],
        base: &str,
        srcversion: &str,
        release: &str,
        unread: &mut Vec<Unread>,
    ) {
        for p in packages.iter_mut().filter(|p| p.ours) {
            let fs = self.fs();
            let build = Path::new(base).join(&p.name).join(&p.version).join(release);
            for module in built_modules(&fs, &build, "amdgpu") {
                match module_srcversion(&fs, &module) {
                    Ok(Some(found)) if found == srcversion => {
                        p.loaded = true;
                        p.loaded_by = Some("srcversion".to_owned());
                        return;
                    }
                    Ok(_) => {}
                    Err(u) => unread.push(u),
                }
            }
        }
    }
}

/// The module files named `<name>.ko*` in a DKMS build folder
/// (`<version>/<kernel>/<arch>/module/`, machine paths), any arch.
pub(crate) fn built_modules(fs: &Root, build: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for arch in fs.list(build).into_iter().flatten() {
        let module = arch.path.join("module");
        for file in fs.list(&module).into_iter().flatten() {
            let file_name = file.name.to_string_lossy().into_owned();
            if file_name == format!("{name}.ko") || file_name.starts_with(&format!("{name}.ko.")) {
                found.push(file.path);
            }
        }
    }
    found.sort();
    found
}

/// The `srcversion=` value of a module file (a machine path), decompressed
/// as [`super::module::decoder`] does (by its magic, the decoder's memory
/// capped), reading at most [`super::module::MAX_SIZE`] decompressed.
pub(crate) fn module_srcversion(fs: &Root, path: &Path) -> Result<Option<String>, Unread> {
    let (file, _) = fs.open(path, fsread::MODULE)?;
    let mut file = std::io::BufReader::new(file);
    let shown = fsread::shown(path);
    let cannot = |why: String| Unread {
        path: shown.clone(),
        why: format!("cannot read as a module: {why}"),
    };
    let reader = super::module::decoder(&mut file, &shown).map_err(cannot)?;
    scan(reader.take(super::module::MAX_SIZE)).map_err(|e| cannot(e.to_string()))
}

/// Streams `reader` looking for `srcversion=<value>\0`.
fn scan(mut reader: impl Read) -> std::io::Result<Option<String>> {
    const KEY: &[u8] = b"srcversion=";
    const KEEP: usize = 64;
    let mut window: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut chunk)?;
        window.extend_from_slice(&chunk[..n]);
        let mut from = 0;
        while let Some(at) = find(&window[from..], KEY).map(|i| i + from) {
            let value = &window[at + KEY.len()..];
            match value.iter().position(|&b| b == 0) {
                Some(end) if end > 0 && value[..end].iter().all(u8::is_ascii_alphanumeric) => {
                    return Ok(Some(String::from_utf8_lossy(&value[..end]).into_owned()));
                }
                None if n > 0 => break, // the value continues in the next chunk
                _ => from = at + 1,
            }
        }
        if n == 0 {
            return Ok(None);
        }
        if window.len() > KEEP {
            let keep_from = match find(&window[window.len().saturating_sub(KEEP)..], KEY) {
                Some(i) => window.len() - KEEP + i,
                None => window.len() - KEEP,
            };
            window.drain(..keep_from);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srcversion_is_found_across_chunk_borders() {
        for pad in [0usize, 65_520, 65_530, 65_536, 200_000] {
            let mut bytes = vec![b'x'; pad];
            bytes.extend_from_slice(
                b"\0license=GPL\0srcversion=5D1F0E2A3B4C6D7E8F90A1B\0depends=drm\0",
            );
            assert_eq!(
                scan(&bytes[..]).unwrap().as_deref(),
                Some("5D1F0E2A3B4C6D7E8F90A1B"),
                "pad {pad}"
            );
        }
        assert_eq!(scan(&b"no modinfo here"[..]).unwrap(), None);
    }
}
