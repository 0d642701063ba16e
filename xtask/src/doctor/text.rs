//! The text of a doctor [`Report`]: the machine as read, each known fault
//! with why and the next steps, the knobs set, what could not be read, and
//! the closing line. Renders only; decides nothing.

use super::advice::{self, Advice};
use super::knob_verdicts::{self, KnobReport};
use super::machine::Machine;
use super::module::TrapHandler;
use super::pid::Process;
use super::{FaultReport, Report, Status};
use crate::invocation::Invocation;
use crate::knowledge::Severity;

impl Report {
    /// The report, its commands starting with the program `inv` names.
    pub fn to_text(&self, inv: &Invocation) -> String {
        let m = &self.machine;
        let mut out = format!("machine (read below {})\n", m.root.display());
        kernel_side(&mut out, m);
        libraries(&mut out, m);
        if let Some(p) = &m.process {
            process(&mut out, p);
        }
        dkms_and_env(&mut out, m);
        for (key, text) in m.access.lines() {
            line(&mut out, key, text);
        }
        for fw in &m.firmware {
            line(&mut out, "firmware", fw.describe());
        }
        out.push_str("\nknown faults\n");
        for f in &self.faults {
            fault(&mut out, f, m, inv);
        }
        if !self.knobs.is_empty() || !m.knob_notes.is_empty() {
            out.push_str("\nknobs set (environment, /etc/modprobe.d, kernel command line, amdgpu parameters)\n");
        }
        for k in &self.knobs {
            knob(&mut out, k);
        }
        for note in &m.knob_notes {
            out.push_str(&wrapped("note", note));
        }
        out.push_str(&self.logs.to_text());
        if let Some(advice) = m.secure_boot.advice() {
            out.push('\n');
            out.push_str(&wrapped("note", &advice));
        }
        if !m.unread.is_empty() {
            out.push_str("\ncould not read\n");
            for u in &m.unread {
                out.push_str(&format!("  {}: {}\n", u.path, u.why));
            }
        }
        out.push('\n');
        out.push_str(&self.closing_line());
        out
    }

