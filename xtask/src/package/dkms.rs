//! The DKMS hooks of each package format: maintainer scripts equivalent to
//! what `dh_dkms` generates for Debian, the `%post`/`%preun` pair that
//! Fedora-style DKMS packages carry, and none for Arch, where the `dkms`
//! package's alpm hooks act on any `usr/src/*/dkms.conf`.

use super::meta::shell_quote;

/// Scripts run by the package manager; each is complete text for its
/// format (a deb script with its `#!`, an rpm scriptlet body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scripts {
    /// deb `postinst`, rpm `%post`, Arch `post_install`.
    pub post_install: Option<String>,
    /// deb `prerm`, rpm `%preun`, Arch `pre_remove`.
    pub pre_remove: Option<String>,
}

/// `<module>-dkms`, the package name every format uses.
pub fn package_name(module: &str) -> String {
    format!("{module}-dkms")
}

/// `usr/src/<module>-<version>`, where DKMS expects the source.
pub fn source_dir(module: &str, version: &str) -> String {
    format!("usr/src/{module}-{version}")
}

/// Debian: `postinst` hands over to `/usr/lib/dkms/common.postinst` (add,
/// build, install for the current and newest kernels) on `configure`;
/// `prerm` removes the module from every kernel on remove, upgrade and
/// deconfigure — the behaviour of dh_dkms' postinst-dkms/prerm-dkms.
pub fn deb(module: &str, version: &str) -> Scripts {
    let vars = format!(
        "DKMS_NAME={}\nDKMS_PACKAGE_NAME=\"$DKMS_NAME-dkms\"\nDKMS_VERSION={}\n",
        shell_quote(module),
        shell_quote(version)
    );
    let postinst = format!(
        r#"#!/bin/sh
set -e

{vars}
case "$1" in
	configure)
		if [ -f /usr/lib/dkms/common.postinst ]; then
			/usr/lib/dkms/common.postinst "$DKMS_NAME" "$DKMS_VERSION" "/usr/share/$DKMS_PACKAGE_NAME" "" "$2"
		else
			echo "ERROR: dkms lacks /usr/lib/dkms/common.postinst; upgrade dkms, then run: dpkg --configure $DKMS_PACKAGE_NAME" >&2
			exit 1
		fi
	;;
esac

exit 0
"#
    );
    let prerm = format!(
        r#"#!/bin/sh
set -e

{vars}
case "$1" in
	remove|upgrade|deconfigure)
		if [ "$(dkms status -m "$DKMS_NAME" -v "$DKMS_VERSION")" ]; then
			dkms remove -m "$DKMS_NAME" -v "$DKMS_VERSION" --all
		fi
	;;
esac

exit 0
"#
    );
    Scripts {
        post_install: Some(postinst),
        pre_remove: Some(prerm),
    }
}

/// rpm: `%post` adds, builds and installs for the running kernel (newer
/// kernels are handled by dkms' own kernel-install hook); `%preun` removes
/// the module from every kernel. Failures do not abort the transaction
/// (`|| :`), as in Fedora's DKMS packages: a missing kernel-devel must not
/// leave the rpm database half-updated.
pub fn rpm(module: &str, version: &str) -> Scripts {
    let m = shell_quote(module);
    let v = shell_quote(version);
    Scripts {
        post_install: Some(format!(
            "dkms add -m {m} -v {v} -q --rpm_safe_upgrade || :\n\
             dkms build -m {m} -v {v} -q || :\n\
             dkms install -m {m} -v {v} -q || :\n"
        )),
        pre_remove: Some(format!(
            "dkms remove -m {m} -v {v} -q --all --rpm_safe_upgrade || :\n"
        )),
    }
}

/// Arch: none. The `dkms` package installs alpm hooks
/// (`70-dkms-install.hook`, `70-dkms-upgrade.hook`) that build and remove
/// every `usr/src/*/dkms.conf` a package ships, so an `.INSTALL` would do
/// the work twice.
pub fn arch() -> Scripts {
    Scripts::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deb_scripts_quote_their_values() {
        let s = deb("hello", "1.0");
        let post = s.post_install.unwrap();
        assert!(post.starts_with("#!/bin/sh\nset -e\n"));
        assert!(post.contains("DKMS_NAME='hello'\n"));
        assert!(post.contains(r#"/usr/lib/dkms/common.postinst "$DKMS_NAME" "$DKMS_VERSION""#));
        assert!(s
            .pre_remove
            .unwrap()
            .contains("remove|upgrade|deconfigure)"));
    }
}
