//! The machine section of doctor's text report, and what it lets the rest
//! of the report say shorter: each library numbered (`[1]`) so a verdict
//! names it instead of repeating its path, its kernel files named below
//! its kernel folder, and the things it could not read that a line here
//! already says (so the closing "could not read" list does not say them
//! again). Renders only; decides nothing.

use std::collections::BTreeSet;

use super::fsread::Unread;
use super::hipblaslt::HipblasltLibrary;
use super::machine::Machine;
use super::module::TrapHandler;
use super::page::Page;
use super::pid::Process;

/// What the machine section printed, for the rest of the report.
#[derive(Debug, Default)]
pub(crate) struct Shown {
    /// Long text printed once in the machine section and what stands for
    /// it in the verdicts (longest first).
    refs: Vec<(String, String)>,
    /// The unread paths a machine line already explained.
    said: BTreeSet<String>,
}

impl Shown {
    /// `text` with every path the machine section printed replaced by
    /// its reference. Never used on a command, which must run as printed.
    pub(crate) fn refer(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (long, short) in &self.refs {
            out = replace_path(&out, long, short);
        }
        out
    }

    /// What could not be read and no machine line has said yet.
    pub(crate) fn unsaid<'u>(&self, unread: &'u [Unread]) -> Vec<&'u Unread> {
        unread
            .iter()
            .filter(|u| !self.said.contains(&u.path))
            .collect()
    }

    /// The unread entry whose path starts with `prefix`, marked as said.
    fn say<'u>(&mut self, m: &'u Machine, prefix: &str) -> Option<&'u Unread> {
        let u = m.unread.iter().find(|u| u.path.starts_with(prefix))?;
        self.said.insert(u.path.clone());
        Some(u)
    }
}

