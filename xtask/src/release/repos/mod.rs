//! Package repositories made from published `dist/<recipe>/` folders
//! (`cargo xtask publish-repo`): an apt repository (`apt/`), an rpm
//! repository (`rpm/`) and a pacman repository (`pacman/`), signed with the
//! user's GnuPG key; the keyring package that sets a machine up for them;
//! signed source uploads (`upload/`); and the setup lines of each
//! distribution. Every input folder is checked against its `SHA256SUMS`
//! and manifest first; the files in `dist/` are never changed. The whole
//! folder is published the way `dist/` is (staging folder, `manifest.json`,
//! `SHA256SUMS` last, one rename), and its bytes are a function of the
//! inputs, the key, the URL and the suite: every signature and date is the
//! publication's time (the newest input's `SOURCE_DATE_EPOCH`, or the key's
//! creation when that is newer).

pub(crate) mod apt;
pub(crate) mod deb822;
pub(crate) mod gpg;
pub(crate) mod inputs;
pub mod keyring;
pub(crate) mod pacman;
pub(crate) mod read;
pub(crate) mod rpm_md;
pub(crate) mod setup;
pub(crate) mod sums;
pub(crate) mod uploads;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::formats::Format;
use crate::release::dist::{Output, Staging};
use crate::shared::diag::UsageError;
use crate::shared::report::Reporter;
use crate::shared::settings::Environment;
use inputs::{Input, InputRecord};

/// The repositories' name: apt's Origin and Label, the dnf repository id,
/// the pacman repository and keyring.
pub(crate) const NAME: &str = "rocm-patchkit";

/// The repository formats, by folder name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RepoFormat {
    Apt,
    Rpm,
    Pacman,
}

impl RepoFormat {
    pub(crate) const ALL: [RepoFormat; 3] = [RepoFormat::Apt, RepoFormat::Rpm, RepoFormat::Pacman];

    /// Its folder and its word on the command line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RepoFormat::Apt => "apt",
            RepoFormat::Rpm => "rpm",
            RepoFormat::Pacman => "pacman",
        }
    }

    /// The package format it serves.
    pub(crate) fn package_format(self) -> Format {
        match self {
            RepoFormat::Apt => Format::Deb,
            RepoFormat::Rpm => Format::Rpm,
            RepoFormat::Pacman => Format::Arch,
        }
    }
}

/// What a publication is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) dists: Vec<PathBuf>,
    pub(crate) to: PathBuf,
    /// Where `to` will be served (no trailing `/`).
    pub(crate) url: String,
    pub(crate) suite: String,
    pub(crate) formats: BTreeSet<RepoFormat>,
    /// The signing key, as gpg takes it; none: the one the GnuPG home has.
    pub(crate) key: Option<String>,
    pub(crate) gnupghome: Option<PathBuf>,
    /// `SOURCE_DATE_EPOCH` when set: the publication's time.
    pub(crate) epoch: Option<i64>,
    /// The project's `templates/` (the snippets are `templates/repos/`).
    pub(crate) templates: PathBuf,
    /// The machine's environment: `PATH` for gpg, rpmsign, createrepo_c.
    pub(crate) env: Environment,
}

/// Where the repositories live, as the files they hold say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Site {
    pub url: String,
    pub suite: String,
    pub fingerprint: String,
}

/// What a publication did.
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) out: PathBuf,
    pub(crate) site: Site,
    /// Packages listed per repository (the keyring package included).
    pub(crate) counts: BTreeMap<RepoFormat, usize>,
    /// The `.changes` written, relative to `upload/`.
    pub(crate) changes: Vec<String>,
    /// The setup lines of each distribution (also `setup.txt`).
    pub(crate) setup: String,
}

/// The repository's `manifest.json`.
#[derive(Serialize)]
struct RepoManifest<'a> {
    tool: crate::apply::state::ToolRef,
    kind: &'static str,
    site: &'a Site,
    time: i64,
    formats: &'a BTreeSet<RepoFormat>,
    inputs: Vec<&'a InputRecord>,
    uploads: &'a [String],
    outputs: BTreeMap<String, Output>,
}

/// Publishes the repositories `opts` asks for.
pub(crate) fn publish(opts: &Options, reporter: &Reporter) -> Result<Published> {
    let (url, suite) = (check_url(&opts.url)?, check_suite(&opts.suite)?);
    if opts.formats.is_empty() {
        bail!(UsageError(
            "--formats names no repository format".to_owned()
        ));
    }
    // Refused before any input is read (Staging::begin checks it again).
    crate::release::dist::check_replaceable(&opts.to)?;
    let inputs = read_inputs(&opts.dists)?;
    let signer = gpg::Signer::find(opts.gnupghome.as_deref(), opts.key.as_deref(), &opts.env)?;
    let newest = inputs
        .iter()
        .map(|i| i.record.source_date_epoch)
        .max()
        .unwrap_or(0);
    let signer = signer.at(opts.epoch.unwrap_or(newest));
    reporter.step(format!(
        "signing with {} ({}) at {}",
        signer.fingerprint,
        crate::shared::report::safe(&signer.uid),
        crate::formats::rfc2822(signer.time().max(0) as u64)
    ));
    let site = Site {
        url,
        suite,
        fingerprint: signer.fingerprint.clone(),
    };
    let snippets = keyring::snippets(&opts.templates, &site)?;
    let staging = Staging::begin(&opts.to)?;
    let made = write_all(
        staging.dir(),
        opts,
        &site,
        &inputs,
        &snippets,
        &signer,
        reporter,
    )?;
    let records: Vec<&InputRecord> = inputs.iter().map(|i| &i.record).collect();
    let out = staging.publish(|outputs| RepoManifest {
        tool: crate::apply::state::ToolRef::current(),
        kind: "repository",
        site: &site,
        time: signer.time(),
        formats: &opts.formats,
        inputs: records,
        uploads: &made.changes,
        outputs,
    })?;
    Ok(Published {
        out,
        site,
        counts: made.counts,
        changes: made.changes,
        setup: made.setup,
    })
}

