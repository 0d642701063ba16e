//! The `.SRCINFO` of a PKGBUILD we rendered: its top-level assignments read
//! back (words single-quoted as the `sh` template helper writes them) and
//! printed in the order and form of `makepkg --printsrcinfo`, so whatever
//! the PKGBUILD template declares, its `.SRCINFO` says the same.

use anyhow::{bail, Result};

/// The pkgbase keys `makepkg --printsrcinfo` prints, in its order
/// (pacman 6: `srcinfo_write_section_details` then the checksums).
const KEYS: &[&str] = &[
    "pkgdesc",
    "pkgver",
    "pkgrel",
    "epoch",
    "url",
    "install",
    "changelog",
    "arch",
    "groups",
    "license",
    "checkdepends",
    "makedepends",
    "depends",
    "optdepends",
    "provides",
    "conflicts",
    "replaces",
    "noextract",
    "options",
    "backup",
    "source",
    "validpgpkeys",
    "md5sums",
    "sha1sums",
    "sha224sums",
    "sha256sums",
    "sha384sums",
    "sha512sums",
    "b2sums",
];

/// `.SRCINFO` text of a single-package PKGBUILD.
pub(crate) fn from_pkgbuild(pkgbuild: &str) -> Result<String> {
    let vars = assignments(pkgbuild)?;
    let get = |key: &str| vars.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let Some([pkgname]) = get("pkgname").map(Vec::as_slice) else {
        bail!("the PKGBUILD names no single `pkgname`: fix templates/arch/PKGBUILD.hbs");
    };
    let mut out = format!("pkgbase = {pkgname}\n");
    for key in KEYS {
        for value in get(key).into_iter().flatten() {
            out.push_str(&format!("\t{key} = {value}\n"));
        }
    }
    out.push_str(&format!("\npkgname = {pkgname}\n"));
    Ok(out)
}

/// `name=value` and `name=(words...)` lines before the first function, in
/// order; names starting with `_` are the PKGBUILD's own and left out.
fn assignments(text: &str) -> Result<Vec<(String, Vec<String>)>> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.contains("() {") || line.ends_with("()") {
            break;
        }
        let Some((name, value)) = line.split_once('=') else {
            bail!(
                "PKGBUILD line {}: `{line}` is not an assignment; .SRCINFO reads only assignments before the functions",
                i + 1
            );
        };
        let words = if let Some(rest) = value.strip_prefix('(') {
            let mut body = rest.to_owned();
            while !closes(&body) {
                let Some((_, next)) = lines.next() else {
                    bail!("PKGBUILD line {}: the array `{name}` never closes", i + 1);
                };
                body.push('\n');
                body.push_str(next);
            }
            let body = body.trim_end();
            words(&body[..body.len() - 1])?
        } else {
            words(value)?
        };
        if !name.starts_with('_') {
            out.push((name.to_owned(), words));
        }
    }
    Ok(out)
}

/// Whether `body` ends with a `)` outside single quotes.
fn closes(body: &str) -> bool {
    let mut quoted = false;
    let mut last = None;
    for c in body.chars() {
        if c == '\'' {
            quoted = !quoted;
        }
        if !c.is_whitespace() {
            last = Some((c, quoted));
        }
    }
    matches!(last, Some((')', false)))
}

/// Shell words: single quotes, backslash escapes, whitespace between.
fn words(text: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => bail!("PKGBUILD: an unclosed quote in `{text}`"),
                    }
                }
            }
            '\\' => {
                if let Some(c) = chars.next() {
                    word.get_or_insert_with(String::new).push(c);
                }
            }
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    out.push(w);
                }
            }
            '$' | '`' | '"' => {
                bail!(
                    "PKGBUILD: `{text}` needs the shell to expand it; .SRCINFO takes literal words"
                )
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_quoted_words_and_arrays_in_makepkg_order() {
        let pkgbuild = "# c\npkgname='x-dkms'\n_n='x'\npkgver='1.0'\npkgrel='1'\n\
            pkgdesc='it'\\''s'\narch=('any')\ndepends=('dkms')\n\
            source=('a.tar.gz'\n        'b.patch')\nsha256sums=('11'\n            '22')\n\
            url='https://e.org'\n\nprepare() {\n\tcd x\n}\n";
        assert_eq!(
            from_pkgbuild(pkgbuild).unwrap(),
            "pkgbase = x-dkms\n\tpkgdesc = it's\n\tpkgver = 1.0\n\tpkgrel = 1\n\
             \turl = https://e.org\n\tarch = any\n\tdepends = dkms\n\
             \tsource = a.tar.gz\n\tsource = b.patch\n\tsha256sums = 11\n\
             \tsha256sums = 22\n\npkgname = x-dkms\n"
        );
        assert!(from_pkgbuild("pkgname=\"$x\"\n").is_err());
    }
}
