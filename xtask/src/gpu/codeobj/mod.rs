//! Reads GPU kernel files (`*.co`, `*.hsaco`): clang offload bundles,
//! compressed (`CCOB` + zstd) or not, around AMDGPU ELF code objects, and
//! tells whether their gfx12 code switches expert scheduling on. Reads only;
//! the one file it writes is its verdict cache, where it is told to.

pub mod bundle;
mod cache;
pub mod elf;
pub(crate) mod files;
mod flow;
pub mod gate;
pub mod isa;
mod kernels;
mod listing;
pub mod llvm;
mod msgpack;
pub mod regs;
pub mod rewrite;
#[cfg(test)]
mod testing;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use cache::{default_path as default_cache_path, VerdictCache};
pub use files::{kernel_files, read_kernel_file, MAX_FILE};

/// What one kernel file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileVerdict {
    /// A gfx12 code object switches expert scheduling on at `offset` of its `.text`.
    On { gfx: String, offset: usize },
    /// Every site switches it on only when a kernel argument says so
    /// ([`gate`]); the first one.
    Gated {
        gfx: String,
        offset: usize,
        gate: gate::Gate,
    },
    /// It holds gfx12 code objects and none switches expert scheduling on.
    Off,
    /// It holds no gfx12 code object.
    NoGfx12,
    /// It could not be read as a kernel file.
    Unreadable(String),
}

/// Judges the bytes of one kernel file.
pub fn judge_bytes(bytes: &[u8]) -> FileVerdict {
    judge_bytes_with(bytes, &mut bundle::Scratch::default())
}

/// [`judge_bytes`] decompressing with `scratch`, whose memory is reused.
fn judge_bytes_with(bytes: &[u8], scratch: &mut bundle::Scratch) -> FileVerdict {
    if bytes.starts_with(bundle::CCOB) {
        return match bundle::decompress(bytes, scratch) {
            Ok(_) => judge_uncompressed(&scratch.out),
            Err(why) => FileVerdict::Unreadable(why),
        };
    }
    judge_uncompressed(bytes)
}

/// Reads `path` into `buf` (reused) and judges it.
fn judge_file(path: &Path, buf: &mut Vec<u8>, scratch: &mut bundle::Scratch) -> FileVerdict {
    match read_kernel_file(path, buf) {
        Ok(()) => judge_bytes_with(buf, scratch),
        Err(why) => FileVerdict::Unreadable(why),
    }
}

fn judge_uncompressed(bytes: &[u8]) -> FileVerdict {
    if bytes.starts_with(bundle::ELF) {
        return judge_elf(bytes);
    }
    if !bytes.starts_with(bundle::BUNDLE) {
        return FileVerdict::Unreadable(
            "neither a CCOB compressed bundle, an offload bundle nor an ELF code object".to_owned(),
        );
    }
    let entries = match bundle::entries(bytes) {
        Ok(entries) => entries,
        Err(why) => return FileVerdict::Unreadable(why),
    };
    let mut verdict = FileVerdict::NoGfx12;
    for entry in entries
        .iter()
        .filter(|e| e.gfx().is_some_and(|g| g.starts_with("gfx120")))
    {
        match judge_elf(entry.bytes) {
            FileVerdict::Unreadable(why) => {
                return FileVerdict::Unreadable(format!("bundle entry {}: {why}", entry.triple))
            }
            on @ FileVerdict::On { .. } => return on,
            gated @ FileVerdict::Gated { .. } => verdict = gated,
            FileVerdict::Off if matches!(verdict, FileVerdict::NoGfx12) => {
                verdict = FileVerdict::Off
            }
            FileVerdict::Off | FileVerdict::NoGfx12 => {}
        }
    }
    verdict
}

