//! The executor: walks a plan's steps in order for any kind, keeping what
//! each step made for the next, and records the steps it ran in
//! `<work>/steps.json`: the objects `plan --json` lists, each with the
//! seconds it took.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::plan;
use super::source::Published;
use super::transform::{self, Applied, Transform};
use super::{Assembled, Options, Outcome, Part};
use crate::apply::patch::Tolerance;
use crate::fetch::{self, Fetched};
use crate::formats::{self, Package, Scripts};
use crate::input::plan::{Plan, Step};
use crate::input::recipe::Recipe;
use crate::input::workspace::{WorkLock, Workspace};
use crate::release::dist::{self, Staging};
use crate::release::manifest::Manifest;
use crate::release::outcome::{self, Stamp};
use crate::release::render::Rendered;

/// The file in the work folder that lists the steps the last build ran.
pub const STEP_LOG: &str = "steps.json";

/// One step run, as `steps.json` records it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Ran {
    #[serde(flatten)]
    pub(crate) step: Step,
    /// Wall time of the step, to the millisecond.
    pub(crate) seconds: f64,
}

/// What the steps made so far.
pub(crate) struct Cx<'a> {
    pub(crate) ws: &'a Workspace,
    pub(crate) recipe: &'a Recipe,
    pub(crate) plan: Plan,
    pub(crate) epoch: i64,
    pub(crate) out: PathBuf,
    fetch: crate::fetch::FetchOptions,
    /// What the writers are given: the .deb's compression when one was
    /// chosen (recorded in the manifest, so that changing it rebuilds),
    /// the chunk cache, and the build's digest memo (which the pristine
    /// check and the verify step fill too).
    packing: formats::Packing,
    pub(crate) fetched: Option<Fetched>,
    /// The recipe's transform and the tree it made (or kept), verified in
    /// the verify step.
    applied: Option<(Transform, Applied)>,
    pub(crate) source: Option<Published>,
    pub(crate) rendered: Option<Rendered>,
    pub(crate) assembled: Option<Assembled>,
    manifest: Option<Manifest>,
    stamp: Option<Stamp>,
    staging: Option<Staging>,
    lock: Option<WorkLock>,
    done: Vec<Ran>,
}

/// Plans the build of `recipe` and runs its steps.
pub(crate) fn execute(
    ws: &Workspace,
    recipe: &Recipe,
    part: &dyn Part,
    opts: &Options,
) -> Result<Outcome> {
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| ws.root.join("dist").join(&recipe.name));
    dist::check_replaceable(&out)?;
    let mut cx = Cx {
        ws,
        recipe,
        plan: plan::plan_for(recipe, part.formats())?,
        epoch: crate::input::target::source_date_epoch(&ws.root, &ws.settings.env)?,
        out,
        fetch: opts.fetch.clone(),
        packing: formats::Packing {
            deb: opts.compression.or(recipe.package.compression),
            cache: Some(formats::ChunkCache::new(ws.work_dir.join("chunks"))),
            digests: Default::default(),
        },
        fetched: None,
        applied: None,
        source: None,
        rendered: None,
        assembled: None,
        manifest: None,
        stamp: None,
        staging: None,
        lock: None,
        done: Vec::new(),
    };
    let steps = cx.plan.steps.clone();
    for (i, step) in steps.iter().enumerate() {
        ws.reporter
            .step(format!("step {}/{}: {}", i + 1, steps.len(), step.label()));
        let started = Instant::now();
        let ended = cx.run(step, part)?;
        if cx.lock.is_none() {
            // Up to date: nothing ran, and the last build's log stays.
            return ended.context("a build without its work lock went on");
        }
        let seconds = (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
        cx.done.push(Ran {
            step: step.clone(),
            seconds,
        });
        cx.write_log()?;
        if let Some(outcome) = ended {
            return Ok(outcome);
        }
    }
    bail!("the plan of {} ends without a publish step", recipe.name)
}

