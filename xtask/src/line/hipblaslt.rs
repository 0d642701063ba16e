//! What a `kind = "hipblaslt"` recipe brings to the build line: the ROCm
//! toolchain and GPU targets, resolved before anything is fetched, and the
//! assemble step: CMake configures, builds and installs the patched library
//! into a staging root (logging to the work folder), the gfx12 kernels are
//! checked for the recipe's `expert_sched`, and the install prefix becomes
//! the packages' tree. Without a toolchain the plan has no assemble or
//! package step: the source is published alone, and the manifest says why.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::exec::Cx;
use super::{identity, Assembled, BuildKind, Options};
use crate::formats::{Architecture, Format};
use crate::gpu::hipblaslt_cmake::{
    self, cmake, kernels, packages, toolchain::Toolchain, BuildMode,
};
use crate::input::recipe::Recipe;
use crate::input::workspace::Workspace;
use crate::release::manifest::Manifest;

/// The hipblaslt kind: a compiled library for the host's machine, its
/// patched tree published beside the orig tarball.
pub(crate) struct HipblasltKind;

impl BuildKind for HipblasltKind {
    fn machine(&self) -> Architecture {
        Architecture::Host
    }

    fn publishes_patched(&self) -> bool {
        true
    }

    fn part<'r>(
        &self,
        ws: &Workspace,
        recipe: &'r Recipe,
        opts: &Options,
    ) -> Result<Box<dyn super::Part + 'r>> {
        Ok(Box::new(Part::new(ws, recipe, opts)?))
    }
}

/// The `build-hipblaslt` flags.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// `--rocm`; else `$ROCM_PATH`, else `/opt/rocm`.
    pub(crate) rocm: Option<PathBuf>,
    /// `gfx1200;gfx1201` (commas are accepted too).
    pub(crate) gpu_targets: String,
    pub(crate) mode: BuildMode,
    pub(crate) jobs: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            rocm: None,
            gpu_targets: hipblaslt_cmake::DEFAULT_GPU_TARGETS.to_owned(),
            mode: BuildMode::Auto,
            jobs: crate::shared::par::cores(),
        }
    }
}

/// Whether a hipBLASLt build made the library, as its manifest records it
/// (`build.binary`: `built`, or `skipped: <why>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Binary {
    Built,
    /// No usable toolchain: only the source was published, for this reason.
    Skipped {
        why: String,
    },
}

impl Binary {
    const KEY: &str = "binary";
    const SKIPPED: &str = "skipped: ";

    /// The value the manifest's `build` map holds under `binary`.
    fn param(&self) -> String {
        match self {
            Binary::Built => "built".to_owned(),
            Binary::Skipped { why } => format!("{}{why}", Binary::SKIPPED),
        }
    }

    /// What a published hipBLASLt build's manifest records.
    pub(crate) fn recorded(manifest: &Manifest) -> Result<Binary> {
        let value = manifest
            .build
            .get(Binary::KEY)
            .with_context(|| format!("the manifest records no `build.{}`", Binary::KEY))?;
        Ok(match value.strip_prefix(Binary::SKIPPED) {
            Some(why) => Binary::Skipped {
                why: why.to_owned(),
            },
            None if value == "built" => Binary::Built,
            None => bail!("the manifest's `build.{}` is `{value}`", Binary::KEY),
        })
    }
}

/// A hipBLASLt build's settings, resolved before anything is fetched.
pub(crate) struct Part {
    /// The toolchain, or why the binary build is skipped.
    pub(crate) toolchain: Result<Toolchain, String>,
    pub(crate) gpu_targets: String,
    pub(crate) mode: BuildMode,
    pub(crate) jobs: usize,
    pub(crate) install_prefix: String,
    /// The recipe's formats with a toolchain, none without.
    pub(crate) formats: Vec<Format>,
}

impl Part {
    pub(crate) fn new(ws: &Workspace, recipe: &Recipe, opts: &Options) -> Result<Part> {
        let s = &opts.hipblaslt;
        let gpu_targets = hipblaslt_cmake::normalize_gpu_targets(&s.gpu_targets)?;
        let toolchain =
            hipblaslt_cmake::toolchain_for(s.mode, s.rocm.as_deref(), &ws.settings.env)?;
        let formats = match &toolchain {
            Ok(tc) => {
                hipblaslt_cmake::check_release(recipe, tc, &ws.reporter);
                let wanted = opts.formats.as_ref().unwrap_or(&recipe.target.formats);
                wanted
                    .iter()
                    .copied()
                    .filter(|f| recipe.kind.name().makes(*f))
                    .collect()
            }
            Err(why) => {
                ws.reporter.warn(format!(
                    "binary build skipped ({why}); publishing the source artifacts only"
                ));
                Vec::new()
            }
        };
        Ok(Part {
            toolchain,
            gpu_targets,
            mode: s.mode,
            jobs: s.jobs.max(1),
            install_prefix: packages::install_prefix(recipe),
            formats,
        })
    }
}

impl super::Part for Part {
    fn formats(&self) -> &[Format] {
        &self.formats
    }

    fn params(&self) -> BTreeMap<String, String> {
        let mut params = BTreeMap::from([
            ("build_mode".to_owned(), self.mode.as_str().to_owned()),
            ("gpu_targets".to_owned(), self.gpu_targets.clone()),
        ]);
        match &self.toolchain {
            Ok(tc) => params.extend([
                (Binary::KEY.to_owned(), Binary::Built.param()),
                ("rocm_path".to_owned(), tc.prefix.display().to_string()),
                (
                    "rocm_version".to_owned(),
                    tc.version.clone().unwrap_or_else(|| "unknown".to_owned()),
                ),
                ("compiler".to_owned(), tc.cxx.display().to_string()),
                ("install_prefix".to_owned(), self.install_prefix.clone()),
            ]),
            Err(why) => {
                let skipped = Binary::Skipped { why: why.clone() };
                params.insert(Binary::KEY.to_owned(), skipped.param());
            }
        }
        params
    }

    /// Configures, builds and installs the library, checks its gfx12
    /// kernels, and takes the install prefix as the packages' tree.
    fn assemble(&self, cx: &Cx) -> Result<Assembled> {
        let Ok(tc) = &self.toolchain else {
            bail!("the plan of {} builds without a toolchain", cx.recipe.name);
        };
        let work = cx.work()?;
        let spec = cmake::BuildSpec {
            toolchain: tc,
            source: cx.tree()?.join("projects/hipblaslt"),
            build: work.join("build"),
            root: work.join("root"),
            prefix: self.install_prefix.clone(),
            gpu_targets: self.gpu_targets.clone(),
            jobs: self.jobs,
            source_date_epoch: cx.epoch,
            log: work.join("build.log"),
        };
        if !spec.source.join("CMakeLists.txt").is_file() {
            bail!(
                "the patched tree has no projects/hipblaslt/CMakeLists.txt; check that \
                 `source.paths` of {} includes projects/hipblaslt",
                cx.recipe.name
            );
        }
        cmake::build(&spec, &cx.ws.reporter)?;
        let verdict = kernels::check(cx.recipe, &spec.root, &spec.prefix, &self.gpu_targets)?;
        cx.ws.reporter.step(format!("gfx12 kernels: {verdict}"));
        Ok(Assembled {
            meta: packages::meta(cx.recipe),
            machine: identity::machine(cx.recipe.kind.name()),
            tree: packages::tree(&spec.root, &spec.prefix)?,
            scripts: BTreeMap::new(),
            pkgbuild: None,
            params: BTreeMap::from([("gfx12_expert_sched".to_owned(), verdict)]),
            carried: None,
        })
    }
}
