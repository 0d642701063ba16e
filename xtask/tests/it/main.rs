//! The one integration test binary: every test drives the real `xtask`
//! binary or library against real git repositories, a real HTTP server on
//! 127.0.0.1 and the real packaging tools.

mod support;

mod dist;
mod fetch;
mod fetch_http;
mod lock;
mod package;
mod package_support;
mod recipes;
mod render;
mod repo;

mod apply;
mod bench_package;
mod drift;
mod patch;
mod patch_support;
mod verify;
