//! The `srcversion` of a kernel module file (`.ko`, `.ko.xz`, `.ko.zst`,
//! `.ko.gz`), read from its `.modinfo` strings without modinfo or root, to
//! tell which DKMS build the loaded module is when it carries no version.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The module files named `<name>.ko*` in a DKMS build folder
/// (`<version>/<kernel>/<arch>/module/`), any arch.
pub fn built_modules(build: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for arch in std::fs::read_dir(build).into_iter().flatten().flatten() {
        let module = arch.path().join("module");
        for file in std::fs::read_dir(&module).into_iter().flatten().flatten() {
            let file_name = file.file_name().to_string_lossy().into_owned();
            if file_name == format!("{name}.ko") || file_name.starts_with(&format!("{name}.ko.")) {
                found.push(file.path());
            }
        }
    }
    found.sort();
    found
}

/// The `srcversion=` value of a module file, decompressing by extension.
pub fn srcversion(path: &Path) -> std::io::Result<Option<String>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let reader: Box<dyn Read> = match ext {
        "xz" => Box::new(xz2::read::XzDecoder::new(file)),
        "zst" => Box::new(zstd::stream::read::Decoder::new(file)?),
        "gz" => Box::new(flate2::read::GzDecoder::new(file)),
        _ => Box::new(file),
    };
    scan(reader)
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
