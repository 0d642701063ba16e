//! The settings read from the environment: every `PATCHKIT_*` variable
//! (docs/settings.md lists them) parsed here, once, by one parser with one
//! reaction to a bad value (an error naming the variable and what it
//! accepts), into a [`Settings`] that `main` puts in the `Workspace` and
//! that is passed down from there. The rest of the environment (`HOME`,
//! `PATH`, ROCm's and comgr's variables: input about the machine, not
//! settings) is kept as it was when the command started, an
//! [`Environment`] inside the settings. No other module reads the
//! environment.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::shared::diag::UsageError;

/// Moves the content-addressed cache (after `--cache-dir`).
pub const CACHE_ENV: &str = "PATCHKIT_CACHE_DIR";
/// Points the tool at another project root.
pub const ROOT_ENV: &str = "PATCHKIT_ROOT";
/// The nfpm binary the bench compares with.
pub(crate) const NFPM_ENV: &str = "PATCHKIT_NFPM";
/// The cap of a git fetch of every branch and tag.
pub(crate) const GIT_MAX_BYTES_ENV: &str = "PATCHKIT_GIT_MAX_BYTES";
/// The deb822 sources file the apt fetch derives its sources from.
pub(crate) const APT_SOURCES_ENV: &str = "PATCHKIT_APT_SOURCES";

/// Every setting, parsed.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `PATCHKIT_ROOT`: the project root, when not the checkout's.
    pub(crate) root: Option<PathBuf>,
    /// `PATCHKIT_CACHE_DIR`: the cache, when no `--cache-dir` is given.
    pub(crate) cache_dir: Option<PathBuf>,
    /// The `PATCHKIT_HTTP_*` limits of the HTTP client.
    pub(crate) http: HttpConfig,
    /// `PATCHKIT_GIT_MAX_BYTES`: the most a fetch of every branch and tag
    /// may receive unless `--allow-full-fetch`, default 256 MiB.
    pub(crate) git_max_bytes: u64,
    /// `PATCHKIT_EXTRACT_MAX_BYTES` and `_FILES`: how much one extraction
    /// may write.
    pub extract: Limits,
    /// `PATCHKIT_APT_SOURCES`: the machine's apt sources, when not Debian's
    /// usual file.
    pub(crate) apt_sources: Option<PathBuf>,
    /// `PATCHKIT_NFPM`: the nfpm binary the bench compares with, when not
    /// the one on `PATH`.
    pub nfpm: Option<PathBuf>,
    /// The whole environment as the command started: the machine's
    /// variables doctor, the toolchain and the in-place rewrite read.
    pub env: Environment,
}

impl Default for Settings {
    /// Every setting at its default, as with an empty environment.
    fn default() -> Settings {
        Settings::read(|_| None).expect("the defaults parse")
    }
}

impl Settings {
    /// The settings of `env` (the process's, read once), which they keep;
    /// a bad value is invalid input (exit status 2), named with what it
    /// accepts.
    pub(crate) fn of(env: Environment) -> Result<Settings> {
        let mut settings = Settings::read(|name| env.get(name).map(OsStr::to_owned))
            .map_err(|err| anyhow::Error::new(UsageError(format!("{err:#}"))))?;
        settings.env = env;
        Ok(settings)
    }

    /// The settings of an environment given by `get` (a variable's value,
    /// `None` when unset); an empty value is an unset one.
    pub(crate) fn read(get: impl Fn(&str) -> Option<OsString>) -> Result<Settings> {
        let env = Vars(&get);
        let ms =
            |name, default| Ok::<_, anyhow::Error>(Duration::from_millis(env.num(name, default)?));
        let http = HttpConfig {
            connect_timeout: ms("PATCHKIT_HTTP_CONNECT_TIMEOUT_MS", 15_000)?,
            read_timeout: ms("PATCHKIT_HTTP_READ_TIMEOUT_MS", 30_000)?,
            attempts: env.num("PATCHKIT_HTTP_ATTEMPTS", 4)?.clamp(1, 20) as u32,
            backoff: ms("PATCHKIT_HTTP_RETRY_BASE_MS", 500)?,
            max_bytes: env.num("PATCHKIT_HTTP_MAX_BYTES", 4 << 30)?,
            deadline: ms("PATCHKIT_HTTP_DEADLINE_MS", 3_600_000)?,
            min_rate: env.num("PATCHKIT_HTTP_MIN_RATE", 1024)?,
            max_redirects: 10,
        };
        Ok(Settings {
            root: env.path(ROOT_ENV)?,
            cache_dir: env.path(CACHE_ENV)?,
            http,
            git_max_bytes: env.num(GIT_MAX_BYTES_ENV, 256 << 20)?,
            extract: Limits {
                bytes: env.size(MAX_BYTES_ENV, Limits::DEFAULT.bytes)?,
                files: env.size(MAX_FILES_ENV, Limits::DEFAULT.files)?,
            },
            apt_sources: env.path(APT_SOURCES_ENV)?,
            nfpm: env.path(NFPM_ENV)?,
            env: Environment::default(),
        })
    }
}

