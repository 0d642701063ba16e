//! The rewrite of expert scheduling on Debian's real hipBLASLt kernel files
//! (libhipblaslt1 7.1.1 from sid, 7.2.4 from experimental, brought by
//! `.ci/setup`), checked by LLVM's own tools: gfx12 kernel files of 7.1.1
//! rewritten into a temporary folder and read back by our scanner and by
//! `clang-offload-bundler`; a sample of code objects disassembled before
//! and after by `llvm-objdump`. CI rewrites a fixed sample of the library
//! (every family and target, both file shapes, files with and without
//! sites); the whole library is an ignored test (`cargo test --test it --
//! --ignored rewrite_real`, about 4.5 minutes on 2 cores). Skips without
//! the files or the tools unless CI=true.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use xtask::gpu::codeobj::bundle::{self, Scratch};
use xtask::gpu::codeobj::rewrite::{self, Rewrite};
use xtask::gpu::codeobj::{self, llvm, Judgement, VerdictCache};

use crate::support::ci;

/// The sites of Debian's 7.1.1, as `../shared/DESIGN.md` documents them.
const SITES_7_1_1: usize = 44_086;
/// Its gfx12 kernel files that switch expert scheduling on.
const FILES_WITH_SITES_7_1_1: usize = 263;
/// What [`sample`] takes of them: files, files with sites, sites.
const SAMPLE_7_1_1: (usize, usize, usize) = (33, 22, 1117);
/// One file in this many of the sorted list joins the sample, beside the
/// smallest of each family and target.
const STRIDE: usize = 24;
/// The sample's disassembly check takes code objects up to this size
/// (llvm-objdump on the 10 MiB `Kernels.so` objects alone takes minutes).
const SAMPLE_DISASM_LIMIT: usize = 4 << 20;

/// The kernel library of Debian's libhipblaslt1 of `suite`; `None` (a skip)
/// only outside CI.
fn library(suite: &str) -> Option<PathBuf> {
    let base = std::env::var_os("PATCHKIT_DEBIAN_HIPBLASLT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocm-patchkit/debian-hipblaslt"));
    let dir = base
        .join(suite)
        .join("usr/lib/x86_64-linux-gnu/hipblaslt/library");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        !ci(),
        "{} is missing and CI=true: .ci/setup must bring Debian's libhipblaslt1",
        dir.display()
    );
    eprintln!("skipping: {} is missing (run .ci/setup)", dir.display());
    None
}

/// The gfx12 kernel files of a library, sorted.
fn gfx12_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.contains("gfx120") && (name.ends_with(".co") || name.ends_with(".hsaco"))
        })
        .collect();
    files.sort();
    files
}

/// The gfx12 target a file name ends with (`gfx1200`, `gfx1201`).
fn target(name: &str) -> &str {
    let at = name.rfind("gfx").unwrap_or(0);
    name[at..].split('.').next().unwrap_or(name)
}

/// CI's share of `files` (sorted): the smallest file of each data-type
/// family and target (so `extop` and the bare ELF `Kernels.so` files too),
/// and every [`STRIDE`]th file, sorted again.
fn sample(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut smallest: BTreeMap<(String, String), (u64, &PathBuf)> = BTreeMap::new();
    for path in files {
        let name = path.file_name().unwrap().to_str().unwrap();
        let size = std::fs::metadata(path).unwrap().len();
        let key = (family(name).to_owned(), target(name).to_owned());
        let entry = smallest.entry(key).or_insert((size, path));
        if size < entry.0 {
            *entry = (size, path);
        }
    }
    let mut picked: Vec<PathBuf> = smallest.into_values().map(|(_, p)| p.clone()).collect();
    picked.extend(files.iter().step_by(STRIDE).cloned());
    picked.sort();
    picked.dedup();
    picked
}

/// Runs `each` over `items` on two threads.
fn on_two_threads<T: Sync>(items: &[T], each: impl Fn(&T) + Sync) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    each(item);
                }
            });
        }
    });
}

/// The uncompressed form of a kernel file.
fn plain(bytes: &[u8], scratch: &mut Scratch) -> Vec<u8> {
    if bytes.starts_with(bundle::CCOB) {
        bundle::decompress(bytes, scratch).unwrap();
        std::mem::take(&mut scratch.out)
    } else {
        bytes.to_vec()
    }
}

/// The gfx12 code object of an uncompressed kernel file: its bundle
/// entry's triple (or target) and bytes.
fn gfx12_object(plain: &[u8]) -> (String, &[u8]) {
    if plain.starts_with(bundle::ELF) {
        return ("bare".to_owned(), plain);
    }
    let entries = bundle::entries(plain).unwrap();
    let entry = entries
        .iter()
        .find(|e| e.gfx().is_some_and(|g| g.starts_with("gfx120")))
        .expect("a gfx12 entry");
    (entry.triple.clone(), entry.bytes)
}

