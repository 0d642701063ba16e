//! The one-line setup of each distribution for a published repository:
//! install the keyring package (which brings the key and the package
//! manager's source), then refresh. Printed by `publish-repo` and written
//! as `setup.txt`; `docs/repositories.md` shows the same lines.

use std::collections::BTreeMap;

use super::{keyring, RepoFormat, Site, NAME};
use crate::release::render::sh_quote;

/// The setup text for `site`; `keyrings` holds each repository's keyring
/// package path below the site (`apt/pool/main/r/.../x.deb`).
pub(crate) fn text(site: &Site, keyrings: &BTreeMap<RepoFormat, String>) -> String {
    let url = |rel: &str| sh_quote(&format!("{}/{rel}", site.url));
    let k = keyring::NAME;
    let mut out = format!(
        "The {NAME} repositories at {}, signed with the key\n{}\n\
         (check it after installing the keyring package: gpg --show-keys {})\n",
        site.url,
        site.fingerprint,
        format_args!("/{}", keyring::APT_KEYRING),
    );
    for (format, rel) in keyrings {
        let line = match format {
            RepoFormat::Apt => format!(
                "Debian, Ubuntu (apt):\n  curl -fsSLo /tmp/{k}.deb {} && sudo apt-get install -y /tmp/{k}.deb && sudo apt-get update\n  then: sudo apt-get install <package>\n",
                url(rel)
            ),
            RepoFormat::Rpm => format!(
                "Fedora, RHEL and other dnf systems:\n  sudo dnf install -y {}\n  then: sudo dnf install <package>\n",
                url(rel)
            ),
            RepoFormat::Pacman => format!(
                "Arch Linux (pacman):\n  curl -fsSLo /tmp/{k}.pkg.tar.zst {} && sudo pacman -U --noconfirm /tmp/{k}.pkg.tar.zst && curl -fsSL {} | sudo tee -a /etc/pacman.conf >/dev/null && sudo pacman -Sy\n  then: sudo pacman -S <package>\n",
                url(rel),
                url(&format!("pacman/{NAME}.conf"))
            ),
        };
        out.push('\n');
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_distribution_gets_one_line_with_quoted_urls() {
        let site = Site {
            url: "https://example.org/r".to_owned(),
            suite: "stable".to_owned(),
            fingerprint: "ABCD".to_owned(),
        };
        let keyrings = BTreeMap::from([
            (RepoFormat::Apt, "apt/pool/main/r/k/k_1_all.deb".to_owned()),
            (
                RepoFormat::Pacman,
                "pacman/k-1-1-any.pkg.tar.zst".to_owned(),
            ),
        ]);
        let text = text(&site, &keyrings);
        assert!(text.contains("curl -fsSLo /tmp/rocm-patchkit-archive-keyring.deb 'https://example.org/r/apt/pool/main/r/k/k_1_all.deb' && sudo apt-get install"));
        assert!(text.contains(
            "'https://example.org/r/pacman/rocm-patchkit.conf' | sudo tee -a /etc/pacman.conf"
        ));
        assert!(!text.contains("dnf"), "no rpm repository, no dnf line");
    }
}