/// `text` with `long` replaced by `short` where it stands as a whole path
/// (not followed by more of a file name).
fn replace_path(text: &str, long: &str, short: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(long) {
        let after = &rest[at + long.len()..];
        let whole = !after.starts_with(|c: char| c.is_alphanumeric() || "/_-.".contains(c))
            || after.starts_with(". ")
            || after == ".";
        out.push_str(&rest[..at]);
        out.push_str(if whole { short } else { long });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// One `  key        value` line.
fn line(page: &mut Page, key: &str, value: &str) {
    page.row(format!("  {key:<11}"), value);
}

/// A line under the one before, two columns further in.
fn sub(page: &mut Page, value: &str) {
    page.row(" ".repeat(15), value);
}

/// The machine section.
pub(crate) fn machine(page: &mut Page, m: &Machine) -> Shown {
    let mut shown = Shown::default();
    page.heading(&format!("machine (read below {})", m.root.display()));
    kernel_side(page, m, &mut shown);
    libraries(page, m, &mut shown);
    if let Some(p) = &m.process {
        process(page, p);
    }
    dkms_and_env(page, m, &mut shown);
    for (key, text) in m.access.lines() {
        line(page, key, &text);
    }
    for fw in &m.firmware {
        line(page, "firmware", &fw.describe());
    }
    shown
        .refs
        .sort_by_key(|(long, _)| std::cmp::Reverse(long.len()));
    shown
}

/// The GPUs, the kernel and its amdgpu, Secure Boot and the KFD ABI.
fn kernel_side(page: &mut Page, m: &Machine, shown: &mut Shown) {
    let gpus = match &m.gpus {
        None => "could not read (no AMD GPU found)".to_owned(),
        Some(g) if g.is_empty() => "none (no AMD GPU in the KFD topology)".to_owned(),
        Some(g) => g
            .iter()
            .map(|g| match g.device_id {
                Some(id) => format!("{} (KFD node {}, device 0x{id:04x})", g.gfx, g.node),
                None => format!("{} (KFD node {})", g.gfx, g.node),
            })
            .collect::<Vec<_>>()
            .join(", "),
    };
    line(page, "GPU", &gpus);
    line(page, "kernel", &or_unread(&m.kernel_release));
    let cmdline = m.cmdline.as_deref().map(|c| {
        match c
            .split_whitespace()
            .find(|w| w.starts_with("amdgpu.cwsr_enable="))
        {
            Some(w) => w.to_owned(),
            None => "no amdgpu.cwsr_enable".to_owned(),
        }
    });
    line(page, "cmdline", &or_unread(&cmdline));
    let amdgpu = match &m.amdgpu {
        None => "not loaded".to_owned(),
        Some(a) => {
            let cwsr = m.cwsr_enable.map_or("cwsr_enable unread".to_owned(), |c| {
                format!("cwsr_enable={c}")
            });
            let version = match &a.version {
                Some(v) => format!("module version {v}"),
                None => "no module version (the kernel's own module)".to_owned(),
            };
            format!("loaded, {cwsr}, {version}")
        }
    };
    line(page, "amdgpu", &amdgpu);
    if let Some(file) = &m.amdgpu_file {
        let label = match file.trap_handler {
            TrapHandler::Fixed => "fixed",
            TrapHandler::Unfixed => "unfixed",
            TrapHandler::NoGfx12 => "no gfx12 trap handler",
            TrapHandler::CannotTell => "cannot tell",
        };
        line(page, "module", &format!("{} ({label})", file.path));
        shown
            .refs
            .push((file.path.clone(), "the module above".to_owned()));
    }
    line(page, "SecureBoot", &m.secure_boot.describe());
    let kfd = match (m.kfd_abi, shown.say(m, "/dev/kfd")) {
        (Some((a, b)), _) => format!("{a}.{b} (from /dev/kfd)"),
        (None, Some(u)) => format!(
            "judged from the kernel version (/dev/kfd: {})",
            first(&u.why)
        ),
        (None, None) => "not read: judged from the kernel version".to_owned(),
    };
    line(page, "KFD ABI", &kfd);
}

/// ROCm and the libraries found: hipBLASLt (each judged), rocBLAS and
/// hipSPARSELt, ours, MIOpen and comgr.
fn libraries(page: &mut Page, m: &Machine, shown: &mut Shown) {
    let found = !m.hipblaslt_libraries.is_empty() || !m.tensile_libraries.is_empty();
    let rocm = match (&m.rocm_version, shown.say(m, "/opt/rocm/.info/version")) {
        (Some(v), _) => v.clone(),
        (None, Some(u)) => format!("none in /opt/rocm (/opt/rocm/.info/version: {})", u.why),
        (None, None) => "could not read".to_owned(),
    };
    line(page, "ROCm", &rocm);
    match (&m.hipblaslt_version, &m.hipblaslt_from) {
        (Some(v), Some(from)) => line(page, "hipBLASLt", &format!("{v} ({from})")),
        _ if found => {}
        _ => match shown.say(m, "/opt/rocm/lib/libhipblaslt") {
            Some(u) => line(
                page,
                "hipBLASLt",
                &format!("none found ({}: {})", u.path, u.why),
            ),
            None => line(page, "hipBLASLt", "none found"),
        },
    }
    let mut n = 0;
    for lib in &m.hipblaslt_libraries {
        n += 1;
        library(page, "library", n, lib, shown);
    }
    for lib in &m.tensile_libraries {
        n += 1;
        library(page, "tensile", n, lib, shown);
    }
    for prefix in &m.patched_hipblaslt {
        line(
            page,
            "patched",
            &format!("{prefix} (ours, used with LD_LIBRARY_PATH={prefix}/lib)"),
        );
    }
    let miopen = match (&m.miopen, shown.say(m, "/opt/rocm/lib/libMIOpen")) {
        (Some(v), _) => v.clone(),
        (None, Some(u)) => format!("not found ({}: {})", u.path, u.why),
        (None, None) => "not found".to_owned(),
    };
    line(page, "MIOpen", &miopen);
    let comgr = match &m.comgr {
        Some(c) => format!("{} {} ({})", c.package, c.version, c.from),
        None => "not found".to_owned(),
    };
    line(page, "comgr", &comgr);
}

/// One library, `[n]`: its path and notes, its kernel folder (beside it
/// when it is), and its judgement naming its kernel file by name.
fn library(page: &mut Page, key: &str, n: usize, lib: &HipblasltLibrary, shown: &mut Shown) {
    let mut notes = vec![lib.kind.to_string()];
    notes.extend(lib.version.clone());
    notes.extend(lib.rocm.as_ref().map(|r| format!("ROCm {}", r.version)));
    if let Some(prefix) = &lib.ours {
        notes.push(format!("patched: loads ours from {prefix}"));
    }
    if let Some(rewritten) = &lib.rewritten {
        notes.push(format!("patched: {rewritten}"));
    }
    if let Some(why) = &lib.record_refused {
        notes.push(format!("not patched: {why}"));
    }
    line(page, key, &format!("[{n}] {}", notes.join(", ")));
    sub(page, &one_line(&lib.path));
    let dir = lib.path.rsplit_once('/').map_or("", |(d, _)| d);
    let kernels = match lib
        .kernels
        .strip_prefix(dir)
        .and_then(|k| k.strip_prefix('/'))
    {
        Some(rel) if !dir.is_empty() => format!("{rel}/ beside it"),
        _ => lib.kernels.clone(),
    };
    sub(page, &format!("kernels in {kernels}"));
    let judged = lib.judgement.describe();
    let short = judged.replace(&format!("{}/", lib.kernels), "");
    sub(page, &short);
    let name = format!("[{n}]");
    shown.refs.push((judged, "see above".to_owned()));
    shown
        .refs
        .push((lib.kernels.clone(), format!("the kernels of {key} {name}")));
    shown.refs.push((lib.path.clone(), format!("{key} {name}")));
    if !dir.is_empty() {
        shown
            .refs
            .push((dir.to_owned(), format!("the folder of {key} {name}")));
    }
}

/// The running program of `--pid`: what it maps and the GPU nodes it holds.
fn process(page: &mut Page, p: &Process) {
    let exe = p.exe.as_deref().unwrap_or("program not readable");
    line(page, "process", &format!("{} ({exe})", p.pid));
    if p.root != "/" {
        sub(
            page,
            &format!("its files read through {} (its own root)", p.root),
        );
    }
    for (family, files) in &p.libraries {
        for file in files {
            let deleted = if file.deleted {
                " (deleted since it was mapped: the file now at this path is not the one in use)"
            } else {
                ""
            };
            sub(
                page,
                &format!("maps {family}: {}{deleted}", one_line(&file.to_string())),
            );
        }
    }
    if p.libraries.is_empty() && !p.unread.iter().any(|u| u.contains("/maps:")) {
        sub(
            page,
            "maps no ROCm library (hipBLASLt, HIP, comgr, rocBLAS)",
        );
    }
    let nodes = if p.gpu_nodes.is_empty() {
        "none open".to_owned()
    } else {
        p.gpu_nodes.join(", ")
    };
    sub(page, &format!("GPU nodes {nodes}"));
    for u in &p.unread {
        sub(page, &format!("could not read {u}"));
    }
}

/// A path on one line: a newline or tab of a file name shown escaped.
fn one_line(path: &str) -> String {
    path.replace('\n', "\\x0a").replace('\t', "\\x09")
}

/// The DKMS packages registered, then the workaround variables set.
fn dkms_and_env(page: &mut Page, m: &Machine, shown: &mut Shown) {
    if m.dkms.is_empty() {
        match shown.say(m, "/var/lib/dkms") {
            Some(u) => line(
                page,
                "DKMS",
                &format!("none registered (/var/lib/dkms: {})", first(&u.why)),
            ),
            None => line(page, "DKMS", "none registered"),
        }
    }
    for (i, p) in m.dkms.iter().enumerate() {
        let mut notes = vec![if p.ours { "ours" } else { "not ours" }.to_owned()];
        if !p.built_for.is_empty() {
            notes.push(format!("built for {}", p.built_for.join(", ")));
        }
        if let Some(by) = &p.loaded_by {
            notes.push(format!("loaded, told by {by}"));
        }
        let key = if i == 0 { "DKMS" } else { "" };
        line(
            page,
            key,
            &format!("{} {} ({})", p.name, p.version, notes.join(", ")),
        );
    }
    for (k, v) in &m.env {
        line(page, "env", &format!("{k}={v}"));
    }
}

/// The first clause of a reason (`does not exist` of `does not exist: no
/// DKMS modules`) where the line says the rest.
fn first(why: &str) -> &str {
    why.split(": ").next().unwrap_or(why)
}

fn or_unread(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "could not read".to_owned())
}

#[cfg(test)]
mod tests {
    use super::replace_path;

    #[test]
    fn a_path_is_replaced_only_where_it_stands_whole() {
        let t = "/a/lib switches it on; /a/lib/x.co; /a/library; in /a/lib.";
        assert_eq!(
            replace_path(t, "/a/lib", "[1]"),
            "[1] switches it on; /a/lib/x.co; /a/library; in [1]."
        );
    }
}
