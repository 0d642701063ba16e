//! The `[config]` table of a `kind = "config"` recipe: which files of the
//! source tree the package installs, and where. Checked here so that no
//! writer ever sees a destination outside the configuration folders.

use super::checker::Checker;
use super::grammar::check_shell_path;
use super::raw::RawConfig;
use super::{Config, ConfigFile};

/// Folders a config package may install into.
pub(crate) const DEST_ROOTS: [&str; 2] = ["/etc/", "/usr/lib/modprobe.d/"];

/// An absolute file path below one of [`DEST_ROOTS`], in plain characters.
pub(crate) fn check_dest(value: &str) -> Result<(), String> {
    let plain = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/_-.+@".contains(&b));
    let clean = value.starts_with('/')
        && value[1..]
            .split('/')
            .all(|part| !matches!(part, "" | "." | ".."));
    let below = DEST_ROOTS
        .iter()
        .any(|root| value.starts_with(root) && value.len() > root.len());
    if plain && clean && below {
        Ok(())
    } else {
        Err(format!(
            "`{value}` must be an absolute file path below `/etc` or `/usr/lib/modprobe.d` (letters, digits, `/`, `_`, `-`, `.`, `+`, `@`; no `..`)"
        ))
    }
}

pub(crate) fn config(c: &mut Checker, raw: &RawConfig, table_at: usize) -> Config {
    if raw.files.is_empty() {
        c.err(
            table_at,
            "`[config]` needs `files = [{ source = \"x.conf\", dest = \"/etc/modprobe.d/x.conf\" }]`",
        );
    }
    let mut files: Vec<ConfigFile> = Vec::new();
    for (i, entry) in raw.files.iter().enumerate() {
        let (f, at) = (entry.get_ref(), entry.span().start);
        let key = |k: &str| format!("config.files[{i}].{k}");
        let source = c.required(&f.source, at, &key("source"));
        // debian/rules, the spec and the PKGBUILD name it in shell lines.
        c.checked(&f.source, &key("source"), check_shell_path);
        let dest = c.required(&f.dest, at, &key("dest"));
        let dest_ok = c.checked(&f.dest, &key("dest"), check_dest).is_some();
        if dest_ok && files.iter().any(|other| other.dest == dest) {
            c.err(
                at,
                format!("`{}`: `{dest}` is installed twice", key("dest")),
            );
        }
        files.push(ConfigFile { source, dest });
    }
    Config { files }
}

#[cfg(test)]
mod tests {
    use super::check_dest;

    #[test]
    fn destinations_stay_in_the_configuration_folders() {
        assert!(check_dest("/etc/modprobe.d/amdgpu-cwsr-off.conf").is_ok());
        assert!(check_dest("/usr/lib/modprobe.d/amdgpu-cwsr-off.conf").is_ok());
        for bad in [
            "etc/modprobe.d/x.conf",
            "/etc/",
            "/etc",
            "/usr/lib/modprobe.d/",
            "/etc/../boot/x",
            "/etc/modprobe.d/./x.conf",
            "/usr/bin/x",
            "/etc/modprobe.d/x conf",
            "/etc/modprobe.d/",
        ] {
            assert!(check_dest(bad).is_err(), "{bad}");
        }
    }
}
