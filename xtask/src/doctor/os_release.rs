//! The distribution of the machine, from `/etc/os-release` (else
//! `/usr/lib/os-release`) below the root, and the one table of what each
//! distribution runs to upgrade its kernel: the next steps print the
//! distribution's own command. Reads one small file; the table is pure.

use std::path::Path;

use serde::Serialize;

use super::fsread::{self, Root, Unread};

/// The lines of os-release doctor uses (`ID`, `ID_LIKE`, `NAME`,
/// `VERSION_ID`, `VERSION_CODENAME`), unquoted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct OsRelease {
    pub(crate) id: String,
    pub(crate) id_like: Vec<String>,
    pub(crate) name: Option<String>,
    pub(crate) version_id: Option<String>,
    pub(crate) version_codename: Option<String>,
    /// The file it was read from (a machine path).
    pub(crate) from: String,
}

/// The package-manager families doctor knows a kernel upgrade for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Debian,
    Ubuntu,
    Fedora,
    Arch,
    Suse,
}

impl OsRelease {
    /// The family by `ID`, then by each `ID_LIKE` word. Arch's kernel
    /// package names hold only for Arch itself and EndeavourOS (Manjaro's
    /// are `linux612` and the like): an `ID_LIKE=arch` is not enough.
    pub(crate) fn family(&self) -> Option<Family> {
        let arch = matches!(self.id.as_str(), "arch" | "endeavouros");
        if arch {
            return Some(Family::Arch);
        }
        std::iter::once(&self.id)
            .chain(&self.id_like)
            .find_map(|id| match id.as_str() {
                "ubuntu" => Some(Family::Ubuntu),
                "debian" => Some(Family::Debian),
                "fedora" | "rhel" | "centos" => Some(Family::Fedora),
                "suse" | "opensuse" | "sles" => Some(Family::Suse),
                id if id.starts_with("opensuse") => Some(Family::Suse),
                _ => None,
            })
    }

    /// Whether the distribution's kernel package moves on to new series
    /// (Fedora, Arch, openSUSE Tumbleweed): its upgrade then brings a
    /// series with a fix.
    pub(crate) fn moves_series(&self) -> bool {
        match self.family() {
            Some(Family::Arch) => true,
            Some(Family::Fedora) => self.id == "fedora",
            Some(Family::Suse) => self.id.contains("tumbleweed"),
            _ => false,
        }
    }

    /// `Ubuntu 24.04`, `Arch Linux`: the name and version as the file says.
    pub(crate) fn describe(&self) -> String {
        let name = self.name.clone().unwrap_or_else(|| self.id.clone());
        match &self.version_id {
            Some(v) => format!("{name} {v}"),
            None => name,
        }
    }
}

/// Reads os-release below `root`; what could not be read goes to `unread`.
pub(crate) fn read(root: &Path, unread: &mut Vec<Unread>) -> Option<OsRelease> {
    let fs = Root::new(root);
    let mut first = None;
    for rel in ["/etc/os-release", "/usr/lib/os-release"] {
        match fs.read_text(Path::new(rel), fsread::SMALL) {
            Ok(text) => return parse(&text, rel),
            Err(u) => {
                first.get_or_insert(u);
            }
        }
    }
    unread.extend(first);
    None
}

/// The os-release text as a value; `None` without an `ID` line.
pub(crate) fn parse(text: &str, from: &str) -> Option<OsRelease> {
    let mut os = OsRelease {
        from: from.to_owned(),
        ..OsRelease::default()
    };
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once('=') else {
            continue;
        };
        let value = unquote(value);
        match key {
            "ID" => os.id = value.to_ascii_lowercase(),
            "ID_LIKE" => os.id_like = value.split_whitespace().map(str::to_owned).collect(),
            "NAME" => os.name = Some(value),
            "VERSION_ID" => os.version_id = Some(value),
            "VERSION_CODENAME" => os.version_codename = Some(value),
            _ => {}
        }
    }
    (!os.id.is_empty()).then_some(os)
}

