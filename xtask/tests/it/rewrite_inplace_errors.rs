//! `rewrite-hipblaslt` when the world gets in its way: two rewrites of one
//! library at once (one waits for the other's lock; then `--undo` puts every
//! byte back, 20 trials of 20), a read-only filesystem (said as such, not
//! "needs root"), a full disk (said, nothing changed, the staged files
//! removed), a comgr cache path that is a file (a warning after the
//! rewrite, not its failure); and a rewrite keeps each file's owner, mode
//! (setuid and setgid too), extended attributes and times.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::codeobj;
use crate::support::inplace::{
    comgr_entry, command, debian, digests, is_sample, regular_digests, rewrite,
};
use crate::support::{ci, is_root, Run};

/// A folder holding Debian's 7.1.1 sample kernel files as `lib/`.
fn debian_library(sid: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let src = sid.join("usr/lib/x86_64-linux-gnu/hipblaslt/library");
    for entry in std::fs::read_dir(src).unwrap().flatten() {
        let name = entry.file_name().into_string().unwrap();
        if is_sample(&name) {
            std::fs::copy(entry.path(), lib.join(&name)).unwrap();
        }
    }
    (dir, lib)
}

/// A folder with two kernel files that switch expert scheduling on and one
/// that does not, as `lib/`.
fn small_library() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let on = codeobj::gfx12_kernel_file(true);
    std::fs::write(lib.join("TensileLibrary_HH_gfx1201.co"), &on).unwrap();
    std::fs::write(lib.join("TensileLibrary_BB_gfx1200.co"), &on).unwrap();
    std::fs::write(
        lib.join("TensileLibrary_SS_gfx1201.co"),
        codeobj::gfx12_kernel_file(false),
    )
    .unwrap();
    (dir, lib)
}

#[test]
fn two_concurrent_rewrites_then_undo_leave_every_byte_as_it_was() {
    let Some(sid) = debian("sid") else { return };
    for trial in 0..20 {
        let (home, lib) = debian_library(&sid);
        let original = digests(&lib);
        let path = lib.display().to_string();
        let spawn = || {
            command(home.path(), &["--threads", "1", &path])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        for child in [a, b] {
            Run::of(child.wait_with_output().unwrap()).success();
        }
        rewrite(home.path(), &[&path])
            .success()
            .stdout_has("nothing to rewrite (8 kernel files rewritten before");
        rewrite(home.path(), &["--undo", &path])
            .success()
            .stdout_has("8 kernel files restored");
        assert_eq!(digests(&lib), original, "trial {trial}: every byte back");
    }
}

#[test]
fn a_rewrite_keeps_owner_mode_setuid_xattrs_and_times() {
    let (home, lib) = small_library();
    let files = [
        "TensileLibrary_HH_gfx1201.co",
        "TensileLibrary_BB_gfx1200.co",
    ];
    let modes = [0o4755, 0o2640];
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(978_307_200);
    for (name, mode) in files.iter().zip(modes) {
        let path = lib.join(name);
        if is_root() {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        set_xattr(&path, "user.patchkit.test", name.as_bytes());
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    let before: Vec<std::fs::Metadata> = files
        .iter()
        .map(|n| std::fs::metadata(lib.join(n)).unwrap())
        .collect();
    let original = digests(&lib);
    rewrite(home.path(), &[&lib.display().to_string()])
        .success()
        .stdout_has("2 kernel files rewritten");
    for (name, was) in files.iter().zip(&before) {
        let path = lib.join(name);
        let now = std::fs::metadata(&path).unwrap();
        assert_ne!(now.ino(), was.ino(), "{name} was replaced");
        assert_eq!(now.mode(), was.mode(), "{name}: mode {:o}", now.mode());
        assert_eq!((now.uid(), now.gid()), (was.uid(), was.gid()), "{name}");
        assert_eq!(now.modified().unwrap(), when, "{name}: mtime kept");
        assert_eq!(
            get_xattr(&path, "user.patchkit.test").as_deref(),
            Some(name.as_bytes()),
            "{name}: user.* attributes kept"
        );
    }
    rewrite(home.path(), &["--undo", &lib.display().to_string()]).success();
    assert_eq!(digests(&lib), original);
    for (name, was) in files.iter().zip(&before) {
        let now = std::fs::metadata(lib.join(name)).unwrap();
        assert_eq!(now.mode(), was.mode(), "{name} after --undo");
    }
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid C strings and a live buffer across the call.
    let rc = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(rc, 0, "setxattr {name} on {}", path.display());
}

fn get_xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings; `buf` has room for its length.
    let got = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (got >= 0).then(|| {
        buf.truncate(got as usize);
        buf
    })
}

#[test]
fn a_comgr_cache_path_that_is_a_file_is_a_warning_after_the_rewrite() {
    let (home, lib) = small_library();
    // the default cache holds an entry with the old code: it still goes
    let cache = home.path().join(".cache/comgr");
    std::fs::create_dir_all(&cache).unwrap();
    let on = codeobj::elf(codeobj::GFX1201, &codeobj::kernel(true));
    std::fs::write(cache.join("llvmcache-0123abcd"), comgr_entry(&[&on], "")).unwrap();
    let not_a_folder = home.path().join("comgr-cache-file");
    std::fs::write(&not_a_folder, "a file, not a folder\n").unwrap();
    let mut cmd = command(home.path(), &[&lib.display().to_string()]);
    cmd.env("AMD_COMGR_CACHE_DIR", &not_a_folder);
    let run = Run::of(cmd.output().unwrap());
    run.success()
        .stdout_has("2 kernel files rewritten")
        .stderr_has(&not_a_folder.display().to_string())
        .stderr_has("not cleaned")
        .stdout_has("1 entry holding kernels with expert scheduling on removed");
    assert!(!cache.join("llvmcache-0123abcd").exists());
}

/// Runs `script` (sh) in a mount namespace of its own as root, with `$1`
/// the xtask binary and `$2` the library to copy; `None` (a skip) when not
/// root outside CI.
fn in_own_mounts(home: &Path, lib: &Path, script: &str) -> Option<Run> {
    if !is_root() {
        assert!(!ci(), "CI runs as root: the filesystem tests mount a tmpfs");
        eprintln!("skipping: only root mounts the tmpfs this test needs");
        return None;
    }
    let inner = command(home, &[]);
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(env!("CARGO_BIN_EXE_xtask"))
    .arg(lib);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    Some(Run::of(cmd.output().unwrap()))
}

/// The lines after `marker` in a script's output, up to the next marker.
fn section<'a>(out: &'a str, marker: &str) -> Vec<&'a str> {
    out.lines()
        .skip_while(|l| *l != marker)
        .skip(1)
        .take_while(|l| !l.starts_with("=="))
        .collect()
}

