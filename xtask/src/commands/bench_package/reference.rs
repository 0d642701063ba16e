//! The reference side of `bench package`: a staging directory per format
//! holding what the tool needs to build the same package as ours (set up
//! once, hard-linked, untimed), and the timed command that builds it with
//! the same compressor and level as our writer.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{meta, Fmt, EPOCH, MODULE, VERSION};
use crate::commands::bench::{run_ok, which};
use crate::package::compress::{compress_bytes, copy_hashed, Want};
use crate::package::tree::Kind;
use crate::package::{arch, deb, dkms, rfc2822, Compression, FileTree, Scripts};

/// One timed reference build.
pub struct Job {
    pub tool: String,
    program: String,
    args: Vec<OsString>,
    cwd: PathBuf,
    /// Emptied before each run; the package lands below it.
    pub out_dir: PathBuf,
}

impl Job {
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(&self.cwd)
            .env("SOURCE_DATE_EPOCH", EPOCH.to_string())
            .env("LC_ALL", "C")
            .env("TZ", "UTC");
        cmd
    }

    /// The command line, for the report.
    pub fn describe(&self) -> String {
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
    pub fn artifact(&self) -> Result<(PathBuf, u64)> {
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

/// Fails unless the tools of `fmt`'s reference build are installed.
pub fn check_tools(fmt: Fmt) -> Result<()> {
    let (tools, packages): (&[&str], &str) = match fmt {
        Fmt::Deb => (&["dpkg-deb", "cp"], "dpkg"),
        Fmt::Rpm => (&["rpmbuild", "cp"], "rpm"),
        Fmt::Arch => (&["bsdtar", "zstd", "bash", "cp"], "libarchive-tools zstd"),
        Fmt::Tar => (&["tar", "gzip", "bash", "cp"], "tar gzip"),
    };
    for tool in tools {
        if which(tool).is_none() {
            bail!(
                "`{tool}` is missing for the {} reference: apt-get install {packages}",
                fmt.name()
            );
        }
    }
    Ok(())
}

/// Prepares `dir` for `fmt`'s reference build of the DKMS source `src`
/// and returns the timed job, which writes below `out/ref-<fmt>`.
pub fn stage(fmt: Fmt, src: &Path, dir: &Path, out: &Path) -> Result<Job> {
    let _ = std::fs::remove_dir_all(dir);
    let pkg = dir.join("pkg");
    let prefix = dkms::source_dir(MODULE, VERSION);
    let out_dir = out.join(format!("ref-{}", fmt.name()));
    let meta = meta();
    match fmt {
        Fmt::Deb => {
            link_copy(src, &pkg.join(&prefix))?;
            let level = match Compression::DEB {
                Compression::Xz(l) => l,
                other => bail!(
                    "the deb writer now uses {other:?}; teach bench package its dpkg-deb flags"
                ),
            };
            let doc = pkg.join(format!("usr/share/doc/{}", meta.name));
            write(&doc.join("copyright"), deb::copyright(&meta)?)?;
            let changelog = deb::changelog(&meta, EPOCH);
            write(
                &doc.join("changelog.Debian.gz"),
                compress_bytes(Compression::Gzip(9), changelog.as_bytes())?,
            )?;
            if let Some(text) = deb::lintian_overrides(&meta) {
                write(
                    &pkg.join(format!("usr/share/lintian/overrides/{}", meta.name)),
                    text,
                )?;
            }
            let tree = FileTree::new()
                .add_dir_contents(&pkg.join("usr"), "usr")?
                .clone();
            let control = pkg.join("DEBIAN");
            let scripts = super::scripts()?.0;
            write(
                &control.join("control"),
                deb::control(&meta, &tree, &scripts),
            )?;
            write(&control.join("md5sums"), md5sums(&tree)?)?;
            write_script(&control.join("postinst"), &scripts.post_install)?;
            write_script(&control.join("prerm"), &scripts.pre_remove)?;
            let mut args: Vec<OsString> = vec![
                "--root-owner-group".into(),
                "-Zxz".into(),
                format!("-z{level}").into(),
                "--build".into(),
                pkg.clone().into(),
            ];
            args.push(
                out_dir
                    .join(crate::package::names::file_name(
                        crate::package::Format::Deb,
                        &meta,
                        Default::default(),
                    ))
                    .into(),
            );
            Ok(Job {
                tool: "dpkg-deb --build".into(),
                program: "dpkg-deb".into(),
                args,
                cwd: dir.to_path_buf(),
                out_dir,
            })
        }
        Fmt::Rpm => {
            let level = match Compression::RPM {
                Compression::Zstd(l) => l,
                other => bail!(
                    "the rpm writer now uses {other:?}; teach bench package its rpmbuild payload"
                ),
            };
            let copy = dir.join("src");
            link_copy(src, &copy)?;
            let spec = dir.join("bench.spec");
            write(&spec, spec_text(&copy, &super::scripts()?.1)?)?;
            let define = |k: &str, v: &str| -> [OsString; 2] {
                ["--define".into(), format!("{k} {v}").into()]
            };
            let mut args: Vec<OsString> = vec!["-bb".into(), "--quiet".into(), "--nodeps".into()];
            let top = dir.join("top");
            for (k, v) in [
                ("_topdir", top.display().to_string()),
                ("_rpmdir", out_dir.display().to_string()),
                // Same compressor and level as ours; all cores, as ours.
                ("_binary_payload", format!("w{level}T0.zstdio")),
                ("_build_id_links", "none".into()),
                ("debug_package", "%{nil}".into()),
                // No strip/compress passes: ours does none either.
                ("__spec_install_post", "%{nil}".into()),
                ("_buildhost", "rocm-patchkit".into()),
            ] {
                args.extend(define(k, &v));
            }
            args.push(spec.into());
            Ok(Job {
                tool: "rpmbuild -bb".into(),
                program: "rpmbuild".into(),
                args,
                cwd: dir.to_path_buf(),
                out_dir,
            })
        }
        Fmt::Arch => {
            let level = match Compression::ARCH {
                Compression::Zstd(l) => l,
                other => {
                    bail!("the Arch writer now uses {other:?}; teach bench package its zstd flags")
                }
            };
            link_copy(src, &pkg.join(&prefix))?;
            let tree = FileTree::from_dir(src, &prefix)?;
            write(&pkg.join(".PKGINFO"), arch::pkginfo(&meta, &tree, EPOCH))?;
            write(&pkg.join(".BUILDINFO"), arch::buildinfo(&meta, None, EPOCH))?;
            // makepkg's create_package, as root may not run makepkg: the
            // .MTREE pass (digests of every file), then tar | zstd.
            let script = format!(
                "bsdtar -czf .MTREE --format=mtree \
                 --options='!all,use-set,type,uid,gid,mode,time,size,md5,sha256,link' \
                 .BUILDINFO .PKGINFO usr && \
                 {{ printf '%s\\0' .BUILDINFO .MTREE .PKGINFO; find usr -print0 | LC_ALL=C sort -z; }} \
                 | bsdtar --uid 0 --gid 0 --uname root --gname root -cnf - --null --files-from - \
                 | zstd -{level} -T0 -q -c > \"$1\""
            );
            Ok(shell_job(
                "makepkg steps (bsdtar | zstd)",
                script,
                out_dir.join(crate::package::names::file_name(
                    crate::package::Format::Arch,
                    &meta,
                    Default::default(),
                )),
                pkg,
                out_dir,
            ))
        }
        Fmt::Tar => {
            let level = match Compression::TARBALL {
                Compression::Gzip(l) => l,
                other => {
                    bail!("the tarball writer now uses {other:?}; teach bench package its flags")
                }
            };
            link_copy(src, &pkg.join("dkms_source_tree"))?;
            std::fs::create_dir_all(pkg.join("dkms_main_tree"))
                .with_context(|| format!("creating {}", pkg.display()))?;
            let script = format!(
                "tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@{EPOCH} -c . \
                 | gzip -n -{level} > \"$1\""
            );
            Ok(shell_job(
                "tar | gzip",
                script,
                out_dir.join(crate::package::names::dkms_tarball(MODULE, VERSION)),
                pkg,
                out_dir,
            ))
        }
    }
}

/// Fails unless our package and the reference tool's hold the same
/// paths (the generated metadata files of each format aside).
pub fn same_entries(fmt: Fmt, ours: &Path, reference: &Path) -> Result<()> {
    let (a, b) = (entries(fmt, ours)?, entries(fmt, reference)?);
    if a != b {
        let only_ours: Vec<_> = a.difference(&b).take(5).collect();
        let only_ref: Vec<_> = b.difference(&a).take(5).collect();
        bail!(
            "the {} packages differ: only ours has {only_ours:?}, only the reference has {only_ref:?}",
            fmt.name()
        );
    }
    Ok(())
}

fn entries(fmt: Fmt, package: &Path) -> Result<std::collections::BTreeSet<String>> {
    let list = match fmt {
        Fmt::Deb => "dpkg-deb --fsys-tarfile \"$1\" | tar -t",
        Fmt::Rpm => "rpm -qpl --nosignature \"$1\"",
        Fmt::Arch | Fmt::Tar => "bsdtar -tf \"$1\"",
    };
    let out = Command::new("bash")
        .args(["-o", "pipefail", "-c", list, "bash"])
        .arg(package)
        .output()
        .with_context(|| format!("listing {}", package.display()))?;
    if !out.status.success() {
        bail!(
            "listing {} failed: {}",
            package.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").trim_matches('/').to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('.'))
        .collect())
}

fn shell_job(tool: &str, script: String, dest: PathBuf, cwd: PathBuf, out_dir: PathBuf) -> Job {
    Job {
        tool: tool.into(),
        program: "bash".into(),
        args: vec![
            "-o".into(),
            "pipefail".into(),
            "-c".into(),
            script.into(),
            "bash".into(),
            dest.into(),
        ],
        cwd,
        out_dir,
    }
}

/// A spec whose `%install` hard-links the staged copy into the buildroot.
fn spec_text(copy: &Path, scripts: &Scripts) -> Result<String> {
    let meta = meta();
    let copy = copy
        .to_str()
        .context("the bench work directory is not UTF-8")?;
    if copy.contains(['\'', '%']) {
        bail!("{copy} holds ' or %, which the spec cannot carry; move the work directory");
    }
    // "Thu, 02 Jan 2025 ..." -> "Thu Jan 02 2025"
    let date = rfc2822(EPOCH);
    let p: Vec<&str> = date.split([' ', ',']).filter(|s| !s.is_empty()).collect();
    let mut s = format!(
        "Name: {name}\nVersion: {VERSION}\nRelease: {rel}\nSummary: {summary}\nLicense: {license}\n\
         {url}BuildArch: noarch\nRequires: dkms\nAutoReqProv: no\n\n\
         %description\n{desc}\n\n\
         %install\nmkdir -p %{{buildroot}}/usr/src\ncp -al '{copy}' %{{buildroot}}/{dir}\n\n",
        name = meta.name,
        rel = meta.release,
        summary = meta.summary,
        license = meta.license,
        url = meta
            .homepage
            .as_ref()
            .map(|h| format!("URL: {h}\n"))
            .unwrap_or_default(),
        desc = meta.description,
        dir = dkms::source_dir(MODULE, VERSION),
    );
    if let Some(post) = &scripts.post_install {
        s.push_str(&format!("%post\n{post}\n"));
    }
    if let Some(preun) = &scripts.pre_remove {
        s.push_str(&format!("%preun\n{preun}\n"));
    }
    s.push_str(&format!(
        "%files\n/{}\n\n%changelog\n* {} {} {} {} {} - {VERSION}-{}\n- {}\n",
        dkms::source_dir(MODULE, VERSION),
        p[0],
        p[2],
        p[1],
        p[3],
        meta.maintainer,
        meta.release,
        meta.changes.join("\n- ")
    ));
    Ok(s)
}

/// `md5sums` as dh_md5sums writes it.
fn md5sums(tree: &FileTree) -> Result<String> {
    let mut out = String::new();
    for e in tree.entries() {
        if let Kind::File(_) = e.kind {
            let (_, d) = copy_hashed(
                &mut e.open()?,
                &mut std::io::sink(),
                Want {
                    md5: true,
                    sha256: false,
                },
            )
            .with_context(|| format!("hashing {}", e.origin()))?;
            out.push_str(&format!(
                "{}  {}\n",
                hex::encode(d.md5.unwrap_or_default()),
                e.path
            ));
        }
    }
    Ok(out)
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let mut f =
        std::fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes.as_ref())
        .with_context(|| format!("writing {}", path.display()))
}

fn write_script(path: &Path, text: &Option<String>) -> Result<()> {
    if let Some(text) = text {
        write(path, text)?;
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(path, mode)
            .with_context(|| format!("setting the mode of {}", path.display()))?;
    }
    Ok(())
}

/// `cp -al` (hard links: cheap, same content), or `cp -a` across file systems.
fn link_copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if run_ok(Command::new("cp").arg("-al").arg(from).arg(to)).is_ok() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(to);
    run_ok(Command::new("cp").arg("-a").arg(from).arg(to))
}
