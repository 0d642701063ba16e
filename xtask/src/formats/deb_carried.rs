//! A `.deb` that takes the place of an upstream binary package (a rewrite
//! recipe's output): the upstream control members carried (`control` with
//! its fields in their order, `shlibs`, `triggers`, maintainer scripts),
//! only `Version`, `Installed-Size` and a paragraph of `Description`
//! changed, `md5sums` made again from the files shipped; the data is the
//! tree as given (no generated `copyright` or changelog: the upstream ones
//! are in it). The same ar, tar and compression as [`super::deb`].

use std::path::Path;

use anyhow::{bail, Result};

use super::deb::{control_members_tar, Data};
pub(crate) use super::format::Carried;
use super::packing::Packing;
use super::tree::FileTree;
use super::{names, Artifact, Format, Package};

/// Writes `<out_dir>/<name>_<version>_<arch>.deb`.
pub(crate) fn write(
    pkg: &Package,
    carried: &Carried,
    out_dir: &Path,
    packing: &Packing,
) -> Result<Artifact> {
    let (meta, machine, tree, epoch) = (pkg.meta, pkg.machine, pkg.tree, pkg.epoch);
    let file_name = names::file_name(Format::Deb, meta, machine);
    let data = Data::write(tree, epoch, packing, out_dir)?;
    let control = control(
        &carried.control,
        &meta.full_version(),
        installed_size(tree, carried),
    )?;
    let mut members: Vec<(String, u32, Vec<u8>)> = carried.members.clone();
    members.push(("control".to_owned(), 0o644, control.into_bytes()));
    members.push((
        "md5sums".to_owned(),
        0o644,
        data.md5sums.clone().into_bytes(),
    ));
    let control_tar = control_members_tar(members, epoch, packing)?;
    data.into_deb(out_dir, &file_name, epoch, &control_tar)
}

/// Installed-Size of the tree with the upstream control members.
fn installed_size(tree: &FileTree, carried: &Carried) -> u64 {
    super::deb::installed_size(tree, carried.members.iter().map(|(_, _, b)| b.as_slice()))
}

/// The paragraph the description gains, saying what changed.
pub(crate) const DESCRIPTION_NOTE: &str = " .\n This build is the distribution's package with its gfx12 (RDNA4) GPU kernel\n files rewritten by rocm-patchkit so that they never switch expert\n scheduling mode on (the effect of upstream rocm-libraries commit 29b74681),\n avoiding the GPU page faults of kernels whose CWSR trap handler does not\n save that mode. Nothing else differs.";

/// The upstream `control` with `Version`, `Installed-Size` replaced and
/// [`DESCRIPTION_NOTE`] added to `Description`; every other field as it was,
/// in its place.
pub(crate) fn control(upstream: &str, version: &str, installed_kib: u64) -> Result<String> {
    let mut out = String::with_capacity(upstream.len() + DESCRIPTION_NOTE.len() + 64);
    let mut fields = 0;
    let mut in_description = false;
    let mut seen = (false, false, false);
    let finish_description = |out: &mut String, in_description: &mut bool| {
        if *in_description {
            out.push_str(DESCRIPTION_NOTE);
            out.push('\n');
            *in_description = false;
        }
    };
    for line in upstream.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if fields == 0 {
                bail!("the control file begins with a continuation line");
            }
            out.push_str(line);
            out.push('\n');
            continue;
        }
        finish_description(&mut out, &mut in_description);
        let Some((name, _)) = line.split_once(':') else {
            bail!("control line `{line}` is not `Field: value`");
        };
        fields += 1;
        match name.to_ascii_lowercase().as_str() {
            "version" => {
                out.push_str(&format!("Version: {version}\n"));
                seen.0 = true;
            }
            "installed-size" => {
                out.push_str(&format!("Installed-Size: {installed_kib}\n"));
                seen.1 = true;
            }
            "description" => {
                out.push_str(line);
                out.push('\n');
                in_description = true;
                seen.2 = true;
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    finish_description(&mut out, &mut in_description);
    if !(seen.0 && seen.2) {
        bail!("the control file has no `Version` or no `Description` field");
    }
    if !seen.1 {
        out.push_str(&format!("Installed-Size: {installed_kib}\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_keeps_fields_and_changes_three() {
        let up = "Package: libx1\nVersion: 1.0-4\nInstalled-Size: 10\nDepends: libc6 (>= 2.38)\nDescription: a library\n  long text\n .\n more\nHomepage: https://example.org\n";
        let got = control(up, "1.0-4+patchkit1", 12).unwrap();
        assert!(got.starts_with("Package: libx1\nVersion: 1.0-4+patchkit1\nInstalled-Size: 12\nDepends: libc6 (>= 2.38)\nDescription: a library\n  long text\n .\n more\n .\n This build"), "{got}");
        assert!(
            got.ends_with("Nothing else differs.\nHomepage: https://example.org\n"),
            "{got}"
        );
        assert!(control("Package: x\n", "1", 1).is_err());
    }
}
