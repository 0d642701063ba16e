//! The maintainer's loop of the package benchmark, on a scratch copy of the
//! project (never the user's `dist/` or work folder): a cold build, a re-run
//! with nothing changed, a rebuild after one curated patch changed, and one
//! after one source file changed, each `build-dkms` in a child process
//! timed and measured (`wait4`) as a user sees it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::inputs::EPOCH;
use crate::measure::{fresh_dir, measure_ok, run_ok};
use xtask::input::recipe::{PatchOrigin, Recipe, Source};
use xtask::input::workspace::{CACHE_ENV, ROOT_ENV};

/// The recipe the loop builds, copied into a scratch project.
pub(crate) struct Scratch {
    /// The scratch project's root.
    pub(crate) root: PathBuf,
    pub(crate) recipe: String,
    exe: PathBuf,
    kernel: Option<String>,
}

/// One step of the loop, as the report shows it.
#[derive(Debug, Serialize)]
pub(crate) struct Step {
    pub(crate) step: &'static str,
    /// What changed before the build.
    pub(crate) change: String,
    /// `built`, `up to date` or `skipped`.
    pub(crate) outcome: String,
    pub(crate) seconds: Option<f64>,
    pub(crate) peak_rss_mib: Option<f64>,
    /// Where a build's time went: its steps and their seconds, from the
    /// `steps.json` it left in its work folder.
    pub(crate) steps: Vec<StepTime>,
}

/// One step of the build line and its seconds.
#[derive(Debug, Serialize, serde::Deserialize)]
pub(crate) struct StepTime {
    pub(crate) label: String,
    pub(crate) seconds: f64,
}

impl Scratch {
    /// Copies recipe `name` (its file, its `patches/` folder, a local source
    /// below the project) and `templates/` from `project` into a fresh
    /// `root`. With `archive`, the recipe's `local` source becomes that file.
    pub(crate) fn create(
        project: &Path,
        name: &str,
        archive: Option<&Path>,
        root: &Path,
        kernel: Option<String>,
    ) -> Result<Scratch> {
        let recipe = Recipe::load(project, name)?;
        fresh_dir(root)?;
        copy(&project.join("templates"), &root.join("templates"))?;
        let patches = project.join("patches").join(&recipe.name);
        if patches.is_dir() {
            copy(&patches, &root.join("patches").join(&recipe.name))?;
        }
        let mut text = std::fs::read_to_string(&recipe.path)
            .with_context(|| format!("reading {}", recipe.path.display()))?;
        match (&recipe.source, archive) {
            (Source::Local { .. }, Some(archive)) => {
                let archive = std::path::absolute(archive)
                    .with_context(|| format!("resolving {}", archive.display()))?;
                if !archive.is_file() {
                    bail!(
                        "{} is missing: apt-get install linux-source-6.12, or give --source ARCHIVE",
                        archive.display()
                    );
                }
                let mut doc: toml_edit::DocumentMut = text
                    .parse()
                    .with_context(|| format!("parsing {}", recipe.path.display()))?;
                doc["source"]["local"] = toml_edit::value(archive.display().to_string());
                if let Some(table) = doc["source"].as_table_mut() {
                    table.remove("sha256");
                }
                text = doc.to_string();
            }
            (_, Some(_)) => bail!(
                "{}: --source replaces a `local` source, and this recipe has none",
                recipe.path.display()
            ),
            (Source::Local { path, .. }, None) => {
                // A source inside the project comes along; one outside stays where it is.
                let rel = path.strip_prefix(project).unwrap_or(path);
                if rel.is_relative() {
                    copy(&project.join(rel), &root.join(rel))?;
                }
            }
            _ => {}
        }
        let dest = root.join("recipes").join(format!("{}.toml", recipe.name));
        std::fs::create_dir_all(dest.parent().expect("recipes/ has a parent"))
            .with_context(|| format!("creating {}", root.display()))?;
        std::fs::write(&dest, text).with_context(|| format!("writing {}", dest.display()))?;
        Ok(Scratch {
            root: root.to_path_buf(),
            recipe: recipe.name,
            exe: std::env::current_exe().context("finding this program to run build-dkms")?,
            kernel,
        })
    }

    /// The four steps, in order; the project is left built as the last one
    /// built it.
    pub(crate) fn run_loop(&self) -> Result<Vec<Step>> {
        let mut steps = Vec::new();
        for dir in ["target", "dist", "cache"] {
            let _ = std::fs::remove_dir_all(self.root.join(dir));
        }
        steps.push(self.build("cold build", "empty cache, work folder and dist/".into())?);
        steps.push(self.build("no-op re-run", "nothing".into())?);
        match self.change_patch()? {
            Some(change) => steps.push(self.build("one patch changed", change)?),
            None => steps.push(skipped(
                "one patch changed",
                "the recipe has no curated patch",
            )),
        }
        match self.change_source()? {
            Ok(change) => steps.push(self.build("one source file changed", change)?),
            Err(why) => steps.push(skipped("one source file changed", &why)),
        }
        Ok(steps)
    }

