//! The reference tools of the package benchmark: `dpkg-deb --build`,
//! `rpmbuild -bb` of the spec build-dkms rendered, makepkg's package steps
//! (`bsdtar` for .MTREE and the archive, then `zstd`) and `tar | gzip`,
//! each fed what build-dkms fed ours (set up once, untimed, mostly hard
//! links) and run twice: at the tool's default compression, and at our
//! compressor and level (so that sizes match ours and only speed differs).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::inputs::{Inputs, EPOCH};
use crate::measure::{link_copy, run_ok};
use xtask::formats::Compression;

/// The two settings every reference tool runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// The tool as a user calls it, without compression flags.
    Default,
    /// Our compressor and level, passed to the tool.
    Ours,
}

/// One timed reference build.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) tool: String,
    program: String,
    args: Vec<OsString>,
    cwd: PathBuf,
    /// Emptied before each run; the package lands below it.
    pub(crate) out_dir: PathBuf,
}

impl Job {
    pub(crate) fn new(
        tool: &str,
        program: &str,
        args: Vec<OsString>,
        cwd: &Path,
        out_dir: PathBuf,
    ) -> Job {
        Job {
            tool: tool.into(),
            program: program.into(),
            args,
            cwd: cwd.to_path_buf(),
            out_dir,
        }
    }

    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(&self.cwd)
            .env("SOURCE_DATE_EPOCH", EPOCH.to_string())
            .env("LC_ALL", "C")
            .env("TZ", "UTC");
        cmd
    }

    /// The command line, for the report.
    pub(crate) fn describe(&self) -> String {
        let mut s = self.program.clone();
        for a in &self.args {
            s.push(' ');
            let a = a.to_string_lossy();
            if a.contains([' ', '\n', '|', '*']) {
                s.push_str(&format!("{a:?}"));
            } else {
                s.push_str(&a);
            }
        }
        s
    }

    /// Path and size of the one package file the run left below `out_dir`.
    pub(crate) fn artifact(&self) -> Result<(PathBuf, u64)> {
        let mut stack = vec![self.out_dir.clone()];
        let mut found = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
                let e = e.with_context(|| format!("listing {}", d.display()))?;
                let meta = e.metadata()?;
                if meta.is_dir() {
                    stack.push(e.path());
                } else {
                    found.push((e.path(), meta.len()));
                }
            }
        }
        match &found[..] {
            [one] => Ok(one.clone()),
            _ => bail!(
                "{} left {} files in {}, expected one package",
                self.tool,
                found.len(),
                self.out_dir.display()
            ),
        }
    }
}

/// What a format's reference builds start from.
pub(crate) struct Stage<'a> {
    pub(crate) inputs: &'a Inputs,
    /// Our package of the format, as build-dkms published it.
    pub(crate) ours: &'a Path,
    /// `<dir>/pkg`: the tree the tool packs.
    pub(crate) pkg: &'a Path,
    /// The format's staging folder.
    pub(crate) dir: &'a Path,
    /// Where the job of each setting leaves its package.
    pub(crate) out_dir: &'a dyn Fn(Setting) -> PathBuf,
}

/// The reference builds of one format, at each setting.
pub(crate) type Jobs = fn(&Stage) -> Result<Vec<(Setting, Job)>>;

