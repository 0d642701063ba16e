//! A binary package (`[source] deb = "..."`) into the verified cache, pinned
//! by its sha256: from the cache when it is there, else from the recipe's
//! `local` file or `url`, else through apt by name, version and
//! architecture. apt runs as a process with sources derived from the
//! machine's own (`/etc/apt/sources.list.d/debian.sources`: the same
//! archive, every suite apt may hold the version in) and with state folders
//! of its own in the cache, so the machine's apt state stays as it was; no
//! archive host is written here.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::net::Net;
use super::tally::FetchTally;
use super::{local, FetchedSource};
use crate::fetch::cache::Cache;
use crate::input::recipe::{DebSource, Recipe};
use crate::shared::hash::sha256_file;
use crate::shared::report::{human_size, Reporter};

/// The machine's apt sources the derived ones copy their archive from;
/// `PATCHKIT_APT_SOURCES` names another file (deb822, as Debian 12 writes it).
pub(crate) use crate::shared::settings::APT_SOURCES_ENV as SOURCES_ENV;
const MACHINE_SOURCES: &str = "/etc/apt/sources.list.d/debian.sources";
/// The suites the derived sources add to the machine's own: where a version
/// newer than the machine's release is published.
const EXTRA_SUITES: &str = "sid experimental";

/// The `.deb` of `deb`, verified against its pin.
pub(super) fn fetch(
    cache: &Cache,
    net: &mut Net,
    reporter: &Reporter,
    recipe: &Recipe,
    deb: &DebSource,
    tally: &mut FetchTally,
) -> Result<FetchedSource> {
    let key = || {
        format!(
            "`source.sha256` of {}",
            crate::shared::diag::display_path(&recipe.path).display()
        )
    };
    let name = deb.file_name();
    if let Some(path) = cache.verified_blob(&deb.sha256, reporter)? {
        tally.cached += 1;
        reporter.step(format!("source: {name}: cached, verified"));
        return Ok(archive(path, &deb.sha256));
    }
    if let Some(path) = &deb.local {
        local::verify(
            path,
            Some(&deb.sha256),
            Some(&cache.root().join("local-sha256")),
        )
        .with_context(|| format!("{} does not match the .deb", key()))?;
        tally.local += 1;
        reporter.step(format!("source: {name}: local file verified"));
        return Ok(archive(path.clone(), &deb.sha256));
    }
    if let Some(url) = &deb.url {
        let got = net
            .http()?
            .download(cache, url, Some(&deb.sha256), reporter)
            .with_context(|| format!("{} does not match the .deb at {url}", key()))?;
        tally.downloaded += 1;
        tally.bytes += got.bytes;
        reporter.step(format!(
            "source: {url}: downloaded {}, verified",
            human_size(got.bytes)
        ));
        return Ok(archive(got.path, &deb.sha256));
    }
    net.apt()?;
    let sources = net.settings().apt_sources.clone();
    let path = apt_download(cache, reporter, deb, sources).with_context(|| {
        format!(
            "fetching {name} through apt; where apt is not, give `url` or `local` in `[source]` of {}",
            crate::shared::diag::display_path(&recipe.path).display()
        )
    })?;
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let tmp = tempfile::TempPath::try_from_path(path)?;
    let actual = sha256_file(&tmp)?;
    if actual != deb.sha256 {
        bail!(
            "{}: apt gave {name} with sha256 {actual}, not the pinned {}; nothing entered the \
             cache. If the archive rebuilt the package, check why before updating the pin",
            key(),
            deb.sha256
        );
    }
    let dest = cache.blob_path(&deb.sha256);
    std::fs::rename(&tmp, &dest)
        .with_context(|| format!("moving {} into {}", tmp.display(), dest.display()))?;
    tally.downloaded += 1;
    tally.bytes += bytes;
    reporter.step(format!(
        "source: {name}: downloaded through apt {}, verified",
        human_size(bytes)
    ));
    Ok(archive(dest, &deb.sha256))
}

fn archive(path: PathBuf, sha256: &str) -> FetchedSource {
    FetchedSource::Archive {
        path,
        sha256: sha256.to_owned(),
    }
}