/// What the rewrite of one file gave.
struct Done {
    name: String,
    sites: usize,
    object_size: usize,
}

/// The data-type family a file name says (`HH` of `TensileLibrary_HH_HH_...`),
/// or the name before its target (`extop`, `Kernels.so-000`).
fn family(name: &str) -> &str {
    match name.strip_prefix("TensileLibrary_") {
        Some(rest) => rest.split('_').next().unwrap_or(rest),
        None => name
            .split("gfx")
            .next()
            .unwrap_or(name)
            .trim_end_matches(['_', '-']),
    }
}

fn need(tool: Option<PathBuf>, what: &str) -> Option<PathBuf> {
    if tool.is_none() {
        assert!(
            !ci(),
            "{what} is missing and CI=true: .ci/setup installs it"
        );
        eprintln!("skipping: {what} is missing (apt-get install llvm-19 clang-tools-19)");
    }
    tool
}

#[test]
fn a_sample_of_7_1_1s_gfx12_kernel_files_is_rewritten_and_llvm_agrees() {
    let Some(dir) = library("sid") else { return };
    let files = sample(&gfx12_files(&dir));
    rewritten_and_llvm_agrees(&dir, &files, SAMPLE_7_1_1, SAMPLE_DISASM_LIMIT);
}

#[test]
#[ignore = "the whole library (about 4.5 minutes on 2 cores): CI rewrites a sample"]
fn every_gfx12_kernel_file_of_7_1_1_is_rewritten_and_llvm_agrees() {
    let Some(dir) = library("sid") else { return };
    let files = gfx12_files(&dir);
    assert!(files.len() >= 289, "{} gfx12 kernel files", files.len());
    let all = (files.len(), FILES_WITH_SITES_7_1_1, SITES_7_1_1);
    rewritten_and_llvm_agrees(&dir, &files, all, usize::MAX);
}