/// What [`write_all`] made.
struct Made {
    counts: BTreeMap<RepoFormat, usize>,
    changes: Vec<String>,
    setup: String,
}

/// Every file of the publication, into the staging folder `dir`.
fn write_all(
    dir: &Path,
    opts: &Options,
    site: &Site,
    inputs: &[Input],
    snippets: &keyring::Snippets,
    signer: &gpg::Signer,
    reporter: &Reporter,
) -> Result<Made> {
    let key = keyring::Key {
        binary: signer.public_key(false)?,
        armored: signer.public_key(true)?,
    };
    sums::write(&dir.join(format!("{}.gpg", keyring::NAME)), &key.binary)?;
    sums::write(&dir.join(format!("{}.asc", keyring::NAME)), &key.armored)?;
    let scratch =
        tempfile::tempdir().context("creating a scratch folder for the keyring package")?;
    let keyrings = keyring::write(scratch.path(), site, &key, snippets, signer)?;
    let mut counts = BTreeMap::new();
    let mut located = BTreeMap::new();
    for format in &opts.formats {
        let mut packages: Vec<PathBuf> = inputs
            .iter()
            .flat_map(|i| match format {
                RepoFormat::Apt => &i.debs,
                RepoFormat::Rpm => &i.rpms,
                RepoFormat::Pacman => &i.arch,
            })
            .cloned()
            .collect();
        packages.push(keyrings[&format.package_format()].clone());
        let packages = inputs::unique_by_name(&packages)?;
        let folder = dir.join(format.as_str());
        let keyring_name = keyring_file(&keyrings, *format);
        let at = match format {
            RepoFormat::Apt => apt::write(&folder, &packages, site, signer)?
                .remove(&keyring_name)
                .context("the keyring .deb is not in the pool")?,
            RepoFormat::Rpm => {
                rpm_md::write(&folder, &packages, signer)?;
                sums::write(
                    &folder.join(format!("{NAME}.repo")),
                    &snippets[keyring::DNF_REPO_TEMPLATE],
                )?;
                keyring_name
            }
            RepoFormat::Pacman => {
                pacman::write(&folder, NAME, &packages, signer)?;
                sums::write(
                    &folder.join(format!("{NAME}.conf")),
                    &snippets[keyring::PACMAN_CONF_TEMPLATE],
                )?;
                keyring_name
            }
        };
        reporter.step(format!("{}: {} packages", format.as_str(), packages.len()));
        counts.insert(*format, packages.len());
        located.insert(*format, format!("{}/{at}", format.as_str()));
    }
    let dscs: Vec<PathBuf> = inputs.iter().flat_map(|i| i.dscs.clone()).collect();
    let srpms: Vec<PathBuf> = inputs.iter().flat_map(|i| i.srpms.clone()).collect();
    let changes = uploads::write(
        &dir.join("upload"),
        &inputs::unique_by_name(&dscs)?,
        &inputs::unique_by_name(&srpms)?,
        signer,
    )?;
    let setup = setup::text(site, &located);
    sums::write(&dir.join("setup.txt"), &setup)?;
    Ok(Made {
        counts,
        changes,
        setup,
    })
}

fn keyring_file(keyrings: &BTreeMap<Format, PathBuf>, format: RepoFormat) -> String {
    keyrings[&format.package_format()]
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// Every dist folder, checked, each once.
fn read_inputs(dists: &[PathBuf]) -> Result<Vec<Input>> {
    let mut seen = BTreeSet::new();
    let mut inputs = Vec::new();
    for dir in dists {
        let canonical = dir
            .canonicalize()
            .with_context(|| format!("{} cannot be read", dir.display()))?;
        if seen.insert(canonical) {
            inputs.push(inputs::read(dir)?);
        }
    }
    if inputs.is_empty() {
        bail!(UsageError(
            "name at least one published dist/<recipe>/ folder".to_owned()
        ));
    }
    Ok(inputs)
}

/// The URL the folder will be served from, without its trailing `/`.
pub(crate) fn check_url(url: &str) -> Result<String> {
    let parsed = url::Url::parse(url).map_err(|e| {
        UsageError(format!(
            "--url `{}` is not a URL ({e}): give where the folder will be served, such as \
             https://example.org/rocm-patchkit",
            crate::shared::report::safe(url)
        ))
    })?;
    let text = url.trim_end_matches('/');
    let plain = text
        .chars()
        .all(|c| c.is_ascii_graphic() && !matches!(c, '\'' | '"' | '\\' | '`' | '$'));
    if !matches!(parsed.scheme(), "https" | "http" | "file")
        || !plain
        || parsed.query().is_some()
        || parsed.fragment().is_some()
    {
        bail!(UsageError(format!(
            "--url `{}` must be an https, http or file URL of printable characters without \
             quotes, `$`, a query or a fragment (it goes into apt, dnf and pacman files)",
            crate::shared::report::safe(url)
        )));
    }
    Ok(text.to_owned())
}

/// An apt suite name: letters, digits, `.`, `-`, `_`.
pub(crate) fn check_suite(suite: &str) -> Result<String> {
    let ok = !suite.is_empty()
        && suite
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !ok {
        bail!(UsageError(format!(
            "--suite `{}` must be letters, digits, `.`, `-` or `_` (stable, bookworm, ...)",
            crate::shared::report::safe(suite)
        )));
    }
    Ok(suite.to_owned())
}