impl Cx<'_> {
    /// Runs one step; `Some` when the build ended there.
    fn run(&mut self, step: &Step, part: &dyn Part) -> Result<Option<Outcome>> {
        match step {
            Step::Fetch => return self.fetch(part),
            Step::EnsureApplied => self.ensure_applied(Tolerance::strict())?,
            Step::Verify => self.verify()?,
            Step::PublishSource { .. } => self.publish_source()?,
            Step::Render => self.rendered = Some(part.render(self)?),
            Step::Assemble { .. } => self.assembled = Some(part.assemble(self)?),
            Step::Package { format, file } => self.package(*format, file)?,
            Step::Publish => return self.publish().map(Some),
        }
        Ok(None)
    }

    /// Fetches the inputs, takes the work lock, and ends the build when
    /// the publication is already this build's.
    fn fetch(&mut self, part: &dyn Part) -> Result<Option<Outcome>> {
        let fetched = fetch::fetch(self.ws, self.recipe, &self.fetch)
            .with_context(|| format!("fetching the inputs of {}", self.recipe.name))?;
        let templates_dir = self.ws.root.join("templates");
        let templates = if super::kind_of(self.recipe.kind.name()).renders() {
            outcome::template_bytes(&templates_dir)?
        } else {
            Vec::new()
        };
        let mut params = part.params();
        if let Some(deb) = self.packing.deb {
            params.insert("deb-compression".to_owned(), deb.to_string());
        }
        let manifest = Manifest::new(&self.plan, &fetched, self.epoch, params, &templates)?;
        let lock = self.ws.lock_work(&self.recipe.name)?;
        let stamp = Stamp::new(lock.dir.join("published.stamp"), &manifest, &self.out);
        if stamp.up_to_date(&self.out, &manifest) {
            return Ok(Some(Outcome::UpToDate {
                dir: self.out.clone(),
            }));
        }
        self.staging = Some(Staging::begin(&self.out)?);
        self.packing.digests.read_book(&self.md5_book());
        self.fetched = Some(fetched);
        self.manifest = Some(manifest);
        self.stamp = Some(stamp);
        self.lock = Some(lock);
        Ok(None)
    }

    /// The ensure-applied step of the recipe's transform.
    fn ensure_applied(&mut self, tol: Tolerance) -> Result<()> {
        let transform = super::kind_of(self.recipe.kind.name()).transform(tol);
        let work = self.work()?;
        let applied = transform::ensure_applied(
            transform,
            self.recipe,
            self.fetched()?,
            work,
            &self.packing.digests,
            self.ws.settings.extract,
            &self.ws.reporter,
        )?;
        self.applied = Some((transform, applied));
        Ok(())
    }

    /// The verify step of the transform ensure-applied ran.
    fn verify(&mut self) -> Result<()> {
        let (transform, applied) = self
            .applied
            .as_ref()
            .context("the ensure-applied step runs before this one")?;
        let fetched = self.fetched.as_ref().context("the fetch step runs first")?;
        let manifest = self.manifest.as_mut().context("verify runs after fetch")?;
        transform::verify(
            *transform,
            applied,
            self.recipe,
            fetched,
            manifest,
            &self.packing.digests,
            &self.ws.reporter,
        )
    }

    fn publish_source(&mut self) -> Result<()> {
        let inputs = super::source::Inputs {
            recipe: self.recipe,
            pristine: self.pristine()?,
            tree: self.tree()?,
            fetched: self.fetched()?,
            dir: self.dir()?,
            work: self.work()?,
            epoch: self.epoch_u()?,
            packing: &self.packing,
            reporter: &self.ws.reporter,
        };
        self.source = Some(super::source::publish(&inputs)?);
        Ok(())
    }

    /// One binary package of what assemble made, under the planned name.
    fn package(&self, format: formats::Format, file: &str) -> Result<()> {
        let a = self.assembled()?;
        let none = Scripts::default();
        let scripts = match a.scripts.get(&format) {
            Some(scripts) => scripts,
            // A kind whose packages run no scripts gives none for any format.
            None if a.scripts.is_empty() => &none,
            None => bail!(
                "the assemble step of {} gave no maintainer scripts for {}: \
                 its packages would install without them",
                self.recipe.name,
                format.as_str()
            ),
        };
        let pkg = Package {
            meta: &a.meta,
            machine: a.machine,
            tree: &a.tree,
            scripts,
            pkgbuild: a.pkgbuild.as_deref(),
            epoch: self.epoch_u()?,
        };
        let dir = self.dir()?;
        let task = self.ws.reporter.task(format!("writing {file}"));
        let before = self.chunk_count();
        let written = match &a.carried {
            Some(_) if !format.get().carries_upstream() => bail!("a rewrite builds only a .deb"),
            Some(carried) => format
                .get()
                .write_carried(&pkg, carried, dir, &self.packing),
            None => formats::write(format, &pkg, dir, &self.packing),
        };
        let artifact = written.with_context(|| {
            format!(
                "writing the {} package of {}",
                format.as_str(),
                self.recipe.name
            )
        })?;
        drop(task);
        if artifact.path != dir.join(file) {
            bail!(
                "the {} writer wrote {} where the plan names {file}",
                format.as_str(),
                artifact.path.display()
            );
        }
        outcome::wrote_noting(&self.ws.reporter, &artifact, dir, &self.chunk_note(before));
        Ok(())
    }

    /// `manifest.json`, `SHA256SUMS`, the folder swapped into place, and
    /// the stamp that makes the next unchanged run a no-op.
    fn publish(&mut self) -> Result<Outcome> {
        let mut manifest = self.manifest.take().context("publish runs after fetch")?;
        if let Some(a) = &self.assembled {
            manifest.build.extend(a.params.clone());
        }
        let staging = self.staging.take().context("publish runs after fetch")?;
        let stamp = self.stamp.take().context("publish runs after fetch")?;
        // Only speed depends on it: a book that cannot be written is no error.
        if let Err(e) = self.packing.digests.write_book(&self.md5_book()) {
            self.ws.reporter.warn(format!("{e:#}"));
        }
        outcome::finish(staging, manifest, &stamp)
    }

    /// Records the steps run so far in the work folder.
    fn write_log(&self) -> Result<()> {
        let Some(lock) = &self.lock else {
            return Ok(());
        };
        let path = lock.dir.join(STEP_LOG);
        let text = serde_json::to_string_pretty(&self.done)? + "\n";
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }

    /// Chunks this build took from the cache and compressed, so far.
    pub(crate) fn chunk_count(&self) -> (u64, u64) {
        let cache = self.packing.cache.as_ref();
        cache.map_or((0, 0), |c| (c.hits(), c.misses()))
    }

    /// What this build hands its package writers.
    pub(crate) fn packing(&self) -> &formats::Packing {
        &self.packing
    }

    /// `41 of 43 chunks from the cache` since `before` (a
    /// [`Cx::chunk_count`]), or nothing when nothing was compressed.
    pub(crate) fn chunk_note(&self, before: (u64, u64)) -> String {
        let (hits, misses) = self.chunk_count();
        let (hits, misses) = (hits - before.0, misses - before.1);
        match hits + misses {
            0 => String::new(),
            all => format!("{hits} of {all} chunks from the cache"),
        }
    }

    /// The md5s of file contents by their sha256, kept between builds
    /// (see `hash::memo`).
    fn md5_book(&self) -> PathBuf {
        self.ws.work_dir.join("md5-by-sha256")
    }

    pub(crate) fn fetched(&self) -> Result<&Fetched> {
        self.fetched.as_ref().context("the fetch step runs first")
    }

    /// The sha256 of each patch, in series order.
    pub(crate) fn patch_sha256(&self) -> Result<Vec<String>> {
        Ok(self
            .fetched()?
            .patches
            .iter()
            .map(|p| p.sha256.clone())
            .collect())
    }

    pub(crate) fn tree(&self) -> Result<&Path> {
        self.applied
            .as_ref()
            .map(|(_, applied)| applied.tree.as_path())
            .context("the ensure-applied step runs before this one")
    }

    /// The verified pristine tree the applied one was made from.
    pub(crate) fn pristine(&self) -> Result<&crate::apply::patch::pristine::Pristine> {
        self.applied
            .as_ref()
            .map(|(_, applied)| &applied.pristine)
            .context("the ensure-applied step runs before publish-source")
    }

    pub(crate) fn work(&self) -> Result<&Path> {
        Ok(&self.lock.as_ref().context("the fetch step runs first")?.dir)
    }

    /// The staging folder of the publication.
    pub(crate) fn dir(&self) -> Result<&Path> {
        Ok(self
            .staging
            .as_ref()
            .context("the fetch step runs first")?
            .dir())
    }

    pub(crate) fn source(&self) -> Result<&Published> {
        self.source
            .as_ref()
            .context("the publish-source step runs before this one")
    }

    pub(crate) fn rendered(&self) -> Result<&Rendered> {
        self.rendered
            .as_ref()
            .context("the render step runs before this one")
    }

    fn assembled(&self) -> Result<&Assembled> {
        self.assembled
            .as_ref()
            .context("the assemble step runs before package")
    }

    pub(crate) fn epoch_u(&self) -> Result<u64> {
        u64::try_from(self.epoch).context("SOURCE_DATE_EPOCH is before 1970")
    }
}
