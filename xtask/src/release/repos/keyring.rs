//! The keyring package (`rocm-patchkit-archive-keyring`) a user installs
//! first: the repository's public key and its source for the package
//! manager, as a `.deb` (the key in `/usr/share/keyrings/`, a deb822
//! `/etc/apt/sources.list.d/` snippet), an `.rpm` (the key in
//! `/etc/pki/rpm-gpg/`, a `/etc/yum.repos.d/` file with `gpgcheck=1` and
//! `repo_gpgcheck=1`) and an Arch package (a pacman keyring that its
//! install script hands to `pacman-key --populate`). Written by the same
//! writers as every package of ours; the snippets are rendered from
//! `templates/repos/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::gpg::Signer;
use super::Site;
use crate::formats::{self, About, Architecture, FileTree, Format, PackageMeta, Packing, Scripts};
use crate::release::render::Renderer;

/// The package's name, in every format.
pub(crate) const NAME: &str = "rocm-patchkit-archive-keyring";
/// Where apt's snippet says the key is.
pub(crate) const APT_KEYRING: &str = "usr/share/keyrings/rocm-patchkit-archive-keyring.gpg";
pub(crate) const APT_SOURCES: &str = "etc/apt/sources.list.d/rocm-patchkit.sources";
pub(crate) const RPM_KEY: &str = "etc/pki/rpm-gpg/RPM-GPG-KEY-rocm-patchkit";
pub(crate) const DNF_REPO: &str = "etc/yum.repos.d/rocm-patchkit.repo";
/// pacman's keyrings folder and the keyring's name there.
pub(crate) const PACMAN_KEYRINGS: &str = "usr/share/pacman/keyrings";

/// The templates of `templates/repos/`, each for one file: apt's source
/// (in the .deb), dnf's `.repo` (in the .rpm and beside the repository),
/// the Arch install script, and the pacman.conf section the setup appends.
pub(crate) const APT_SOURCES_TEMPLATE: &str = "repos/apt.sources";
pub(crate) const DNF_REPO_TEMPLATE: &str = "repos/dnf.repo";
pub(crate) const ARCH_INSTALL_TEMPLATE: &str = "repos/keyring.install";
pub(crate) const PACMAN_CONF_TEMPLATE: &str = "repos/pacman.conf";
pub const TEMPLATES: [&str; 4] = [
    APT_SOURCES_TEMPLATE,
    DNF_REPO_TEMPLATE,
    ARCH_INSTALL_TEMPLATE,
    PACMAN_CONF_TEMPLATE,
];

/// The public key in both forms.
pub(crate) struct Key {
    pub(crate) binary: Vec<u8>,
    pub(crate) armored: Vec<u8>,
}

/// The snippets rendered from `templates/repos/`, by template name.
pub(crate) type Snippets = BTreeMap<String, String>;

/// Renders each of [`TEMPLATES`] for `site`.
pub fn snippets(templates: &Path, site: &Site) -> Result<Snippets> {
    let renderer = Renderer::new(templates)?;
    let values = serde_json::json!({
        "name": super::NAME,
        "url": site.url,
        "suite": site.suite,
        "fingerprint": site.fingerprint,
        "keyring": NAME,
        "apt_keyring": format!("/{APT_KEYRING}"),
        "rpm_key": format!("/{RPM_KEY}"),
    });
    let mut out = Snippets::new();
    for name in TEMPLATES {
        out.insert(name.to_owned(), renderer.render(name, &values)?);
    }
    Ok(out)
}