#[test]
fn a_read_only_filesystem_is_said_not_needs_root() {
    let (home, lib) = small_library();
    let script = r#"set -e
m=$(mktemp -d)
mount -t tmpfs -o size=16m tmpfs "$m"
cp -a "$2" "$m/lib"
mount -o remount,ro "$m"
set +e
"$1" rewrite-hipblaslt "$m/lib" 2>&1; echo "== exit $?"
"$1" rewrite-hipblaslt --check "$m/lib" 2>&1; echo "== exit $?"
"#;
    let Some(run) = in_own_mounts(home.path(), &lib, script) else {
        return;
    };
    let out = &run.stdout;
    assert!(out.contains("== exit 1\n"), "{out}\n{}", run.stderr);
    assert!(out.contains("is on a read-only filesystem"), "{out}");
    assert!(!out.contains("needs root"), "{out}");
    // --check says what would change, and why it cannot
    assert!(out.contains("2 kernel files would be rewritten"), "{out}");
    assert!(out.contains("note: ") && out.contains("== exit 0"), "{out}");
}

#[test]
fn a_full_disk_is_said_and_the_staged_files_are_removed() {
    let Some(sid) = debian("sid") else { return };
    let (home, lib) = debian_library(&sid);
    let before = regular_digests(&lib);
    // the library fits; then the disk is filled but for 24 KiB, less than
    // the staged rewrites need (about 100 KiB)
    let script = r#"set -e
m=$(mktemp -d)
mount -t tmpfs -o size=64m tmpfs "$m"
cp -a "$2" "$m/lib"
dd if=/dev/zero of="$m/filler" bs=4k 2>/dev/null || true
truncate -s -24k "$m/filler"
set +e
"$1" rewrite-hipblaslt "$m/lib" 2>&1; echo "== exit $?"
echo "== left"
cd "$m/lib" && find . -type f | sort | while read f; do echo "$f $(sha256sum < "$f" | cut -c1-64)"; done
echo "== end"
"#;
    let Some(run) = in_own_mounts(home.path(), &lib, script) else {
        return;
    };
    let out = &run.stdout;
    assert!(out.contains("== exit 1\n"), "{out}\n{}", run.stderr);
    assert!(out.contains("no space left"), "{out}");
    assert!(out.contains("staged files were removed"), "{out}");
    assert!(!out.contains("could not be read"), "{out}");
    let left: std::collections::BTreeMap<String, String> = section(out, "== left")
        .iter()
        .map(|l| {
            let (f, sha) = l.rsplit_once(' ').unwrap();
            (f.trim_start_matches("./").to_owned(), sha.to_owned())
        })
        .collect();
    assert_eq!(left, before, "every file as it was, nothing staged left");
}
