//! The grammar of recipe values: commit ids, hashes, URLs, paths inside the
//! tree, and what Debian, RPM, Arch and DKMS accept as names and versions.
//! Each check returns the reason a value is refused, ready for a diagnostic.

use std::path::Path;

pub fn check_commit(value: &str) -> Result<(), String> {
    if value.len() == 40
        && value
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a full commit id: write all 40 lower-case hex digits, or set `ref` and run `cargo xtask lock`"
        ))
    }
}

pub fn check_sha256(value: &str) -> Result<(), String> {
    if value.len() == 64
        && value
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a sha256: write 64 lower-case hex digits, or remove it and run `cargo xtask lock`"
        ))
    }
}

pub(super) fn check_http_url(value: &str) -> Result<(), String> {
    match url::Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        Ok(u) => Err(format!(
            "`{value}` uses `{}`: only http and https URLs are fetched",
            u.scheme()
        )),
        Err(e) => Err(format!("`{value}` is not a URL ({e})")),
    }
}

pub(super) fn check_git_url(value: &str) -> Result<(), String> {
    if Path::new(value).is_absolute() {
        return Ok(());
    }
    match url::Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https" | "git" | "file" | "ssh") => Ok(()),
        Ok(u) => Err(format!(
            "`{value}` uses `{}`: use https, http, git, ssh, file or an absolute path",
            u.scheme()
        )),
        Err(e) => Err(format!(
            "`{value}` is neither a URL nor an absolute path ({e})"
        )),
    }
}

/// A path inside the extracted tree: relative, no `..`.
pub(super) fn check_tree_path(value: &str) -> Result<(), String> {
    let path = Path::new(value);
    if value.is_empty()
        || path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        Err(format!(
            "`{value}` must be a relative path inside the source tree, without `..`"
        ))
    } else {
        Ok(())
    }
}

/// Debian's package-name grammar, which is also valid for RPM and Arch.
pub(super) fn check_package_name(value: &str) -> Result<(), String> {
    let ok = value.len() >= 2
        && value
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` is not a package name: use lower-case letters, digits, `+`, `-` and `.`, starting with a letter or digit"))
    }
}

/// A version every target accepts: starts with a digit; letters, digits, `.`, `+`, `~`.
pub(super) fn check_version(value: &str) -> Result<(), String> {
    let ok = value.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+.~".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` is not a version: start with a digit and use letters, digits, `.`, `+` and `~` (no `-`, no spaces)"))
    }
}

pub(super) fn check_release(value: &str) -> Result<(), String> {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.')
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a release: use letters, digits and `.`"
        ))
    }
}

pub(super) fn check_one_line(value: &str) -> Result<(), String> {
    if value.contains(['\n', '\r']) {
        Err("must be a single line".to_owned())
    } else {
        Ok(())
    }
}

pub(super) fn check_patch_name(value: &str) -> Result<(), String> {
    let ok = !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        && (value.ends_with(".patch") || value.ends_with(".diff"));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` is not a patch file name: letters, digits, `.`, `_`, `+`, `-`, ending in `.patch` or `.diff`"))
    }
}

/// A DKMS module name: what `BUILT_MODULE_NAME` and the `.ko` file accept.
pub(super) fn check_module_name(value: &str) -> Result<(), String> {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a module name: letters, digits, `_` and `-`"
        ))
    }
}

/// An absolute module directory below `/lib/modules/<kernel>/`.
pub(super) fn check_dest(value: &str) -> Result<(), String> {
    let ok = value.starts_with('/')
        && !value.split('/').any(|part| part == "..")
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_-.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` must be an absolute folder such as `/updates/dkms` (letters, digits, `/`, `_`, `-`, `.`)"))
    }
}

/// A make line for dkms.conf: one line; dkms.conf quotes it.
pub(super) fn check_make(value: &str) -> Result<(), String> {
    check_one_line(value)?;
    if value.contains('\'') {
        return Err("must not contain `'` (dkms.conf holds it in single quotes)".to_owned());
    }
    Ok(())
}