/// `apt-get update` with the derived sources and private state, then
/// `apt-get download`, into a fresh folder of the cache's `tmp/`; returns
/// the downloaded file (unverified).
fn apt_download(
    cache: &Cache,
    reporter: &Reporter,
    deb: &DebSource,
    sources: Option<PathBuf>,
) -> Result<PathBuf> {
    let state = cache.root().join("apt");
    for dir in ["sources.list.d", "lists/partial", "cache/archives/partial"] {
        let dir = state.join(dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let machine = sources.unwrap_or_else(|| PathBuf::from(MACHINE_SOURCES));
    let text = std::fs::read_to_string(&machine).with_context(|| {
        format!(
            "reading {} (the machine's apt sources, which the derived ones copy; \
             {SOURCES_ENV} names another deb822 file)",
            machine.display()
        )
    })?;
    let derived = derive_sources(&text)
        .with_context(|| format!("deriving apt sources from {}", machine.display()))?;
    let sources = state.join("sources.list.d/patchkit.sources");
    std::fs::write(&sources, derived).with_context(|| format!("writing {}", sources.display()))?;
    let opts = |cmd: &mut Command| {
        cmd.arg("-q")
            .arg("-o")
            .arg("Dir::Etc::sourcelist=/dev/null")
            .arg("-o")
            .arg(format!(
                "Dir::Etc::sourceparts={}",
                state.join("sources.list.d").display()
            ))
            .arg("-o")
            .arg(format!(
                "Dir::State::Lists={}",
                state.join("lists").display()
            ))
            .arg("-o")
            .arg(format!("Dir::Cache={}", state.join("cache").display()))
            .arg("-o")
            .arg(format!("APT::Architectures={}", deb.arch))
            .arg("-o")
            .arg("APT::Sandbox::User=root");
    };
    reporter.step(format!(
        "source: apt-get update (sources derived from {})",
        machine.display()
    ));
    let mut update = Command::new("apt-get");
    opts(&mut update);
    update.arg("update");
    run(&mut update, "apt-get update")?;
    let folder = tempfile::Builder::new()
        .prefix("apt-")
        .tempdir_in(cache.tmp_dir())
        .with_context(|| format!("creating a folder in {}", cache.tmp_dir().display()))?;
    let want = format!("{}:{}={}", deb.package, deb.arch, deb.version);
    reporter.step(format!("source: apt-get download {want}"));
    let mut download = Command::new("apt-get");
    opts(&mut download);
    download
        .arg("download")
        .arg(&want)
        .current_dir(folder.path());
    run(&mut download, &format!("apt-get download {want}"))?;
    let got = folder.path().join(deb.file_name());
    if !got.is_file() {
        bail!(
            "apt-get download {want} left no {} in {}",
            deb.file_name(),
            folder.path().display()
        );
    }
    let dest = cache
        .tmp_dir()
        .join(format!("apt-{}-{}", std::process::id(), deb.file_name()));
    std::fs::rename(&got, &dest)
        .with_context(|| format!("moving {} to {}", got.display(), dest.display()))?;
    Ok(dest)
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(6).collect();
        bail!(
            "{what} failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    Ok(())
}

/// The machine's deb822 stanzas of binary packages, and one more with the
/// first archive that is not a security archive, for [`EXTRA_SUITES`].
pub(crate) fn derive_sources(machine: &str) -> Result<String> {
    let mut out = String::new();
    let mut extra: Option<(String, String)> = None;
    for stanza in machine
        .split("\n\n")
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        };
        if !field("Types").is_some_and(|t| t.split_whitespace().any(|t| t == "deb")) {
            continue;
        }
        if field("Enabled").is_some_and(|e| e == "no") {
            continue;
        }
        let uris = field("URIs").unwrap_or_default();
        out.push_str("Types: deb\n");
        for line in stanza.lines().filter(|l| !l.starts_with("Types:")) {
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        let uri = uris
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        if extra.is_none() && !uri.is_empty() && !uri.contains("security") {
            let keyring = field("Signed-By")
                .filter(|k| k.starts_with('/'))
                .unwrap_or_else(|| "/usr/share/keyrings/debian-archive-keyring.gpg".to_owned());
            extra = Some((uri, keyring));
        }
    }
    let Some((uri, keyring)) = extra else {
        bail!("it names no archive of binary packages (a `Types: deb` stanza with `URIs`)");
    };
    out.push_str(&format!(
        "Types: deb\nURIs: {uri}\nSuites: {EXTRA_SUITES}\nComponents: main\nSigned-By: {keyring}\n"
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_sources_keep_the_machine_stanzas_and_add_sid() {
        let machine = "Types: deb deb-src\nURIs: http://archive.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://archive.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n";
        let got = derive_sources(machine).unwrap();
        assert!(got.contains("Suites: bookworm bookworm-updates"), "{got}");
        assert!(
            got.contains("URIs: http://archive.invalid/debian\nSuites: sid experimental"),
            "{got}"
        );
        assert!(!got.contains("deb-src"), "{got}");
        assert!(derive_sources("Types: deb-src\nURIs: x\n").is_err());
    }
}
