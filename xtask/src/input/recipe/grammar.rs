//! The grammar of recipe values: commit ids, hashes, URLs, paths inside the
//! tree, and what Debian, RPM, Arch and DKMS accept as names and versions.
//! Each check returns the reason a value is refused, ready for a diagnostic.

use std::path::Path;

/// `Ok` when `ok`; else the reason: the value in backticks, then `reason`.
fn refuse_unless(ok: bool, value: &str, reason: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("`{value}` {reason}"))
    }
}

/// Exactly `len` lower-case hex digits.
fn lower_hex(value: &str, len: usize) -> bool {
    value.len() == len
        && value
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

pub(crate) fn check_commit(value: &str) -> Result<(), String> {
    refuse_unless(
        lower_hex(value, 40),
        value,
        "is not a full commit id: write all 40 lower-case hex digits, or set `ref` and run `cargo xtask lock`",
    )
}

pub(crate) fn check_sha256(value: &str) -> Result<(), String> {
    refuse_unless(
        lower_hex(value, 64),
        value,
        "is not a sha256: write 64 lower-case hex digits, or remove it and run `cargo xtask lock`",
    )
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
        check_no_control(value, false)
    }
}

/// A folder of the tree that packaging files name in shell lines (the
/// spec's `cp -a`, the PKGBUILD, dkms.conf): a relative path of plain
/// names, or `.`.
pub(super) fn check_shell_path(value: &str) -> Result<(), String> {
    if value == "." {
        return Ok(());
    }
    check_tree_path(value)?;
    if value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._+-".contains(&b))
    {
        Ok(())
    } else {
        Err(format!(
            "`{value}` reaches shell lines of the packaging files: use letters, digits, `/`, `.`, `_`, `+` and `-`"
        ))
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
    refuse_unless(ok, value, "is not a package name: use lower-case letters, digits, `+`, `-` and `.`, starting with a letter or digit")
}

/// A version every target accepts: starts with a digit; letters, digits, `.`, `+`, `~`.
pub(super) fn check_version(value: &str) -> Result<(), String> {
    let ok = value.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+.~".contains(&b));
    refuse_unless(ok, value, "is not a version: start with a digit and use letters, digits, `.`, `+` and `~` (no `-`, no spaces)")
}

pub(super) fn check_release(value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.');
    refuse_unless(ok, value, "is not a release: use letters, digits and `.`")
}

pub(super) fn check_one_line(value: &str) -> Result<(), String> {
    if value.contains('\n') {
        return Err("must be a single line".to_owned());
    }
    check_no_control(value, false)
}

/// Free text that reaches package metadata and packaging files: no control
/// characters (CR, TAB, ESC, NUL, ...), newlines only where `newlines`.
pub(super) fn check_no_control(value: &str, newlines: bool) -> Result<(), String> {
    match value
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && !(newlines && *c == '\n'))
    {
        Some((i, c)) => Err(format!(
            "holds the control character U+{:04X} at character {}; write plain text (spaces, {}no tabs, no escapes)",
            c as u32,
            i + 1,
            if newlines { "newlines, " } else { "" }
        )),
        None => Ok(()),
    }
}

/// A package summary: one line of plain text, at most 80 characters (the
/// longest Debian, rpm and Arch take without complaint).
pub(super) fn check_summary(value: &str) -> Result<(), String> {
    check_one_line(value)?;
    let n = value.trim().chars().count();
    if n > 80 {
        return Err(format!(
            "is {n} characters long; write at most 80 and put the rest in `description`"
        ));
    }
    Ok(())
}

/// A package description: plain text, newlines allowed.
pub(super) fn check_description(value: &str) -> Result<(), String> {
    check_no_control(value, true)?;
    match spec_directive_line(value) {
        Some((n, line)) => Err(format!(
            "line {n} (`{}`) starts with `%`, which rpm reads as a spec section or conditional \
             (`%pre`, `%check`, `%if`) even when escaped or indented; reword the line so that it \
             does not start with `%`",
            line.trim()
        )),
        None => Ok(()),
    }
}

/// The first line (1-based) of `text` whose first visible character is `%`.
pub(super) fn spec_directive_line(text: &str) -> Option<(usize, &str)> {
    text.lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with('%'))
        .map(|(i, l)| (i + 1, l))
}

/// A recipe file's name and path reach comments of dkms.conf, the spec and
/// the PKGBUILD and name `patches/<stem>/`: a plain file name, and no control
/// character anywhere in the path.
pub(crate) fn check_recipe_path(path: &Path) -> Result<(), String> {
    let shown = path.to_string_lossy();
    if let Some(c) = shown.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the recipe path {:?} holds the control character U+{:04X}; rename the file or folder \
             (letters, digits, `.`, `_`, `+`, `-`)",
            shown, c as u32
        ));
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let ok = stem
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the recipe name {stem:?} (the file stem) must start with a letter or digit and hold \
             only letters, digits, `.`, `_`, `+` and `-`; rename the file"
        ))
    }
}

pub(super) fn check_patch_name(value: &str) -> Result<(), String> {
    let ok = !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        && (value.ends_with(".patch") || value.ends_with(".diff"));
    refuse_unless(ok, value, "is not a patch file name: letters, digits, `.`, `_`, `+`, `-`, ending in `.patch` or `.diff`")
}

/// A DKMS module name: what `BUILT_MODULE_NAME` and the `.ko` file accept.
pub(super) fn check_module_name(value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    refuse_unless(
        ok,
        value,
        "is not a module name: letters, digits, `_` and `-`",
    )
}

/// An absolute module directory below `/lib/modules/<kernel>/`.
pub(super) fn check_dest(value: &str) -> Result<(), String> {
    let ok = value.starts_with('/')
        && !value.split('/').any(|part| part == "..")
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_-.".contains(&b));
    refuse_unless(
        ok,
        value,
        "must be an absolute folder such as `/updates/dkms` (letters, digits, `/`, `_`, `-`, `.`)",
    )
}

/// A make line for dkms.conf: one line; dkms.conf quotes it.
pub(super) fn check_make(value: &str) -> Result<(), String> {
    check_one_line(value)?;
    if value.contains('\'') {
        return Err("must not contain `'` (dkms.conf holds it in single quotes)".to_owned());
    }
    Ok(())
}
