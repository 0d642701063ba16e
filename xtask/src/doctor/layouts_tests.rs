//! Unit tests of the layouts: fake machine trees written in a temp folder
//! (TheRock's wheels, `/opt/rocm*/core*`, hostile entries), read back.

use super::*;

fn file(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_therock_wheel_is_named_by_its_dist_info() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let site = "venv/lib/python3.12/site-packages";
    file(
        root,
        &format!("{site}/_rocm_sdk_libraries_gfx120X_all/lib/libhipblaslt.so.1"),
        "ELF",
    );
    file(
        root,
        &format!("{site}/_rocm_sdk_core/lib/libamd_comgr.so.3"),
        "ELF",
    );
    file(
        root,
        &format!("{site}/rocm_sdk_libraries_gfx120x_all-7.10.0.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: rocm-sdk-libraries-gfx120X-all\nVersion: 7.10.0\n\nVersion: body text\n",
    );
    file(
        root,
        &format!("{site}/rocm_sdk-7.10.0.dist-info/METADATA"),
        "Version: 1\n",
    );
    let env = Path::new("/venv");
    let lib = Path::new("/")
        .join(site)
        .join("_rocm_sdk_libraries_gfx120X_all/lib");
    assert_eq!(python_libs(root, env), vec![lib.clone()]);
    let release = release_of(root, &lib).unwrap();
    assert_eq!(release.version, "7.10.0");
    assert!(release
        .from
        .ends_with("rocm_sdk_libraries_gfx120x_all-7.10.0.dist-info/METADATA"));
    let places = Places {
        pythons: vec![env.to_path_buf()],
        ..Places::default()
    };
    assert_eq!(
        comgr_dirs(root, &places),
        vec![Path::new("/").join(site).join("_rocm_sdk_core/lib")]
    );
    // without METADATA, the dist-info's name says it
    std::fs::remove_file(
        root.join(site)
            .join("rocm_sdk_libraries_gfx120x_all-7.10.0.dist-info/METADATA"),
    )
    .unwrap();
    assert_eq!(release_of(root, &lib).unwrap().version, "7.10.0");
}

#[test]
fn a_hostile_wheel_is_read_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let site = root.join("site-packages");
    file(
        root,
        "site-packages/_rocm_sdk_libraries_gfx120X_all/lib/libhipblaslt.so.1",
        "ELF",
    );
    // a FIFO named METADATA is never opened: the dist-info's name says it
    let info = site.join("rocm_sdk_libraries_gfx120x_all-7.11.0.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    let fifo = std::ffi::CString::new(info.join("METADATA").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo reads it only.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // a platform package that is a symlink loop is no folder
    std::os::unix::fs::symlink(
        "_rocm_sdk_libraries_loop",
        site.join("_rocm_sdk_libraries_loop"),
    )
    .unwrap();
    let libs = python_libs(root, Path::new("/site-packages"));
    assert_eq!(
        libs,
        vec![PathBuf::from(
            "/site-packages/_rocm_sdk_libraries_gfx120X_all/lib"
        )]
    );
    let release = release_of(root, &libs[0]).unwrap();
    assert_eq!(release.version, "7.11.0");
    assert!(release.from.ends_with(".dist-info"), "{release:?}");
}

#[test]
fn rocm_core_folders_are_searched_and_named_for_their_release() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    file(root, "opt/rocm/core-7.13/lib/libhipblaslt.so.1.4", "ELF");
    file(
        root,
        "opt/rocm-10.0.0/core-10.0/lib/libhipblaslt.so.1.4",
        "ELF",
    );
    file(root, "opt/rocm-7.1.1/lib/libhipblaslt.so.1.1", "ELF");
    file(root, "opt/rocm-7.1.1/.info/version", "7.1.1-53\n");
    std::os::unix::fs::symlink("/opt/rocm/core-7.13", root.join("opt/rocm/core")).unwrap();
    let dirs = library_dirs(root, &Places::default());
    let found: Vec<(String, Option<String>)> = dirs
        .iter()
        .filter(|d| d.kind == LibraryKind::Rocm)
        .map(|d| {
            (
                d.dir.display().to_string(),
                d.rocm.as_ref().map(|r| r.version.clone()),
            )
        })
        .collect();
    let want = |d: &str, v: &str| (d.to_owned(), Some(v.to_owned()));
    assert_eq!(
        found,
        vec![
            want("/opt/rocm/core/lib", "7.13"),
            want("/opt/rocm/core-7.13/lib", "7.13"),
            want("/opt/rocm-10.0.0/core-10.0/lib", "10.0"),
            want("/opt/rocm-7.1.1/lib", "7.1.1-53"),
        ]
    );
}