/// A shell value of os-release: quotes and their backslash escapes gone.
fn unquote(value: &str) -> String {
    let v = value.trim();
    let inner = match (v.chars().next(), v.chars().last()) {
        (Some(q @ ('"' | '\'')), Some(e)) if v.len() >= 2 && q == e => &v[1..v.len() - 1],
        _ => v,
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// One command line a next step prints: the program and its arguments,
/// run as printed (`sudo` first when it needs root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Command {
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
}

impl Command {
    pub(crate) fn new(command: &str, args: &[&str]) -> Command {
        Command {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    /// The line as a shell reads it back: every word that holds anything
    /// but `[A-Za-z0-9_./:=+@%,-]` (and a glob's `*` in a `./` path) quoted.
    pub(crate) fn line(&self) -> String {
        std::iter::once(&self.command)
            .chain(&self.args)
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:=+@%,-".contains(c);
    let glob = word.contains('/');
    if !word.is_empty() && word.chars().all(|c| plain(c) || (glob && c == '*')) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The commands that upgrade the kernel within its distribution; `lts`
/// for a release of Arch's `linux-lts`. `None`: doctor knows no command
/// for this distribution (the step then says it in words).
pub(crate) fn kernel_upgrade(family: Family, lts: bool) -> Vec<Command> {
    match family {
        Family::Debian | Family::Ubuntu => vec![
            Command::new("sudo", &["apt", "update"]),
            Command::new("sudo", &["apt", "full-upgrade"]),
        ],
        Family::Fedora => vec![Command::new(
            "sudo",
            &["dnf", "upgrade", "--refresh", "kernel"],
        )],
        Family::Arch => vec![Command::new(
            "sudo",
            &["pacman", "-Syu", if lts { "linux-lts" } else { "linux" }],
        )],
        Family::Suse => vec![Command::new("sudo", &["zypper", "up", "kernel-default"])],
    }
}

/// The command that installs the package files matching `glob` (a
/// `./dist/<recipe>/...` path) with the distribution's tool, which
/// resolves their dependencies (`dkms`): `apt install ./x.deb` does,
/// `dpkg -i` does not.
pub(crate) fn install_package(family: Family, dir: &str) -> Command {
    match family {
        Family::Debian | Family::Ubuntu => {
            Command::new("sudo", &["apt", "install", &format!("./{dir}/*.deb")])
        }
        Family::Fedora => Command::new(
            "sudo",
            &["dnf", "install", &format!("./{dir}/*.noarch.rpm")],
        ),
        Family::Suse => Command::new(
            "sudo",
            &["zypper", "install", &format!("./{dir}/*.noarch.rpm")],
        ),
        Family::Arch => Command::new("sudo", &["pacman", "-U", &format!("./{dir}/*.pkg.tar.zst")]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ubuntu_and_its_derivatives_read_as_ubuntu() {
        let os = parse(
            "NAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\nID_LIKE=debian\n",
            "/etc/os-release",
        )
        .unwrap();
        assert_eq!(os.family(), Some(Family::Ubuntu));
        assert_eq!(os.describe(), "Ubuntu 24.04");
        let mint = parse("ID=linuxmint\nID_LIKE=\"ubuntu debian\"\n", "x").unwrap();
        assert_eq!(mint.family(), Some(Family::Ubuntu));
        let tw = parse(
            "ID=\"opensuse-tumbleweed\"\nID_LIKE=\"opensuse suse\"\n",
            "x",
        )
        .unwrap();
        assert_eq!(tw.family(), Some(Family::Suse));
        assert_eq!(parse("ID=plan9\n", "x").unwrap().family(), None);
        assert_eq!(parse("NAME=x\n", "x"), None);
    }

    #[test]
    fn a_line_reads_back_as_its_words() {
        let c = Command::new("sudo", &["apt", "install", "./dist/a b/*.deb"]);
        assert_eq!(c.line(), "sudo apt install './dist/a b/*.deb'");
        let c = Command::new("sudo", &["apt", "install", "./dist/amdgpu-6.14/*.deb"]);
        assert_eq!(c.line(), "sudo apt install ./dist/amdgpu-6.14/*.deb");
        assert_eq!(Command::new("echo", &["it's"]).line(), r"echo 'it'\''s'");
    }
}
