//! A git commit's tree, or the paths of it a recipe names, written into
//! the [`Sink`] from the repository's objects (git2); submodules skipped
//! with a warning.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::sink::{entry_path, Sink};
use super::Limits;
use crate::apply::state::TreeListing;
use crate::shared::report::Reporter;

/// Writes the tree of `commit` in the repository `repo`, limited to
/// `paths`, at most `limits`.
pub fn git(
    repo: &Path,
    commit: &str,
    paths: &[String],
    dest: &Path,
    limits: Limits,
    reporter: &Reporter,
) -> Result<TreeListing> {
    let context = || format!("extracting commit {commit} of {}", repo.display());
    let repository = git2::Repository::open(repo).with_context(context)?;
    let oid = git2::Oid::from_str(commit).with_context(context)?;
    let tree = repository
        .find_commit(oid)
        .and_then(|c| c.tree())
        .with_context(|| format!("commit {commit} is not in {}", repo.display()))?;
    let mut sink = Sink::new(dest, limits);
    let roots: Vec<String> = if paths.is_empty() {
        vec![String::new()]
    } else {
        paths.to_vec()
    };
    for root in roots {
        let root = root.trim_matches('/').to_owned();
        if root.is_empty() {
            git_tree(&repository, &tree, "", &mut sink, reporter).with_context(context)?;
            continue;
        }
        entry_path(root.as_bytes(), 0).map_err(|e| anyhow::anyhow!("path `{root}` {e}"))?;
        let entry = tree
            .get_path(Path::new(&root))
            .with_context(|| format!("commit {commit} has no path `{root}`; fix `source.paths`"))?;
        git_entry(&repository, &entry, &root, &mut sink, reporter).with_context(context)?;
    }
    sink.finish().map(|(manifest, _)| manifest)
}

fn git_tree(
    repo: &git2::Repository,
    tree: &git2::Tree,
    prefix: &str,
    sink: &mut Sink,
    reporter: &Reporter,
) -> Result<()> {
    for entry in tree.iter() {
        let name = entry.name_bytes();
        let name = std::str::from_utf8(name)
            .map_err(|_| anyhow::anyhow!("a name below `{prefix}` is not UTF-8"))?;
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            bail!(
                "tree entry `{name}` below `{prefix}/` is refused: it could write outside the tree"
            );
        }
        let rel = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}/{name}")
        };
        git_entry(repo, &entry, &rel, sink, reporter)?;
    }
    Ok(())
}

fn git_entry(
    repo: &git2::Repository,
    entry: &git2::TreeEntry,
    rel: &str,
    sink: &mut Sink,
    reporter: &Reporter,
) -> Result<()> {
    let object = entry
        .to_object(repo)
        .with_context(|| format!("reading `{rel}`"))?;
    match entry.filemode() {
        0o040000 => {
            let tree = object.peel_to_tree()?;
            git_tree(repo, &tree, rel, sink, reporter)
        }
        0o160000 => {
            reporter.warn(format!(
                "skipping submodule `{rel}`: submodules are not extracted"
            ));
            Ok(())
        }
        0o120000 => {
            let blob = object.peel_to_blob()?;
            sink.symlink(rel, blob.content())
                .map_err(|e| e.context(format!("tree entry `{rel}` is refused")))
        }
        mode => {
            let blob = object.peel_to_blob()?;
            sink.file(rel, mode & 0o111 != 0, blob.content())
                .map_err(|e| e.context(format!("tree entry `{rel}` is refused")))
        }
    }
}