/// Limits of the HTTP client; each can be moved by an environment variable
/// (tests use them to stay fast), read here.
#[derive(Debug, Clone)]
pub(crate) struct HttpConfig {
    /// `PATCHKIT_HTTP_CONNECT_TIMEOUT_MS`, default 15 s.
    pub(crate) connect_timeout: Duration,
    /// `PATCHKIT_HTTP_READ_TIMEOUT_MS`, default 30 s: the longest wait for
    /// the response headers or for the next piece of the body.
    pub(crate) read_timeout: Duration,
    /// `PATCHKIT_HTTP_ATTEMPTS`, default 4.
    pub(crate) attempts: u32,
    /// `PATCHKIT_HTTP_RETRY_BASE_MS`, default 500 ms, doubled at each retry.
    pub(crate) backoff: Duration,
    /// `PATCHKIT_HTTP_MAX_BYTES`, default 4 GiB.
    pub(crate) max_bytes: u64,
    /// `PATCHKIT_HTTP_DEADLINE_MS`, default 1 hour: the longest one
    /// download may take, retries and their waits included.
    pub(crate) deadline: Duration,
    /// `PATCHKIT_HTTP_MIN_RATE` (bytes per second), default 1024, 0 for
    /// none: a body that brings less over a whole read timeout is dropped
    /// (and retried), so a server that trickles a byte now and then cannot
    /// hold a fetch.
    pub(crate) min_rate: u64,
    /// Redirects followed at most, default 10.
    pub(crate) max_redirects: usize,
}

/// Environment variable that raises the limit of bytes one extraction writes.
pub const MAX_BYTES_ENV: &str = "PATCHKIT_EXTRACT_MAX_BYTES";
/// Environment variable that raises the limit of entries one extraction writes.
pub const MAX_FILES_ENV: &str = "PATCHKIT_EXTRACT_MAX_FILES";

/// How much one extraction may write: the whole Linux source is about
/// 1.5 GiB in 90 000 files, so the defaults (3 GiB, a million files) leave
/// room and stop a bomb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub(crate) bytes: u64,
    pub(crate) files: u64,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        bytes: 3 << 30,
        files: 1_000_000,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// The process's environment variables, read once when the command starts
/// and passed down: what the machine says (`HOME`, `PATH`, `ROCM_PATH`...),
/// every name and value kept as bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment(BTreeMap<OsString, OsString>);

impl Environment {
    /// This process's environment, now.
    pub(crate) fn of_process() -> Environment {
        Environment(std::env::vars_os().collect())
    }

