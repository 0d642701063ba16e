//! What a `kind = "rewrite"` recipe brings to the build line: its source is
//! an upstream binary package (`source.deb`, pinned by sha256), its
//! transform is the expert-scheduling rewrite of every kernel file
//! (`transform::expert_sched_off`), and its output is the `.deb` that takes
//! the place of the upstream one: the same name, paths and modes and
//! control fields, a version just above it, only kernel files changed.
//!
//! Its steps beside the transform's: assemble (the rewritten tree without
//! `DEBIAN/`, and the carried control members), package
//! (`formats::deb_carried`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::exec::Cx;
use super::transform::Transform;
use super::{identity, Assembled, BuildKind, Options};
use crate::apply::extract::CONTROL_DIR;
use crate::apply::patch::Tolerance;
use crate::apply::state;
use crate::formats::deb_carried::Carried;
use crate::formats::{Architecture, FileTree, Format, PackageMeta};
use crate::input::recipe::{DebSource, Recipe, Source};
use crate::input::workspace::Workspace;

/// The rewrite kind: the binary rewrite as its transform, the upstream
/// package's version just raised, no source artifacts (its source is a
/// binary package, pinned in the manifest).
pub(crate) struct RewriteKind;

impl BuildKind for RewriteKind {
    fn transform(&self, _tol: Tolerance) -> Transform {
        Transform::ExpertSchedOff
    }

    fn machine(&self) -> Architecture {
        Architecture::Host
    }

    fn identity(&self, recipe: &Recipe, meta: &mut PackageMeta) {
        (meta.about.version, meta.about.release) = identity::version_of(recipe);
    }

    fn publishes_source(&self) -> bool {
        false
    }

    fn part<'r>(
        &self,
        _ws: &Workspace,
        recipe: &'r Recipe,
        opts: &Options,
    ) -> Result<Box<dyn super::Part + 'r>> {
        Ok(Box::new(Part::new(recipe, opts)?))
    }
}

/// A rewrite build's settings, resolved before anything is fetched.
pub(crate) struct Part {
    pub(crate) deb: DebSource,
    pub(crate) formats: Vec<Format>,
}

impl Part {
    pub(crate) fn new(recipe: &Recipe, opts: &Options) -> Result<Part> {
        let Source::Deb(deb) = &recipe.source else {
            bail!(crate::shared::diag::UsageError(format!(
                "{}: a rewrite recipe's source is a binary package: `[source] deb = \"name\"` \
                 with `version`, `arch` and `sha256`",
                recipe.path.display()
            )));
        };
        let formats = opts.formats_of(recipe);
        if !recipe.kind.name().accepts(&formats) {
            bail!(crate::shared::diag::UsageError(format!(
                "a rewrite recipe builds only the `deb` that takes the place of {}",
                deb.file_name()
            )));
        }
        Ok(Part {
            deb: deb.clone(),
            formats,
        })
    }
}

impl super::Part for Part {
    fn formats(&self) -> &[Format] {
        &self.formats
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "transform".to_owned(),
                super::transform::expert_sched_off::TRANSFORM.to_owned(),
            ),
            ("replaces".to_owned(), self.deb.file_name()),
        ])
    }

    /// The packages' tree (the rewritten tree without `DEBIAN/`) and
    /// metadata, with the upstream control members carried.
    fn assemble(&self, cx: &Cx) -> Result<Assembled> {
        let tree_dir = cx.tree()?;
        let mut tree = FileTree::from_dir(tree_dir, "")?;
        tree.remove(state::DIR).remove(CONTROL_DIR);
        for (path, mode) in crate::apply::extract::data_modes(tree_dir)? {
            tree.set_mode(&path, mode)?;
        }
        let control = carried_control(&tree_dir.join(CONTROL_DIR))?;
        self.check_control(&control.control, cx.recipe)?;
        let record = state::read(tree_dir)?
            .context("the rewritten tree has no state record")?
            .0;
        let sites: usize = record
            .rewrites()
            .iter()
            .flat_map(|r| &r.files)
            .map(|f| f.sites)
            .sum();
        let files: usize = record.rewrites().iter().map(|r| r.files.len()).sum();
        Ok(Assembled {
            meta: identity::identity(cx.recipe),
            machine: identity::machine(cx.recipe.kind.name()),
            tree,
            scripts: BTreeMap::new(),
            pkgbuild: None,
            params: BTreeMap::from([
                ("rewritten_files".to_owned(), files.to_string()),
                ("rewritten_sites".to_owned(), sites.to_string()),
            ]),
            carried: Some(control),
        })
    }
}

impl Part {
    /// Refuses a package whose `control` is not the one the recipe pins:
    /// its `Package`, `Version` and `Architecture` must be the recipe's
    /// `source.deb`, `source.version` and `source.arch`.
    fn check_control(&self, control: &str, recipe: &Recipe) -> Result<()> {
        let want = [
            ("Package", "source.deb", &self.deb.package),
            ("Version", "source.version", &self.deb.version),
            ("Architecture", "source.arch", &self.deb.arch),
        ];
        for (field, key, wanted) in want {
            let got = control
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case(field).then(|| value.trim())
                });
            if got != Some(wanted.as_str()) {
                bail!(
                    "the package's control says `{field}: {}` where {} names `{wanted}` \
                     (`{key}`): it is not the package the recipe pins, and it is not carried",
                    got.unwrap_or("(none)"),
                    recipe.path.display()
                );
            }
        }
        Ok(())
    }
}

fn carried_control(dir: &Path) -> Result<Carried> {
    let mut control = None;
    let mut members = Vec::new();
    for (entry, _) in crate::apply::extract::sorted_entries(dir)? {
        let path = dir.join(&entry);
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if !meta.is_file() {
            bail!(
                "{} is not a file: a control member must be one",
                path.display()
            );
        }
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        let mode = if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        match entry.as_str() {
            "control" => {
                control = Some(
                    String::from_utf8(bytes)
                        .with_context(|| format!("{} is not UTF-8", path.display()))?,
                )
            }
            "md5sums" | crate::apply::extract::MODES_FILE => {}
            _ => members.push((entry, mode, bytes)),
        }
    }
    let control =
        control.with_context(|| format!("the package has no {}/control", dir.display()))?;
    Ok(Carried { control, members })
}
