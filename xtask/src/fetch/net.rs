//! The network of one fetch ([`Net`]): HTTP, git and apt, each refused
//! `--offline`, the HTTP client built on first use.

use anyhow::Result;

use super::git::{self, GitFetched};
use super::http::Http;
use crate::fetch::cache::Cache;
use crate::shared::report::Reporter;
use crate::shared::settings::Settings;

/// The network, brought up on first use so that a run that finds everything
/// in the cache (and every `--offline` run) opens no socket.
pub(crate) struct Net {
    offline: bool,
    http: Option<Http>,
    settings: Settings,
    /// The cap on a git fetch of every branch and tag (`None`: none).
    pub(crate) full_fetch_cap: Option<u64>,
}

impl Net {
    pub(crate) fn new(offline: bool, settings: &Settings) -> Net {
        Net {
            offline,
            http: None,
            full_fetch_cap: git::full_fetch_cap(false, settings.git_max_bytes),
            settings: settings.clone(),
        }
    }

    /// The settings this fetch runs with.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn http(&mut self) -> Result<&Http> {
        anyhow::ensure!(
            !self.offline,
            "the network is needed but --offline was given"
        );
        if self.http.is_none() {
            self.http = Some(Http::new(self.settings.http.clone())?);
        }
        Ok(self.http.as_ref().expect("built above"))
    }

    /// apt, which `fetch/deb.rs` runs as a process: refused offline and
    /// where there is none.
    pub(crate) fn apt(&self) -> Result<()> {
        anyhow::ensure!(
            !self.offline,
            "the network is needed but --offline was given"
        );
        anyhow::ensure!(apt_available(), "apt-get is not on this machine");
        Ok(())
    }

    pub(crate) fn git(&self) -> Result<()> {
        anyhow::ensure!(
            !self.offline,
            "the network is needed but --offline was given"
        );
        Ok(())
    }

    /// The commit `reference` (HEAD when none) of the git repository at
    /// `url` names now: what both `fetch --allow-unpinned` and `lock` take.
    pub(crate) fn resolve_ref(
        &self,
        url: &str,
        reference: Option<&str>,
        reporter: &Reporter,
    ) -> Result<String> {
        self.git()?;
        reporter.step(format!(
            "source: resolving `{}` of {url}",
            reference.unwrap_or("HEAD")
        ));
        git::resolve_ref(url, reference)
    }

    /// A git source matched to a commit, and that commit brought into the
    /// cache: the pinned `commit`, or where `reference` (HEAD when none)
    /// points now when there is no pin, or (`follow_ref`, as `lock` does)
    /// whenever a `ref` is named.
    pub(crate) fn git_source(
        &self,
        cache: &Cache,
        url: &str,
        commit: Option<&str>,
        reference: Option<&str>,
        follow_ref: bool,
        reporter: &Reporter,
    ) -> Result<(String, GitFetched)> {
        let commit = match commit {
            Some(c) if !(follow_ref && reference.is_some()) => c.to_owned(),
            _ => self.resolve_ref(url, reference, reporter)?,
        };
        let got = self.ensure_commit(cache, url, &commit, 1, reporter)?;
        Ok((commit, got))
    }

    /// [`git::ensure_commit`] within this run's full-fetch cap; the network
    /// asked for only when the cache lacks the commit.
    pub(crate) fn ensure_commit(
        &self,
        cache: &Cache,
        url: &str,
        commit: &str,
        depth: i32,
        reporter: &Reporter,
    ) -> Result<GitFetched> {
        if !git::has_commit(cache, url, commit) {
            self.git()?;
        }
        git::ensure_commit(cache, url, commit, depth, self.full_fetch_cap, reporter)
    }
}

/// Whether apt can be run here.
fn apt_available() -> bool {
    std::process::Command::new("apt-get")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}