fn judge_elf(bytes: &[u8]) -> FileVerdict {
    match elf::parse(bytes) {
        Err(why) => FileVerdict::Unreadable(why),
        Ok(code) if !code.is_gfx12() => FileVerdict::NoGfx12,
        Ok(code) => match isa::sched_mode_sites(&code) {
            Ok(sites) => match gate::of_sites(bytes, &code, &sites) {
                Ok(gates) => verdict_of(code.gfx(), &sites, gates),
                Err(why) => FileVerdict::Unreadable(why),
            },
            Err(why) => FileVerdict::Unreadable(why),
        },
    }
}

/// On at the first site that is not gated; gated when every site is;
/// off when there is none.
fn verdict_of(gfx: String, sites: &[usize], gates: Vec<Result<gate::Gate, String>>) -> FileVerdict {
    let mut first = None;
    for (&offset, gate) in sites.iter().zip(gates) {
        match gate {
            Err(_) => return FileVerdict::On { gfx, offset },
            Ok(gate) => {
                first.get_or_insert((offset, gate));
            }
        }
    }
    match first {
        Some((offset, gate)) => FileVerdict::Gated { gfx, offset, gate },
        None => FileVerdict::Off,
    }
}

/// What a whole kernel library says about gfx12 expert scheduling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Judgement {
    /// Expert scheduling is switched on for gfx12: the proof.
    On {
        file: PathBuf,
        gfx: String,
        offset: usize,
    },
    /// Every site that switches it on runs only when a kernel argument
    /// (`ESMRuntimeSupported`, set from the KFD's support) says so: the
    /// first such site, and how many files have one.
    Gated {
        file: PathBuf,
        gfx: String,
        offset: usize,
        gate: gate::Gate,
        files: usize,
    },
    /// gfx12 code objects, none of which switches it on.
    Off {
        files: usize,
    },
    /// No gfx12 code object at all.
    NoGfx12 {
        files: usize,
    },
    CannotTell {
        why: String,
    },
}

impl Judgement {
    /// The same judgement with the file it names (on, gated) passed
    /// through `f` (a path below a root made a path of the machine).
    pub(crate) fn map_file(self, f: impl Fn(&Path) -> PathBuf) -> Judgement {
        match self {
            Judgement::On { file, gfx, offset } => Judgement::On {
                file: f(&file),
                gfx,
                offset,
            },
            Judgement::Gated {
                file,
                gfx,
                offset,
                gate,
                files,
            } => Judgement::Gated {
                file: f(&file),
                gfx,
                offset,
                gate,
                files,
            },
            other => other,
        }
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        match self {
            Judgement::On { file, gfx, offset } => format!(
                "expert scheduling on for gfx12 ({gfx} s_setreg of SCHED_MODE = 2 at .text+0x{offset:x} of {})",
                file.display()
            ),
            Judgement::Gated {
                file,
                gfx,
                offset,
                gate,
                files,
            } => format!(
                "expert scheduling gated on KFD 1.20 ({files} gfx12 kernel files; {gfx} s_setreg of SCHED_MODE = 2 at .text+0x{offset:x} of {} runs only when the kernel argument {} (offset {}, tested as {}) is non-zero, which the host sets when the KFD ABI is 1.20 or later)",
                file.display(),
                gate.argument,
                gate.arg_offset,
                gate.register
            ),
            Judgement::Off { files } => {
                format!("expert scheduling off ({files} gfx12 kernel files read, none switches it on)")
            }
            Judgement::NoGfx12 { .. } => "no gfx12 kernels".to_owned(),
            Judgement::CannotTell { why } => format!("cannot tell: {why}"),
        }
    }
}