/// The keyring package of each format, written into `dir`: their paths.
pub(crate) fn write(
    dir: &Path,
    site: &Site,
    key: &Key,
    snippets: &Snippets,
    signer: &Signer,
) -> Result<BTreeMap<Format, PathBuf>> {
    let time = signer.time();
    let meta = meta(site, &signer.uid, signer.created, time)?;
    let snippet = |name: &str| -> Result<Vec<u8>> {
        snippets
            .get(name)
            .map(|s| s.clone().into_bytes())
            .ok_or_else(|| anyhow::anyhow!("no template templates/{name}.hbs: restore it from git"))
    };
    let mut deb = FileTree::new();
    deb.add_bytes(APT_KEYRING, key.binary.clone(), false)?;
    deb.add_bytes(APT_SOURCES, snippet(APT_SOURCES_TEMPLATE)?, false)?;
    deb.mark_config(APT_SOURCES)?;
    // Installing an apt source is what a third-party archive's keyring
    // package is for (Debian's own archives need none).
    deb.add_bytes(
        &format!("usr/share/lintian/overrides/{NAME}"),
        format!("{NAME}: package-installs-apt-sources [{APT_SOURCES}]\n"),
        false,
    )?;
    let mut rpm = FileTree::new();
    rpm.add_bytes(RPM_KEY, key.armored.clone(), false)?;
    rpm.add_bytes(DNF_REPO, snippet(DNF_REPO_TEMPLATE)?, false)?;
    rpm.mark_config(DNF_REPO)?;
    let mut arch = FileTree::new();
    let keyring = format!("{PACMAN_KEYRINGS}/{}", super::NAME);
    arch.add_bytes(&format!("{keyring}.gpg"), key.armored.clone(), false)?;
    arch.add_bytes(
        &format!("{keyring}-trusted"),
        format!("{}:4:\n", site.fingerprint),
        false,
    )?;
    arch.add_bytes(&format!("{keyring}-revoked"), Vec::new(), false)?;
    let arch_scripts = Scripts {
        arch_install: Some(String::from_utf8(snippet(ARCH_INSTALL_TEMPLATE)?)?),
        ..Scripts::default()
    };
    let none = Scripts::default();
    let packing = Packing::default();
    let mut out = BTreeMap::new();
    for (format, tree, scripts) in [
        (Format::Deb, &deb, &none),
        (Format::Rpm, &rpm, &none),
        (Format::Arch, &arch, &arch_scripts),
    ] {
        let pkg = formats::Package {
            meta: &meta,
            machine: Architecture::Any,
            tree,
            scripts,
            pkgbuild: None,
            epoch: time.max(0) as u64,
        };
        out.insert(format, formats::write(format, &pkg, dir, &packing)?.path);
    }
    Ok(out)
}

/// What the keyring package says of itself: its version is the day its key
/// was made (`2026.11.27`), so a new key upgrades it.
fn meta(site: &Site, maintainer: &str, created: i64, time: i64) -> Result<PackageMeta> {
    let (y, m, d) = crate::formats::civil_from_days(created.div_euclid(86400));
    let homepage = (site.url.starts_with("https://") || site.url.starts_with("http://"))
        .then(|| site.url.clone());
    let meta = PackageMeta {
        name: NAME.to_owned(),
        source: None,
        about: About {
            version: format!("{y}.{m:02}.{d:02}"),
            release: "1".to_owned(),
            summary: "GnuPG key and package source of the rocm-patchkit repository".to_owned(),
            description: format!(
                "The public key the rocm-patchkit package repository at {url} is signed\n\
                 with (fingerprint {fpr}), and the package manager's source\n\
                 for it, so updates of the packages published there are installed\n\
                 only when they carry a signature made with this key.",
                url = site.url,
                fpr = site.fingerprint
            ),
            license: "GPL-2.0-only".to_owned(),
            homepage,
            maintainer: maintainer.to_owned(),
        },
        depends: Vec::new(),
        changes: vec![format!("Key {} for {}.", site.fingerprint, site.url)],
        copyright: vec![format!(
            "{} {maintainer}",
            crate::release::packaging::year(time)
        )],
        relations: Default::default(),
    };
    for format in [Format::Deb, Format::Rpm, Format::Arch] {
        meta.validate(format).map_err(|e| {
            crate::shared::diag::UsageError(format!(
                "the keyring package cannot be made from the signing key's user id                  `{maintainer}` (it becomes the package's maintainer): {e}; sign with a key                  whose first user id reads `Name <address@host>`"
            ))
        })?;
    }
    Ok(meta)
}
