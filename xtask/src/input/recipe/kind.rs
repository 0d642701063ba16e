//! What a recipe builds: one [`Kind`] whose variant carries its own table
//! (`[dkms]`, `[config]`, `target.expert_sched`), and the outputs each kind
//! can make.

use serde::{Deserialize, Serialize};

use crate::formats::Format;

/// What a recipe builds, with the table of its kind. Built by validation,
/// so a config recipe always has its `[config]`; a dkms recipe may leave
/// `[dkms]` out to be applied and verified, and is then refused by a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A DKMS module package (`[dkms]`, which only a build needs).
    Dkms(Option<Dkms>),
    /// Configuration files only (`[config]`), such as a modprobe.d snippet.
    Config(Config),
    /// The hipBLASLt library built from source; `expert_sched` is what the
    /// built gfx12 kernels must show, or the build is refused.
    Hipblaslt { expert_sched: Option<ExpertSched> },
    /// An upstream binary package (`source.deb`) transformed in place by a
    /// binary rewrite (`target.expert_sched = "off"`: the gfx12 kernels'
    /// expert-scheduling switch written off) and packaged again in its
    /// place; see `line/rewrite.rs`.
    Rewrite { expert_sched: ExpertSched },
}

/// The name of a [`Kind`]: the recipe's `target.kind` word, what a
/// `build-<kind>` command builds, and the plan's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KindName {
    Dkms,
    Hipblaslt,
    Config,
    Rewrite,
}

impl KindName {
    pub(crate) const ALL: [(&'static str, KindName); 4] = [
        ("dkms", KindName::Dkms),
        ("hipblaslt", KindName::Hipblaslt),
        ("config", KindName::Config),
        ("rewrite", KindName::Rewrite),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            KindName::Dkms => "dkms",
            KindName::Hipblaslt => "hipblaslt",
            KindName::Config => "config",
            KindName::Rewrite => "rewrite",
        }
    }

    /// The `cargo xtask` command that builds a recipe of this kind: its own
    /// `build-<kind>`, or `build` for a kind that has none (rewrite).
    pub(crate) fn build_command(self) -> &'static str {
        match self {
            KindName::Dkms => "build-dkms",
            KindName::Hipblaslt => "build-hipblaslt",
            KindName::Config => "build-config",
            KindName::Rewrite => "build",
        }
    }

    /// The flags of `cargo xtask build` only a recipe of this kind takes
    /// (the kernel of a module; the ROCm, targets and build of a library).
    pub(crate) fn build_flags(self) -> &'static [&'static str] {
        match self {
            KindName::Dkms => &["--kernel"],
            KindName::Hipblaslt => &["--rocm", "--gpu-targets", "--build", "--jobs"],
            KindName::Config | KindName::Rewrite => &[],
        }
    }

    /// What doctor says of a fix of this kind: what building it is, what
    /// that costs, and what follows its install; none for a kind that is
    /// no fix of the knowledge file (config is the stop-gap, a rewrite the
    /// in-place fix's package).
    pub(crate) fn doctor_fix(self) -> Option<DoctorFix> {
        match self {
            KindName::Dkms => Some(DoctorFix {
                what: "build the DKMS package of the fix",
                cost: "a rocm-patchkit checkout with Rust, the kernel's headers, a build of amdgpu, a reboot",
                after_install: "then reboot",
            }),
            KindName::Hipblaslt => Some(DoctorFix {
                what: "build our patched hipBLASLt",
                cost: "a rocm-patchkit checkout, a ROCm toolchain and a long CMake build",
                after_install: "then run programs with LD_LIBRARY_PATH=/opt/rocm-patchkit/hipblaslt-<version>/lib",
            }),
            KindName::Config | KindName::Rewrite => None,
        }
    }

    /// Whether the kind's package is a library installed under a prefix of
    /// its own (`/opt/rocm-patchkit/hipblaslt-<version>`), which doctor
    /// finds and judges.
    pub(crate) fn is_library(self) -> bool {
        matches!(self, KindName::Hipblaslt)
    }

    /// Whether the kind's package is a kernel module (built by DKMS), which
    /// doctor finds in `dkms status` and judges from the module.
    pub(crate) fn is_kernel_module(self) -> bool {
        matches!(self, KindName::Dkms)
    }

    /// Whether the kind needs `target.kernel` (or `target.kernel_regex`):
    /// a kernel module's; every other kind refuses both.
    pub(crate) fn needs_kernel(self) -> bool {
        self.is_kernel_module()
    }

    /// The `target.expert_sched` a recipe of this kind must give (`off`
    /// for a rewrite, `None` when it is free), and whether it may give one.
    pub(crate) fn expert_sched_rule(self) -> (Option<ExpertSched>, bool) {
        match self {
            KindName::Rewrite => (Some(ExpertSched::Off), true),
            KindName::Hipblaslt => (None, true),
            KindName::Dkms | KindName::Config => (None, false),
        }
    }

    /// Whether a recipe of this kind takes the place of the binary package
    /// its source is (its name and version are that package's).
    pub(crate) fn replaces_its_source(self) -> bool {
        matches!(self, KindName::Rewrite)
    }

    /// Why `target.formats` of a recipe of this kind is refused when the
    /// kind does not [accept](KindName::accepts) them.
    pub(crate) fn formats_refused(self) -> &'static str {
        match self {
            KindName::Rewrite => "`target.formats`: a rewrite recipe builds the `deb` that takes the place of its source package: `formats = [\"deb\"]`",
            _ => "`target.formats`: a config recipe builds `deb`, `rpm` and `arch` packages; `tar` is for DKMS sources",
        }
    }

    /// Whether a build of this kind writes a package in `format`: a format
    /// that packages a DKMS source alone (`tar`) is a DKMS output; a
    /// rewrite writes only the package that takes the place of its source
    /// (the `.deb`).
    pub(crate) fn makes(self, format: Format) -> bool {
        let format = format.get();
        match self {
            KindName::Dkms => true,
            KindName::Config | KindName::Hipblaslt => !format.dkms_only(),
            KindName::Rewrite => format.carries_upstream(),
        }
    }

    /// Whether a recipe or a command line of this kind may ask for
    /// `formats`: a config recipe only for those it makes (never `tar`), a
    /// rewrite for its `deb` alone; hipBLASLt takes `tar` and makes nothing
    /// of it.
    pub(crate) fn accepts(self, formats: &[Format]) -> bool {
        let all_made = formats.iter().all(|f| self.makes(*f));
        match self {
            KindName::Config => all_made,
            KindName::Rewrite => formats.len() == 1 && all_made,
            KindName::Dkms | KindName::Hipblaslt => true,
        }
    }

    /// The formats of a recipe that names none.
    pub(crate) fn default_formats(self) -> Vec<Format> {
        let all = Format::ALL.iter().copied();
        match self {
            KindName::Dkms | KindName::Hipblaslt => all.collect(),
            KindName::Config | KindName::Rewrite => all.filter(|f| self.makes(*f)).collect(),
        }
    }
}

