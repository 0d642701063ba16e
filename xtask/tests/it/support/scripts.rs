//! The maintainer scripts of `templates/`, rendered with fixed values of
//! the amdgpu Debian recipe, for the tests that run them.

use crate::support::repo_root;

/// `templates/{script}` rendered for `amdgpu-debian-dkms` 6.12.0.1.
pub(crate) fn rendered(script: &str) -> String {
    let renderer = xtask::release::render::Renderer::new(&repo_root().join("templates")).unwrap();
    let values = serde_json::json!({
        "name": "amdgpu-debian",
        "pkgname": "amdgpu-debian-dkms",
        "version": "6.12.0.1",
    });
    renderer.render(script, &values).unwrap()
}
