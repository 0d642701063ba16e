//! The maintainer scripts a package runs, in every format's words. The
//! scripts themselves are rendered from `templates/scripts/`
//! (what dh_dkms generates for Debian, the `%post`/`%preun` pair of
//! Fedora-style DKMS packages, and Arch's install script, which also
//! regenerates the initramfs the `dkms` package's alpm hooks leave alone).

/// Scripts run by the package manager; each is complete text for its
/// format (a deb script with its `#!`, an rpm scriptlet body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scripts {
    /// deb `postinst`, rpm `%post`, Arch `post_install`.
    pub post_install: Option<String>,
    /// deb `prerm`, rpm `%preun`, Arch `pre_remove`.
    pub pre_remove: Option<String>,
    /// Arch only: a whole install script (`.INSTALL`) with its own
    /// functions, used as it is instead of the two above.
    pub(crate) arch_install: Option<String>,
}