/// The dpkg-deb builds of our .deb's files and control members.
pub(crate) fn deb_jobs(s: &Stage) -> Result<Vec<(Setting, Job)>> {
    let (ours, pkg, dir, out_dir) = (s.ours, s.pkg, s.dir, s.out_dir);
    let mut jobs = Vec::new();
    // Our .deb's files and control members (control, md5sums, the
    // scripts), as dpkg-deb --build takes them.
    run_ok(Command::new("dpkg-deb").arg("-R").arg(ours).arg(pkg))
        .with_context(|| format!("unpacking {}", ours.display()))?;
    let Compression::Xz(level) = Compression::DEB else {
        bail!("the deb writer no longer uses xz; teach bench package its dpkg-deb flags");
    };
    for setting in [Setting::Default, Setting::Ours] {
        let mut args: Vec<OsString> = vec!["--root-owner-group".into()];
        if setting == Setting::Ours {
            args.extend(["-Zxz".into(), format!("-z{level}").into()]);
        }
        let dest = out_dir(setting);
        args.extend([
            "--build".into(),
            pkg.to_path_buf().into(),
            dest.join("ref.deb").into(),
        ]);
        jobs.push((
            setting,
            Job::new("dpkg-deb --build", "dpkg-deb", args, dir, dest),
        ));
    }
    Ok(jobs)
}

/// The rpmbuild builds of the rendered spec.
pub(crate) fn rpm_jobs(s: &Stage) -> Result<Vec<(Setting, Job)>> {
    let (inputs, dir, out_dir) = (s.inputs, s.dir, s.out_dir);
    let mut jobs = Vec::new();
    // The rendered spec with --noprep: the patched tree stands where
    // its %prep would unpack it (%{_builddir}/<name>-<version>), and
    // %install copies it from there.
    let Compression::Zstd(level) = Compression::RPM else {
        bail!("the rpm writer no longer uses zstd; teach bench package its rpmbuild payload");
    };
    let p = &inputs.recipe.package;
    let build = dir
        .join("build")
        .join(format!("{}-{}", p.name, p.about.version));
    link_copy(&inputs.patched, &build)?;
    let _ = std::fs::remove_dir_all(build.join(xtask::apply::state::DIR));
    let sources = dir.join("sources");
    std::fs::create_dir_all(&sources).with_context(|| format!("creating {}", sources.display()))?;
    std::fs::write(sources.join("dkms.conf"), &inputs.dkms_conf)
        .with_context(|| format!("writing {}/dkms.conf", sources.display()))?;
    for setting in [Setting::Default, Setting::Ours] {
        let dest = out_dir(setting);
        let mut defines = vec![
            ("_topdir", dir.join("top").display().to_string()),
            ("_builddir", dir.join("build").display().to_string()),
            ("_sourcedir", sources.display().to_string()),
            ("_rpmdir", dest.display().to_string()),
            ("_build_id_links", "none".into()),
            ("debug_package", "%{nil}".into()),
            // No strip or compress passes over the files: ours does none.
            ("__spec_install_post", "%{nil}".into()),
            ("_buildhost", "rocm-patchkit".into()),
        ];
        if setting == Setting::Ours {
            // Our compressor and level; all cores, as ours.
            defines.push(("_binary_payload", format!("w{level}T0.zstdio")));
        }
        let mut args: Vec<OsString> = vec![
            "-bb".into(),
            "--noprep".into(),
            "--noclean".into(),
            "--quiet".into(),
            "--nodeps".into(),
        ];
        for (k, v) in defines {
            args.extend(["--define".into(), format!("{k} {v}").into()]);
        }
        args.push(inputs.spec().into());
        jobs.push((
            setting,
            Job::new("rpmbuild -bb", "rpmbuild", args, dir, dest),
        ));
    }
    Ok(jobs)
}