impl Kind {
    /// The kind named `name` with its tables as validation read them (a
    /// config recipe without `[config]` was refused; it gets an empty one).
    pub(crate) fn of(
        name: KindName,
        dkms: Option<Dkms>,
        config: Option<Config>,
        expert_sched: Option<ExpertSched>,
    ) -> Kind {
        match name {
            KindName::Dkms => Kind::Dkms(dkms),
            KindName::Config => Kind::Config(config.unwrap_or(Config { files: Vec::new() })),
            KindName::Hipblaslt => Kind::Hipblaslt { expert_sched },
            KindName::Rewrite => Kind::Rewrite {
                expert_sched: expert_sched.unwrap_or(ExpertSched::Off),
            },
        }
    }

    /// The table a recipe of kind `name` takes: `dkms`, `config`, or none.
    pub(crate) fn table(name: KindName) -> Option<&'static str> {
        match name {
            KindName::Dkms => Some("dkms"),
            KindName::Config => Some("config"),
            KindName::Hipblaslt | KindName::Rewrite => None,
        }
    }

    pub fn name(&self) -> KindName {
        match self {
            Kind::Dkms(_) => KindName::Dkms,
            Kind::Config(_) => KindName::Config,
            Kind::Hipblaslt { .. } => KindName::Hipblaslt,
            Kind::Rewrite { .. } => KindName::Rewrite,
        }
    }

    /// The `[dkms]` table of a dkms recipe.
    pub fn dkms(&self) -> Option<&Dkms> {
        match self {
            Kind::Dkms(dkms) => dkms.as_ref(),
            _ => None,
        }
    }

    /// The `[config]` table of a config recipe.
    pub(crate) fn config(&self) -> Option<&Config> {
        match self {
            Kind::Config(config) => Some(config),
            _ => None,
        }
    }

    /// `target.expert_sched`: what the gfx12 kernels built or rewritten
    /// must show.
    pub(crate) fn expert_sched(&self) -> Option<ExpertSched> {
        match self {
            Kind::Hipblaslt { expert_sched } => *expert_sched,
            Kind::Rewrite { expert_sched } => Some(*expert_sched),
            Kind::Dkms(_) | Kind::Config(_) => None,
        }
    }
}

/// The `[config]` table: files of the (patched) source tree that a config
/// package installs, such as a modprobe.d snippet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Config {
    pub(crate) files: Vec<ConfigFile>,
}

/// One installed file of a config package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFile {
    /// Relative to the source tree.
    pub(crate) source: String,
    /// Absolute, below `/etc` or `/usr/lib/modprobe.d`.
    pub(crate) dest: String,
}

impl ConfigFile {
    /// Whether the package marks the file as configuration the admin may
    /// edit (a Debian conffile, rpm `%config(noreplace)`, Arch `backup`):
    /// every file below `/etc`.
    pub(crate) fn is_conffile(&self) -> bool {
        self.dest.starts_with("/etc/")
    }
}

/// The `[dkms]` table: which part of the patched tree is shipped and how
/// DKMS builds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dkms {
    /// The folder of the patched tree that becomes `/usr/src/<name>-<version>/`.
    pub tree: String,
    /// `MAKE[0]` of dkms.conf; DKMS's default when absent.
    pub(crate) make: Option<String>,
    /// `CLEAN` of dkms.conf; DKMS's default when absent.
    pub(crate) clean: Option<String>,
    pub(crate) modules: Vec<Module>,
}

/// One kernel module the DKMS tree builds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Module {
    /// `BUILT_MODULE_NAME`: the `.ko` without its extension.
    pub(crate) name: String,
    /// `BUILT_MODULE_LOCATION`: where the build leaves it, relative to the tree.
    pub(crate) location: String,
    /// `DEST_MODULE_LOCATION`: default `/updates/dkms`.
    pub(crate) dest: String,
}

/// The expert-scheduling verdict a hipblaslt or rewrite recipe requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertSched {
    Off,
    On,
}

impl ExpertSched {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ExpertSched::Off => "off",
            ExpertSched::On => "on",
        }
    }
}

/// doctor's words for a fix of one kind ([`KindName::doctor_fix`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DoctorFix {
    /// The build step, e.g. "build the DKMS package of the fix".
    pub(crate) what: &'static str,
    /// What the build takes.
    pub(crate) cost: &'static str,
    /// What the user does once the package is installed.
    pub(crate) after_install: &'static str,
}