    /// How many known faults affect the machine, and which.
    fn closing_line(&self) -> String {
        let affected = self.affected();
        let unknown: Vec<&str> = self
            .faults
            .iter()
            .filter(|f| f.severity == Severity::Fault && f.verdict.status == Status::CannotTell)
            .map(|f| f.id.as_str())
            .collect();
        match affected.len() {
            0 if !unknown.is_empty() => format!(
                "no known fault affects this machine unmitigated that doctor could judge; cannot tell: {} (see above)\n",
                unknown.join(", ")
            ),
            0 => "no known fault affects this machine unmitigated\n".to_owned(),
            n => format!(
                "{n} known fault{} affect{} this machine: {} (exit status 3)\n",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" },
                affected
                    .iter()
                    .map(|f| f.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// One `  key        value` line of the machine section.
fn line(out: &mut String, key: &str, value: String) {
    out.push_str(&format!("  {key:<11}{value}\n"));
}

/// The GPUs, the kernel and its amdgpu, Secure Boot and the KFD ABI.
fn kernel_side(out: &mut String, m: &Machine) {
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
    line(out, "GPU", gpus);
    line(out, "kernel", or_unread(&m.kernel_release));
    let cmdline = m.cmdline.as_deref().map(|c| {
        match c
            .split_whitespace()
            .find(|w| w.starts_with("amdgpu.cwsr_enable="))
        {
            Some(w) => w.to_owned(),
            None => "no amdgpu.cwsr_enable".to_owned(),
        }
    });
    line(out, "cmdline", or_unread(&cmdline));
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
    line(out, "amdgpu", amdgpu);
    if let Some(file) = &m.amdgpu_file {
        let label = match file.trap_handler {
            TrapHandler::Fixed => "fixed",
            TrapHandler::Unfixed => "unfixed",
            TrapHandler::NoGfx12 => "no gfx12 trap handler",
            TrapHandler::CannotTell => "cannot tell",
        };
        line(out, "module", format!("{} ({label})", file.path));
    }
    line(out, "SecureBoot", m.secure_boot.describe());
    let kfd = m.kfd_abi.map_or(
        "not read: judged from the kernel version".to_owned(),
        |(a, b)| format!("{a}.{b} (from /dev/kfd)"),
    );
    line(out, "KFD ABI", kfd);
}

/// ROCm and the libraries found: hipBLASLt (each judged), rocBLAS and
/// hipSPARSELt, ours, MIOpen and comgr.
fn libraries(out: &mut String, m: &Machine) {
    line(out, "ROCm", or_unread(&m.rocm_version));
    let hipblaslt = match (&m.hipblaslt_version, &m.hipblaslt_from) {
        (Some(v), Some(from)) => format!("{v} ({from})"),
        _ => "could not read".to_owned(),
    };
    line(out, "hipBLASLt", hipblaslt);
    for lib in &m.hipblaslt_libraries {
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
        line(
            out,
            "library",
            format!("{} ({})", one_line(&lib.path), notes.join(", ")),
        );
        line(out, "", format!("  kernels {}", lib.kernels));
        line(out, "", format!("  {}", lib.judgement.describe()));
    }
    for lib in &m.tensile_libraries {
        let version = lib.version.as_deref().unwrap_or("no version");
        line(
            out,
            "tensile",
            format!("{} ({}, {version})", lib.path, lib.kind),
        );
        line(out, "", format!("  kernels {}", lib.kernels));
        line(out, "", format!("  {}", lib.judgement.describe()));
    }
    for prefix in &m.patched_hipblaslt {
        line(
            out,
            "patched",
            format!("{prefix} (ours, used with LD_LIBRARY_PATH={prefix}/lib)"),
        );
    }
    line(
        out,
        "MIOpen",
        m.miopen.clone().unwrap_or("not found".to_owned()),
    );
    let comgr = match &m.comgr {
        Some(c) => format!("{} {} ({})", c.package, c.version, c.from),
        None => "not found".to_owned(),
    };
    line(out, "comgr", comgr);
}

/// The running program of `--pid`: what it maps and the GPU nodes it holds.
fn process(out: &mut String, p: &Process) {
    let exe = p.exe.as_deref().unwrap_or("program not readable");
    line(out, "process", format!("{} ({exe})", p.pid));
    if p.root != "/" {
        line(
            out,
            "",
            format!("  its files read through {} (its own root)", p.root),
        );
    }
    for (family, files) in &p.libraries {
        for file in files {
            let deleted = if file.deleted {
                " (deleted since it was mapped: the file now at this path is not the one in use)"
            } else {
                ""
            };
            line(
                out,
                "",
                format!("  maps {family}: {}{deleted}", one_line(&file.to_string())),
            );
        }
    }
    if p.libraries.is_empty() && !p.unread.iter().any(|u| u.contains("/maps:")) {
        line(
            out,
            "",
            "  maps no ROCm library (hipBLASLt, HIP, comgr, rocBLAS)".to_owned(),
        );
    }
    let nodes = if p.gpu_nodes.is_empty() {
        "none open".to_owned()
    } else {
        p.gpu_nodes.join(", ")
    };
    line(out, "", format!("  GPU nodes {nodes}"));
    for u in &p.unread {
        line(out, "", format!("  could not read {u}"));
    }
}

/// A path on one line: a newline or tab of a file name shown escaped.
fn one_line(path: &str) -> String {
    path.replace('\n', "\\x0a").replace('\t', "\\x09")
}

/// The DKMS packages registered, then the workaround variables set.
fn dkms_and_env(out: &mut String, m: &Machine) {
    if m.dkms.is_empty() {
        line(out, "DKMS", "none registered".to_owned());
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
            out,
            key,
            format!("{} {} ({})", p.name, p.version, notes.join(", ")),
        );
    }
    for (k, v) in &m.env {
        line(out, "env", format!("{k}={v}"));
    }
}

/// One known fault: its verdict, why, the next steps, and what it is and
/// where to read more when it matters here.
fn fault(out: &mut String, f: &FaultReport, m: &Machine, inv: &Invocation) {
    out.push_str(&format!(
        "\n{:<13} {}: {}\n",
        f.verdict.status.label(f.severity),
        f.id,
        f.title
    ));
    out.push_str(&wrapped("why", &f.verdict.why));
    let cx = advice::Context {
        inv,
        os: m.os.as_ref(),
    };
    for a in advice::advise(&f.verdict.next, cx) {
        next_step(out, &a);
    }
    if matches!(f.verdict.status, Status::Affected | Status::Mitigated) {
        out.push_str(&wrapped("what", &f.summary));
    }
    let worth_links = match f.verdict.status {
        Status::Affected | Status::Mitigated => true,
        Status::CannotTell => m.gpus.is_some(),
        Status::NotAffected | Status::Fixed => false,
    };
    if worth_links {
        for (i, link) in f.links.iter().enumerate() {
            let key = if i == 0 { "see" } else { "" };
            out.push_str(&format!("  {key:<6}{link}\n"));
        }
    }
}

/// One next step: its role as the key (`next` for the one to do first),
/// its text and cost, then each command on a line of its own.
fn next_step(out: &mut String, a: &Advice) {
    let key = match a.role {
        "do" => "next",
        "note" => "",
        role => role,
    };
    let text = match &a.cost {
        Some(cost) => format!("{} (cost: {cost})", a.text),
        None => a.text.clone(),
    };
    out.push_str(&wrapped(key, &text));
    for c in &a.commands {
        out.push_str(&format!("          {}\n", c.shown()));
    }
}

/// One knob set: its value and source, its judgement, and for a knob that
/// acts here, why, its cost and a link.
fn knob(out: &mut String, k: &KnobReport) {
    let s = &k.setting;
    let effect = s
        .in_effect
        .as_ref()
        .filter(|v| **v != s.value)
        .map_or(String::new(), |v| format!(", {v} in effect"));
    let head = format!("{}={} ({}{effect})", s.name, s.value, s.from);
    match k.judgement {
        knob_verdicts::Judgement::NoEffect | knob_verdicts::Judgement::NoKnownEffect => {
            out.push_str(&format!("  {head}: {}\n", k.judgement.label()));
        }
        _ => {
            let on = k.fault.as_ref().map_or(String::new(), |f| format!(" {f}"));
            out.push_str(&format!("  {head}: {}{on}\n", k.judgement.label()));
            out.push_str(&wrapped("why", &k.why));
            if let Some(cost) = &k.cost {
                out.push_str(&wrapped("cost", cost));
            }
            if let Some(link) = k.links.first() {
                out.push_str(&format!("  {:<6}{link}\n", "see"));
            }
        }
    }
}

/// `  key   text`, the text wrapped at 100 columns under itself.
fn wrapped(key: &str, text: &str) -> String {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line");
        if !line.is_empty() && line.len() + 1 + word.len() > 92 {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let key = if i == 0 { key } else { "" };
        out.push_str(&format!("  {key:<6}{line}\n"));
    }
    out
}

fn or_unread(value: &Option<String>) -> String {
    value.clone().unwrap_or_else(|| "could not read".to_owned())
}
