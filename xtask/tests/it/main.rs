//! The one integration test binary: every test drives the real `xtask`
//! binary or library against real git repositories, a real HTTP server on
//! 127.0.0.1 and the real packaging tools.

mod support;

mod amdgpu_slow;
mod apply;
mod bench_package;
mod boot;
mod build_config;
mod build_dkms;
mod build_line;
mod chunk_cache;
mod codeobj_gate;
mod codeobj_writes;
mod conflicts;
mod debian_source;
mod dist;
mod dkms_install;
mod doctor;
mod doctor_gated;
mod doctor_hipblaslt;
mod doctor_hostile;
mod doctor_kfd;
mod doctor_knobs;
mod doctor_library_faults;
mod doctor_module;
mod doctor_pid;
mod drift;
mod fetch;
mod fetch_http;
mod fetch_pins;
mod hipblaslt;
mod hostile;
mod hostile_build;
mod hostile_work;
mod initramfs;
mod initramfs_dracut;
mod lock;
mod package;
mod patch_engine;
mod patch_hunk_placement;
mod patch_strip_and_directory;
mod rebuild;
mod recipes;
mod render;
mod repo;
mod rewrite_inplace;
mod rewrite_package;
mod rewrite_real;
mod safe_text;
mod source_packages;
mod source_packages_config;
mod verify;
mod workflows;
