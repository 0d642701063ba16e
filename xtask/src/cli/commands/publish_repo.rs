//! `cargo xtask publish-repo DIST... --to DIR --url URL`: signed apt, rpm
//! and pacman repositories, the keyring package and signed uploads from
//! published dist folders (`repos::publish`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::Result;

use crate::input::workspace::Workspace;
use crate::release::repos::{self, Options, RepoFormat};

/// Publish dist/ folders as signed apt, rpm and pacman repositories
///
/// Every DIST (a dist/<recipe>/ folder a build published) is first checked
/// against its SHA256SUMS and manifest.json. DIR then holds, signed with
/// your GnuPG key (--key, from --gnupghome or GNUPGHOME):
///
///   apt/      dists/<suite>/{Release,InRelease,Release.gpg}, main/binary-*/Packages{,.xz}, pool/
///   rpm/      the .rpm files signed (rpmsign), repodata/ (createrepo_c) and repomd.xml.asc
///   pacman/   rocm-patchkit.db{,.tar.gz} and .files, every package and database with its .sig
///   upload/   debian/: each .dsc clear-signed with its signed _source.changes (for dput);
///             rpm/: the .src.rpm files signed
///   rocm-patchkit-archive-keyring.{gpg,asc}, setup.txt, manifest.json, SHA256SUMS
///
/// Each repository carries the keyring package (rocm-patchkit-archive-keyring:
/// the key and the package manager's source for URL); the setup lines printed
/// at the end install it. The files in dist/ are never changed (the signed
/// ones are copies). DIR is replaced atomically, and only when it is new,
/// empty or an earlier publication. The same inputs, key, URL and suite give
/// the same bytes: every date and signature carries one time, the newest
/// input's SOURCE_DATE_EPOCH (or SOURCE_DATE_EPOCH when set), or the key's
/// creation when that is newer. Needs gpg, and rpmsign and createrepo_c for
/// the rpm repository.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Published dist/<recipe>/ folders
    #[arg(required = true, value_name = "DIST")]
    pub(crate) dists: Vec<PathBuf>,
    /// The folder to publish into
    #[arg(long, value_name = "DIR")]
    pub(crate) to: PathBuf,
    /// Where DIR will be served from, e.g. https://example.org/rocm-patchkit
    #[arg(long)]
    pub(crate) url: String,
    /// The signing key (fingerprint, key id or user id) [default: the one
    /// secret signing key of the GnuPG home]
    #[arg(long, value_name = "KEY")]
    pub(crate) key: Option<String>,
    /// The GnuPG home holding the key [default: $GNUPGHOME, else ~/.gnupg]
    #[arg(long, value_name = "DIR")]
    pub(crate) gnupghome: Option<PathBuf>,
    /// The apt suite (and codename)
    #[arg(long, default_value = "stable")]
    pub(crate) suite: String,
    /// The repositories to write, comma-separated
    #[arg(long, value_delimiter = ',', value_parser = parse_format, value_name = "apt,rpm,pacman",
          default_value = "apt,rpm,pacman")]
    pub(crate) formats: Vec<RepoFormat>,
}

fn parse_format(text: &str) -> Result<RepoFormat, String> {
    RepoFormat::ALL
        .into_iter()
        .find(|f| f.as_str() == text)
        .ok_or_else(|| format!("`{text}` is not one of apt, rpm, pacman"))
}

pub(crate) fn run(ws: &Workspace, args: &Args) -> Result<()> {
    let epoch = crate::input::target::epoch_of(&ws.settings.env)?;
    let opts = Options {
        dists: args.dists.clone(),
        to: args.to.clone(),
        url: args.url.clone(),
        suite: args.suite.clone(),
        formats: args.formats.iter().copied().collect::<BTreeSet<_>>(),
        key: args.key.clone(),
        gnupghome: args
            .gnupghome
            .clone()
            .or_else(|| ws.settings.env.get("GNUPGHOME").map(PathBuf::from)),
        epoch,
        templates: ws.root.join("templates"),
        env: ws.settings.env.clone(),
    };
    let published = repos::publish(&opts, &ws.reporter)?;
    let counts: Vec<String> = published
        .counts
        .iter()
        .map(|(format, n)| format!("{} {n}", format.as_str()))
        .collect();
    crate::outln!(
        "published {} ({}; {} upload(s)) signed with {}; check it with `cargo xtask verify {}`",
        crate::shared::diag::display_path(&published.out).display(),
        counts.join(", "),
        published.changes.len(),
        published.site.fingerprint,
        crate::shared::diag::display_path(&published.out).display()
    );
    crate::shared::report::out("\n");
    crate::shared::report::out(&published.setup);
    Ok(())
}