    #[cfg(test)]
    /// An environment of these variables alone (unit tests).
    pub(crate) fn of<K: Into<OsString>, V: Into<OsString>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Environment {
        Environment(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// The value of `name`, when set (perhaps empty).
    pub(crate) fn get(&self, name: &str) -> Option<&OsStr> {
        self.0.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// The value of `name`, when set and not empty.
    pub(crate) fn non_empty(&self, name: &str) -> Option<&OsStr> {
        self.get(name).filter(|v| !v.is_empty())
    }

    /// The value of `name` as a path, when set and not empty.
    pub(crate) fn path(&self, name: &str) -> Option<PathBuf> {
        self.non_empty(name).map(PathBuf::from)
    }

    /// Every variable, in name order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.0.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The first executable file `program` names in a folder of `PATH`.
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        std::env::split_paths(self.get("PATH")?)
            .map(|dir| dir.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }
}

/// The one parser: a variable's text, or its default when unset or empty.
struct Vars<'a, F: Fn(&str) -> Option<OsString>>(&'a F);

impl<F: Fn(&str) -> Option<OsString>> Vars<'_, F> {
    /// The value of `name`, trimmed; `None` when unset or empty.
    fn text(&self, name: &str) -> Result<Option<String>> {
        let Some(value) = (self.0)(name).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        match value.into_string() {
            Ok(text) if text.trim().is_empty() => Ok(None),
            Ok(text) => Ok(Some(text.trim().to_owned())),
            Err(raw) => bail!("{name}={raw:?} is not UTF-8 text"),
        }
    }

    /// A whole number (such as 4096).
    fn num(&self, name: &str, default: u64) -> Result<u64> {
        match self.text(name)? {
            Some(text) => text
                .parse()
                .map_err(|_| accepts(name, &text, "a whole number (such as 4096)")),
            None => Ok(default),
        }
    }

    /// A number with an optional K, M or G suffix (such as 512M).
    fn size(&self, name: &str, default: u64) -> Result<u64> {
        match self.text(name)? {
            Some(text) => parse_size(&text)
                .ok_or_else(|| accepts(name, &text, "a number (such as 4096, 512M or 16G)")),
            None => Ok(default),
        }
    }

    /// A path, as given.
    fn path(&self, name: &str) -> Result<Option<PathBuf>> {
        Ok((self.0)(name).filter(|v| !v.is_empty()).map(PathBuf::from))
    }
}

/// The one reaction to a bad value.
fn accepts(name: &str, text: &str, what: &str) -> anyhow::Error {
    anyhow::anyhow!("{name}={text:?} is not {what}; set it to one, or unset it for the default")
}

/// `4096`, `512M`, `16G`: bytes, with an optional binary suffix.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Settings> {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Settings::read(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn the_default_limits_stop_the_bomb_of_issue_15() {
        // A 3 MB archive wrote 3.1 GiB; the whole Linux source is 1.5 GiB.
        const {
            assert!(Limits::DEFAULT.bytes < 3_100 << 20);
            assert!(Limits::DEFAULT.bytes > 2 * (1_486 << 20));
        }
    }

    #[test]
    fn sizes_read_with_their_suffixes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("16G"), Some(16 << 30));
        assert_eq!(parse_size("lots"), None);
    }

    #[test]
    fn unset_and_empty_are_the_defaults() {
        let s = read(&[("PATCHKIT_HTTP_ATTEMPTS", ""), ("PATCHKIT_ROOT", "")]).unwrap();
        assert_eq!(s.http.attempts, 4);
        assert_eq!(s.root, None);
        assert_eq!(s.extract, Limits::DEFAULT);
        assert_eq!(s.git_max_bytes, 256 << 20);
    }

    #[test]
    fn the_environment_is_kept_as_read_and_finds_programs_on_its_path() {
        use std::os::unix::fs::PermissionsExt;
        let bin = tempfile::tempdir().unwrap();
        let tool = bin.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::write(bin.path().join("data"), "").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", bin.path().display());
        let env = Environment::of([("PATH", path.as_str()), ("EMPTY", ""), ("CI", "true")]);
        assert_eq!(env.which("tool"), Some(tool));
        assert_eq!(env.which("data"), None, "not executable");
        assert_eq!(env.which("missing"), None);
        assert_eq!(Environment::default().which("sh"), None, "no PATH, nothing");
        assert_eq!(env.get("EMPTY"), Some(OsStr::new("")));
        assert_eq!(env.non_empty("EMPTY"), None);
        let settings = Settings::of(env.clone()).unwrap();
        assert_eq!(settings.env, env);
        let bad = Environment::of([(GIT_MAX_BYTES_ENV, "lots")]);
        let err = format!("{:#}", Settings::of(bad).unwrap_err());
        assert!(
            err.starts_with("PATCHKIT_GIT_MAX_BYTES=\"lots\" is not"),
            "{err}"
        );
    }

    #[test]
    fn values_are_read_and_a_bad_one_is_named_with_what_it_accepts() {
        let s = read(&[
            ("PATCHKIT_HTTP_RETRY_BASE_MS", " 10 "),
            (MAX_BYTES_ENV, "64M"),
        ])
        .unwrap();
        assert_eq!(s.http.backoff, Duration::from_millis(10));
        assert_eq!(s.extract.bytes, 64 << 20);
        let err = read(&[("PATCHKIT_HTTP_ATTEMPTS", "many")])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("PATCHKIT_HTTP_ATTEMPTS=\"many\" is not a whole number"),
            "{err}"
        );
        let err = read(&[(MAX_FILES_ENV, "1x")]).unwrap_err().to_string();
        assert!(
            err.contains("PATCHKIT_EXTRACT_MAX_FILES=\"1x\" is not a number (such as"),
            "{err}"
        );
    }
}
