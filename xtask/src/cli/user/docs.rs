//! The user command's man pages and shell completions, rendered from its
//! clap definition (clap_mangen, clap_complete): what the wheel and the
//! tarball ship in `share/`, kept in the repository's `wheel/data/data/` (a test
//! holds them to the CLI and renders them again when they differ).

use clap::CommandFactory;

use super::Cli;

/// The shells completions are made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    pub const ALL: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

    /// Where the shell looks for it below a prefix (`/usr`, a venv).
    pub fn path(self) -> &'static str {
        match self {
            Shell::Bash => "share/bash-completion/completions/rocm-patchkit",
            Shell::Zsh => "share/zsh/site-functions/_rocm-patchkit",
            Shell::Fish => "share/fish/vendor_completions.d/rocm-patchkit.fish",
        }
    }
}

/// The completion script for `shell`.
pub(crate) fn completion(shell: Shell) -> String {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    let name = cmd.get_name().to_owned();
    match shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, name, &mut out)
        }
        Shell::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, name, &mut out),
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, name, &mut out)
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The man pages, `(path below the prefix, roff text)`: `rocm-patchkit.1`
/// and one `rocm-patchkit-<command>.1` per command, as git has them.
pub fn man_pages() -> Vec<(String, String)> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut pages = vec![("share/man/man1/rocm-patchkit.1".to_owned(), render(&cmd))];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("rocm-patchkit-{}", sub.get_name());
        let page = sub.clone().name(name.clone()).bin_name(name.clone());
        pages.push((format!("share/man/man1/{name}.1"), render(&page)));
    }
    pages
}

fn render(cmd: &clap::Command) -> String {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .expect("rendering a man page into memory");
    String::from_utf8_lossy(&out).into_owned()
}

/// Every file of the wheel's and the tarball's `share/`: man pages and
/// completions, `(path below the prefix, text)`, sorted.
pub fn share_files() -> Vec<(String, String)> {
    let mut files = man_pages();
    files.extend(Shell::ALL.map(|s| (s.path().to_owned(), completion(s))));
    files.sort();
    files
}