    /// `build-dkms <recipe>` in the scratch project, measured.
    fn build(&self, step: &'static str, change: String) -> Result<Step> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(["xtask", "build-dkms"]).arg(&self.recipe);
        if let Some(kernel) = &self.kernel {
            cmd.args(["--kernel", kernel]);
        }
        cmd.current_dir(&self.root)
            .env(ROOT_ENV, &self.root)
            .env(CACHE_ENV, self.root.join("cache"))
            .env("SOURCE_DATE_EPOCH", EPOCH.to_string());
        let (out, m) = measure_ok(&mut cmd, &format!("build-dkms {} ({step})", self.recipe))?;
        let up_to_date = String::from_utf8_lossy(&out.stdout).contains("is up to date");
        Ok(Step {
            step,
            change,
            outcome: if up_to_date { "up to date" } else { "built" }.into(),
            seconds: Some(m.secs),
            peak_rss_mib: Some(m.peak_kib as f64 / 1024.0),
            steps: if up_to_date {
                Vec::new()
            } else {
                self.step_times()?
            },
        })
    }

    /// The steps the last build ran and their seconds.
    fn step_times(&self) -> Result<Vec<StepTime>> {
        let log = self
            .root
            .join("target/patchkit/work")
            .join(&self.recipe)
            .join(xtask::line::exec::STEP_LOG);
        let text =
            std::fs::read_to_string(&log).with_context(|| format!("reading {}", log.display()))?;
        let steps: Vec<serde_json::Value> =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", log.display()))?;
        steps
            .iter()
            .map(|s| {
                let label = match (s["step"].as_str(), s["format"].as_str()) {
                    (Some(step), Some(format)) => format!("{step} {format}"),
                    (Some(step), None) => step.to_owned(),
                    _ => bail!("{}: a step without its name: {s}", log.display()),
                };
                let seconds = s["seconds"]
                    .as_f64()
                    .with_context(|| format!("{}: {label} has no seconds", log.display()))?;
                Ok(StepTime { label, seconds })
            })
            .collect()
    }

    /// Adds a line to the message of the recipe's first curated patch (its
    /// hunks stay as they are, its hash changes); what changed, or None.
    fn change_patch(&self) -> Result<Option<String>> {
        let recipe = Recipe::load(&self.root, &self.recipe)?;
        let Some((name, path)) = recipe.patches.iter().find_map(|p| match &p.origin {
            PatchOrigin::File { path } => Some((p.name.clone(), path.clone())),
            _ => None,
        }) else {
            return Ok(None);
        };
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut changed = b"Edited by patchkit-bench package: one line more.\n".to_vec();
        changed.extend_from_slice(&text);
        std::fs::write(&path, changed).with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(format!("a line added to the message of {name}")))
    }

    /// Adds an empty line to the end of one file of a `local` source folder
    /// that no patch touches; Err(why) when the source is not such a folder.
    fn change_source(&self) -> Result<std::result::Result<String, String>> {
        let recipe = Recipe::load(&self.root, &self.recipe)?;
        let dir = match &recipe.source {
            Source::Local { path, .. } if self.root.join(path).is_dir() => self.root.join(path),
            _ => {
                return Ok(Err(
                    "the source is an archive: a changed file is a new archive and pin, \
                     which is the cold path"
                        .into(),
                ))
            }
        };
        let mut touched = Vec::new();
        for p in &recipe.patches {
            if let PatchOrigin::File { path } = &p.origin {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                touched.extend(
                    text.lines()
                        .filter_map(|l| l.strip_prefix("+++ b/"))
                        .map(str::to_owned),
                );
            }
        }
        let mut files = Vec::new();
        list_files(&dir, &dir, &mut files)?;
        files.sort();
        // Not a hidden file (`.git/...`): one the source tree is made of.
        let hidden = |f: &String| f.split('/').any(|part| part.starts_with('.'));
        let Some(rel) = files
            .into_iter()
            .find(|f| !touched.contains(f) && !hidden(f))
        else {
            return Ok(Err("every file of the source is patched".into()));
        };
        let path = dir.join(&rel);
        let mut bytes =
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        bytes.push(b'\n');
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        Ok(Ok(format!("an empty line added to the end of {rel}")))
    }
}

fn skipped(step: &'static str, why: &str) -> Step {
    Step {
        step,
        change: why.into(),
        outcome: "skipped".into(),
        seconds: None,
        peak_rss_mib: None,
        steps: Vec::new(),
    }
}

/// Regular files below `dir`, relative to `base`.
fn list_files(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e.with_context(|| format!("listing {}", dir.display()))?;
        let kind = e.file_type()?;
        if kind.is_dir() {
            list_files(base, &e.path(), out)?;
        } else if kind.is_file() {
            let rel = e.path().strip_prefix(base)?.to_string_lossy().into_owned();
            out.push(rel);
        }
    }
    Ok(())
}

/// `cp -a FROM TO`: a real copy, never links, as the loop edits files.
fn copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    run_ok(Command::new("cp").arg("-a").arg(from).arg(to))
        .with_context(|| format!("copying {} into the scratch project", from.display()))
}