/// makepkg's steps on our Arch package's files.
pub(crate) fn arch_jobs(s: &Stage) -> Result<Vec<(Setting, Job)>> {
    let (ours, pkg, out_dir) = (s.ours, s.pkg, s.out_dir);
    let mut jobs = Vec::new();
    // Our package's files and .PKGINFO, .BUILDINFO, .INSTALL; makepkg's
    // create_package from there (root may not run makepkg itself).
    std::fs::create_dir_all(pkg).with_context(|| format!("creating {}", pkg.display()))?;
    run_ok(
        Command::new("bsdtar")
            .arg("-xpf")
            .arg(ours)
            .arg("-C")
            .arg(pkg),
    )
    .with_context(|| format!("unpacking {}", ours.display()))?;
    let _ = std::fs::remove_file(pkg.join(".MTREE"));
    let Compression::Zstd(level) = Compression::ARCH else {
        bail!("the Arch writer no longer uses zstd; teach bench package its zstd flags");
    };
    let meta_files = if pkg.join(".INSTALL").is_file() {
        ".BUILDINFO .INSTALL .PKGINFO"
    } else {
        ".BUILDINFO .PKGINFO"
    };
    for setting in [Setting::Default, Setting::Ours] {
        // makepkg.conf's COMPRESSZST=(zstd -c -z -q -): level 3, one thread.
        let zstd = match setting {
            Setting::Default => "zstd -c -z -q -".to_owned(),
            // Ours: the same window as our writer (2^27).
            Setting::Ours => format!("zstd -{level} --long=27 -T0 -c -z -q -"),
        };
        let script = format!(
            "bsdtar -czf .MTREE --format=mtree \
                 --options='!all,use-set,type,uid,gid,mode,time,size,md5,sha256,link' \
                 {meta_files} usr && \
                 {{ printf '%s\\0' {meta_files} .MTREE; find usr -print0 | LC_ALL=C sort -z; }} \
                 | bsdtar --uid 0 --gid 0 --uname root --gname root -cnf - --null --files-from - \
                 | {zstd} > \"$1\""
        );
        let dest = out_dir(setting);
        jobs.push((
            setting,
            shell_job(
                "makepkg steps (bsdtar | zstd)",
                script,
                dest.join("ref.pkg.tar.zst"),
                pkg,
                dest,
            ),
        ));
    }
    Ok(jobs)
}

/// tar | gzip of the DKMS source tarball's tree.
pub(crate) fn tar_jobs(s: &Stage) -> Result<Vec<(Setting, Job)>> {
    let (inputs, pkg, out_dir) = (s.inputs, s.pkg, s.out_dir);
    let mut jobs = Vec::new();
    link_copy(&inputs.tree_root, &pkg.join("dkms_source_tree"))?;
    let source = pkg.join("dkms_source_tree");
    let _ = std::fs::remove_dir_all(source.join(xtask::apply::state::DIR));
    let _ = std::fs::remove_file(source.join("dkms.conf"));
    std::fs::write(source.join("dkms.conf"), &inputs.dkms_conf)
        .with_context(|| format!("writing {}/dkms.conf", source.display()))?;
    std::fs::create_dir_all(pkg.join("dkms_main_tree"))
        .with_context(|| format!("creating {}", pkg.display()))?;
    let Compression::Gzip(level) = Compression::TARBALL else {
        bail!("the tarball writer no longer uses gzip; teach bench package its flags");
    };
    // gzip's default level is 6: when ours is too, one job serves both.
    let settings: &[Setting] = if level == 6 {
        &[Setting::Default]
    } else {
        &[Setting::Default, Setting::Ours]
    };
    for &setting in settings {
        let gzip = match setting {
            Setting::Default => "gzip -n".to_owned(),
            Setting::Ours => format!("gzip -n -{level}"),
        };
        let script = format!(
            "tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@{EPOCH} -c . \
                 | {gzip} > \"$1\""
        );
        let dest = out_dir(setting);
        jobs.push((
            setting,
            shell_job("tar | gzip", script, dest.join("ref.tar.gz"), pkg, dest),
        ));
    }
    Ok(jobs)
}

impl Setting {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Setting::Default => "default",
            Setting::Ours => "ours",
        }
    }
}

fn shell_job(tool: &str, script: String, dest: PathBuf, cwd: &Path, out_dir: PathBuf) -> Job {
    let args = vec![
        "-o".into(),
        "pipefail".into(),
        "-c".into(),
        script.into(),
        "bash".into(),
        dest.into(),
    ];
    Job::new(tool, "bash", args, cwd, out_dir)
}
