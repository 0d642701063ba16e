//! What the in-place rewrite tests share: a venv whose `torch/lib` holds a
//! subset of Debian's real libhipblaslt1 7.1.1 (as `.ci/setup` leaves it),
//! digests of a folder's files, the `rewrite-hipblaslt` command run with a
//! user's environment, and comgr cache entries as comgr writes them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{repo_root, Run};

/// Debian's unpacked libhipblaslt1 of `suite` (`sid`, `experimental`), as
/// `.ci/setup` leaves it; `None` (a skip) only outside CI.
pub(crate) fn debian(suite: &str) -> Option<PathBuf> {
    let base = std::env::var_os("PATCHKIT_DEBIAN_HIPBLASLT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/rocm-patchkit/debian-hipblaslt"));
    let dir = base.join(suite);
    if dir.join("VERSION").is_file() {
        return Some(dir);
    }
    assert!(
        !super::ci(),
        "{} is missing and CI=true: .ci/setup must bring Debian's libhipblaslt1",
        dir.display()
    );
    eprintln!("skipping: {} is missing (run .ci/setup)", dir.display());
    None
}

/// The kernel files of 7.1.1 the tests use: small gfx1200/gfx1201 files
/// with sites (one family with one site each, one with six or seven), two
/// without (f32 kernels never use the mode), and a gfx1100 file.
pub(crate) fn is_sample(name: &str) -> bool {
    let with_sites = [
        "TensileLibrary_HH_HH_HA_Bias_Aux_SAV_UA_Type_HH_HPA_Contraction_l_",
        "TensileLibrary_B8B8_F8B8_HA_Bias_SAB_SCD_SAV_UA_Type_B8F8_HPA_Contraction_l_Ailk_Bljk_",
    ];
    (name.ends_with(".co")
        && name.contains("_gfx120")
        && with_sites.iter().any(|p| name.starts_with(p)))
        || name == "TensileLibrary_SS_SS_UA_Type_SS_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1201.co"
        || name == "TensileLibrary_SS_SS_UA_Type_SS_Contraction_l_Alik_Bljk_Cijk_Dijk_gfx1200.co"
        || name == "Kernels.so-000-gfx1100.hsaco"
}

/// Copies Debian's `libhipblaslt.so.1.1` to `lib_dir/lib_name` and the
/// sample kernel files to `lib_dir/hipblaslt/library/` (copies, never
/// links: the tests change them).
pub(crate) fn place(debian: &Path, lib_dir: &Path, lib_name: &str) {
    let src = debian.join("usr/lib/x86_64-linux-gnu");
    let kernels = lib_dir.join("hipblaslt/library");
    std::fs::create_dir_all(&kernels).unwrap();
    std::fs::copy(src.join("libhipblaslt.so.1.1"), lib_dir.join(lib_name)).unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(src.join("hipblaslt/library"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().into_string().unwrap();
        if is_sample(&name) {
            std::fs::copy(entry.path(), kernels.join(&name)).unwrap();
            n += 1;
        }
    }
    assert_eq!(n, 13, "the sample of Debian's 7.1.1 kernel files");
}

/// sha256 of every file below `dir` by relative path, `.patchkit/` included.
pub(crate) fn digests(dir: &Path) -> BTreeMap<String, String> {
    crate::support::snapshot(dir)
        .into_iter()
        .map(|(rel, bytes)| (rel, xtask::shared::hash::sha256_hex(&bytes)))
        .collect()
}

/// `digests` without our `.patchkit/` folder.
pub(crate) fn kernel_digests(dir: &Path) -> BTreeMap<String, String> {
    let mut all = digests(dir);
    all.retain(|k, _| !k.starts_with(".patchkit/"));
    all
}

/// `cargo xtask rewrite-hipblaslt <args>` as a user whose home (and comgr
/// cache) is `home`.
pub(crate) fn command(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.arg("rewrite-hipblaslt")
        .args(args)
        .env("PATCHKIT_ROOT", repo_root())
        .env("CI", "true")
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env_remove("AMD_COMGR_CACHE_DIR")
        .env_remove("AMD_COMGR_CACHE")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX");
    cmd
}

pub(crate) fn rewrite(home: &Path, args: &[&str]) -> Run {
    Run::of(
        command(home, args)
            .output()
            .expect("running xtask rewrite-hipblaslt"),
    )
}

/// A comgr cache entry of an unbundle command: the output's length, each
/// output file as a u32 length and its bytes, then the log's length and log.
pub(crate) fn comgr_entry(outputs: &[&[u8]], log: &str) -> Vec<u8> {
    let mut output = Vec::new();
    for o in outputs {
        output.extend_from_slice(&(o.len() as u32).to_le_bytes());
        output.extend_from_slice(o);
    }
    let mut out = (output.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&output);
    out.extend_from_slice(&(log.len() as u64).to_le_bytes());
    out.extend_from_slice(log.as_bytes());
    out
}

/// A FIFO at `path` (its folder made).
pub(crate) fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {path:?}"
    );
}

/// A sparse file of `len` bytes at `path` (its folder made).
pub(crate) fn sparse(path: &Path, len: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// sha256 of every regular file below `dir` (symlinked folders not
/// followed) by relative path; anything else (a FIFO, a link, a file over
/// 64 MiB) listed by what it is, never opened.
pub(crate) fn regular_digests(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let kind = meta.file_type();
            let value = if kind.is_dir() {
                stack.push(path);
                continue;
            } else if kind.is_symlink() {
                format!("link to {}", std::fs::read_link(&path).unwrap().display())
            } else if !kind.is_file() {
                "not a regular file".to_owned()
            } else if meta.len() > 64 << 20 {
                format!("{} bytes", meta.len())
            } else {
                xtask::shared::hash::sha256_hex(&std::fs::read(&path).unwrap())
            };
            out.insert(rel, value);
        }
    }
    out
}