/// `files` of `dir` rewritten (`expected`: how many, how many with sites,
/// how many sites), each checked by our reader and `clang-offload-bundler`,
/// then a sample of their code objects up to `disasm_limit` bytes
/// disassembled by `llvm-objdump`.
fn rewritten_and_llvm_agrees(
    dir: &Path,
    files: &[PathBuf],
    expected: (usize, usize, usize),
    disasm_limit: usize,
) {
    let Some(bundler) = need(llvm::bundler(), "clang-offload-bundler (clang-tools-19)") else {
        return;
    };
    let Some(objdump) = need(llvm::objdump(), "llvm-objdump (llvm-19)") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let done = Mutex::new(Vec::new());
    let sizes = Mutex::new((0u64, 0u64));
    on_two_threads(files, |path| {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let mut scratch = Scratch::default();
        let original = std::fs::read(path).unwrap();
        let target = out.path().join(&name);
        let result = rewrite::rewrite_file_with(&original, &mut scratch)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (bytes, sites) = match result {
            Rewrite::NoGfx12 => panic!("{name}: no gfx12 code object found"),
            Rewrite::NoSites => (original.clone(), Vec::new()),
            Rewrite::Rewritten { bytes, sites, .. } => (bytes, sites),
            Rewrite::OnlyGated { .. } => panic!("{name}: rewrite_file_with keeps no gated site"),
        };
        std::fs::write(&target, &bytes).unwrap();
        // the same container, the same entries, and every byte outside the
        // sites as it was once decompressed
        let before = plain(&original, &mut scratch);
        let after = plain(&bytes, &mut scratch);
        assert_eq!(before.len(), after.len(), "{name}");
        if original.starts_with(bundle::CCOB) {
            let (theirs, ours) = (
                bundle::header(&original).unwrap(),
                bundle::header(&bytes).unwrap(),
            );
            assert_eq!(
                (ours.version, ours.method),
                (theirs.version, theirs.method),
                "{name}"
            );
            let (f0, f1) = (
                bundle::frame_header(&original[theirs.len()..]).unwrap(),
                bundle::frame_header(&bytes[ours.len()..]).unwrap(),
            );
            assert!(
                f1.window <= f0.window,
                "{name}: window {} > {}",
                f1.window,
                f0.window
            );
            assert!(
                !f0.single_segment || f1.single_segment,
                "{name}: single segment lost"
            );
            let entries = |p: &[u8]| -> Vec<(String, usize, usize)> {
                bundle::entries(p)
                    .unwrap()
                    .iter()
                    .map(|e| (e.triple.clone(), e.offset, e.bytes.len()))
                    .collect()
            };
            assert_eq!(entries(&before), entries(&after), "{name}");
        }
        assert!(
            bytes.len() as u64 <= original.len() as u64 * 102 / 100,
            "{name}"
        );
        let mut at = 0;
        for site in &sites {
            let v = site.value_offset as usize;
            assert!(
                before[at..v] == after[at..v],
                "{name}: bytes before {v} differ"
            );
            assert_eq!(before[v..v + 4], [2, 0, 0, 0], "{name}");
            assert_eq!(after[v..v + 4], [0, 0, 0, 0], "{name}");
            at = v + 4;
        }
        assert!(
            before[at..] == after[at..],
            "{name}: bytes after the last site differ"
        );
        let (triple, object) = gfx12_object(&after);
        if !sites.is_empty() && original.starts_with(bundle::CCOB) {
            llvm::bundler_accepts(&bundler, &target, &triple).unwrap();
        }
        {
            let mut sizes = sizes.lock().unwrap();
            sizes.0 += original.len() as u64;
            sizes.1 += bytes.len() as u64;
        }
        done.lock().unwrap().push(Done {
            name,
            sites: sites.len(),
            object_size: object.len(),
        });
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by(|a, b| a.name.cmp(&b.name));
    let total: usize = done.iter().map(|d| d.sites).sum();
    let rewritten = done.iter().filter(|d| d.sites > 0).count();
    let (before, after) = sizes.into_inner().unwrap();
    eprintln!(
        "{} files, {rewritten} with sites, {total} sites; {before} -> {after} bytes",
        done.len()
    );
    assert_eq!((done.len(), rewritten, total), expected);
    assert!(
        after <= before,
        "rewritten {after} bytes, original {before}"
    );

    // doctor's scanner over the rewritten library: no site anywhere
    let judged = codeobj::judge_library(out.path(), &mut VerdictCache::in_memory(), 2);
    assert_eq!(judged, Judgement::Off { files: done.len() }, "{judged:?}");

    // the sample: the largest code object, the smallest with sites, one of
    // each data-type family (the smallest with sites, else the smallest),
    // the bare ELF files
    let mut sample: BTreeMap<String, &Done> = BTreeMap::new();
    let done: Vec<&Done> = done
        .iter()
        .filter(|d| d.object_size <= disasm_limit)
        .collect();
    let largest = *done.iter().max_by_key(|d| d.object_size).unwrap();
    sample.insert(largest.name.clone(), largest);
    let smallest = done
        .iter()
        .filter(|d| d.sites > 0)
        .min_by_key(|d| d.object_size)
        .unwrap();
    sample.insert(smallest.name.clone(), smallest);
    let mut families: BTreeMap<&str, Vec<&Done>> = BTreeMap::new();
    for &d in &done {
        families.entry(family(&d.name)).or_default().push(d);
    }
    for members in families.values() {
        let pick = members
            .iter()
            .filter(|d| d.sites > 0)
            .min_by_key(|d| d.object_size)
            .or_else(|| members.iter().min_by_key(|d| d.object_size))
            .unwrap();
        sample.insert(pick.name.clone(), pick);
    }
    assert!(
        sample.len() >= if disasm_limit == usize::MAX { 12 } else { 10 },
        "{} code objects in the sample",
        sample.len()
    );
    let mut sample: Vec<&Done> = sample.into_values().collect();
    sample.sort_by_key(|d| std::cmp::Reverse(d.object_size));
    let checked = Mutex::new(Vec::new());
    // each comparison runs two llvm-objdump at once: one comparison at a time
    // for the largest, two for the rest
    let (first, rest) = sample.split_first().unwrap();
    let compare = |d: &&Done| {
        let mut scratch = Scratch::default();
        let before = plain(&std::fs::read(dir.join(&d.name)).unwrap(), &mut scratch);
        let after = plain(
            &std::fs::read(out.path().join(&d.name)).unwrap(),
            &mut scratch,
        );
        let counted = llvm::compare_disassembly(
            &objdump,
            gfx12_object(&before).1,
            gfx12_object(&after).1,
            out.path(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", d.name));
        assert_eq!(counted.sites as usize, d.sites, "{}", d.name);
        assert!(counted.instructions > 0, "{}", d.name);
        checked.lock().unwrap().push((d.name.clone(), counted));
    };
    compare(first);
    on_two_threads(rest, compare);
    let checked = checked.into_inner().unwrap();
    assert_eq!(checked.len(), sample.len());
    assert!(checked.iter().any(|(_, c)| c.sites > 0));
    for (name, c) in &checked {
        eprintln!("{name}: {} instructions, {} sites", c.instructions, c.sites);
    }
}

#[test]
fn debian_7_2_4_has_no_site_and_nothing_is_rewritten() {
    let Some(dir) = library("experimental") else {
        return;
    };
    let files = gfx12_files(&dir);
    assert!(!files.is_empty());
    let mut scratch = Scratch::default();
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        match rewrite::rewrite_file_with(&bytes, &mut scratch) {
            Ok(Rewrite::NoSites) => {}
            Ok(Rewrite::NoGfx12) => panic!("{}: no gfx12 code object", path.display()),
            Ok(Rewrite::Rewritten { sites, .. } | Rewrite::OnlyGated { sites }) => {
                panic!("{}: {} sites rewritten", path.display(), sites.len())
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}