/// Judges the kernel library in `dir`: stops at the first proof of "on";
/// files whose verdict `cache` holds (same path, size and mtime) are not
/// read again. Uses up to `threads` threads.
pub fn judge_library(dir: &Path, cache: &mut VerdictCache, threads: usize) -> Judgement {
    let files = match kernel_files(dir) {
        Ok(files) => files,
        Err(err) => {
            return Judgement::CannotTell {
                why: format!("cannot list the kernel library {}: {err}", dir.display()),
            }
        }
    };
    if files.is_empty() {
        return Judgement::CannotTell {
            why: format!("no gfx12 kernel files (*.co, *.hsaco) in {}", dir.display()),
        };
    }
    let cached: Vec<Option<FileVerdict>> = files.iter().map(|f| cache.get(f)).collect();
    let items: Vec<(&PathBuf, &Option<FileVerdict>)> = files.iter().zip(&cached).collect();
    let scratch = || (Vec::new(), bundle::Scratch::default());
    let each = |(buf, scratch): &mut (Vec<u8>, bundle::Scratch),
                (path, cached): &(&PathBuf, &Option<FileVerdict>)| {
        match cached {
            Some(v) => v.clone(),
            None => judge_file(path, buf, scratch),
        }
    };
    let on = |verdict: &FileVerdict| matches!(verdict, FileVerdict::On { .. });
    let results: Vec<(usize, FileVerdict)> =
        crate::shared::par::map_until(&items, threads, scratch, each, on)
            .into_iter()
            .enumerate()
            .filter_map(|(i, verdict)| Some((i, verdict?)))
            .collect();
    conclude(&files, &results, &cached, cache)
}

/// The library's judgement from its files' verdicts (in file order): on at
/// the first proof, cannot tell at an unreadable file, gated when a file
/// is, else off or no gfx12; new verdicts other than "on" go to `cache`.
fn conclude(
    files: &[PathBuf],
    results: &[(usize, FileVerdict)],
    cached: &[Option<FileVerdict>],
    cache: &mut VerdictCache,
) -> Judgement {
    if let Some((i, FileVerdict::On { gfx, offset })) = results
        .iter()
        .find(|(_, v)| matches!(v, FileVerdict::On { .. }))
    {
        return Judgement::On {
            file: files[*i].clone(),
            gfx: gfx.clone(),
            offset: *offset,
        };
    }
    for (i, verdict) in results {
        if cached[*i].is_none()
            && !matches!(verdict, FileVerdict::On { .. } | FileVerdict::Unreadable(_))
        {
            cache.put(&files[*i], verdict.clone());
        }
    }
    if let Some((i, FileVerdict::Unreadable(why))) = results
        .iter()
        .find(|(_, v)| matches!(v, FileVerdict::Unreadable(_)))
    {
        return Judgement::CannotTell {
            why: format!("{}: {why}", files[*i].display()),
        };
    }
    let gated: Vec<&(usize, FileVerdict)> = results
        .iter()
        .filter(|(_, v)| matches!(v, FileVerdict::Gated { .. }))
        .collect();
    if let Some((i, FileVerdict::Gated { gfx, offset, gate })) = gated.first() {
        return Judgement::Gated {
            file: files[*i].clone(),
            gfx: gfx.clone(),
            offset: *offset,
            gate: gate.clone(),
            files: gated.len(),
        };
    }
    let off = results
        .iter()
        .filter(|(_, v)| *v == FileVerdict::Off)
        .count();
    if off > 0 {
        Judgement::Off { files: off }
    } else {
        Judgement::NoGfx12 {
            files: results.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_file_is_unreadable_not_a_panic() {
        assert!(matches!(judge_bytes(b""), FileVerdict::Unreadable(_)));
        assert!(matches!(
            judge_bytes(b"CCOB\x02\x00"),
            FileVerdict::Unreadable(_)
        ));
        assert!(matches!(
            judge_bytes(b"\x7fELF\x02\x01"),
            FileVerdict::Unreadable(_)
        ));
        let mut table = bundle::BUNDLE.to_vec();
        table.extend_from_slice(&1u64.to_le_bytes());
        table.extend_from_slice(&[0xff; 20]);
        assert!(matches!(judge_bytes(&table), FileVerdict::Unreadable(_)));
    }
}
