//! The text of a doctor [`Report`]: the machine as read, each known fault
//! with why and the next steps, the knobs set, what could not be read, and
//! the closing line; or with `-q` the verdicts alone. Laid out by
//! [`Page`] for the [`Layout`] the command passes. Renders only; decides
//! nothing.

use super::advice::{self, Advice};
use super::knob_verdicts::{self, KnobReport};
use super::machine::Machine;
use super::page::{Layout, Page, Paint};
use super::text_machine::{self, Shown};
use super::{FaultReport, Report, Status};
use crate::input::invocation::Invocation;
use crate::input::knowledge::Severity;
use crate::shared::report::Styled;

impl Report {
    /// The report, its commands starting with the program `inv` names.
    pub(crate) fn to_text(&self, inv: &Invocation, layout: Layout) -> Styled {
        let m = &self.machine;
        let mut page = Page::default();
        let shown = text_machine::machine(&mut page, m);
        page.blank();
        page.heading("known faults");
        for f in &self.faults {
            fault(&mut page, f, m, inv, &shown);
        }
        if !self.knobs.is_empty() || !m.knob_notes.is_empty() {
            page.blank();
            page.heading(
                "knobs set (environment, /etc/modprobe.d, kernel command line, amdgpu parameters)",
            );
        }
        for k in &self.knobs {
            knob(&mut page, k, &shown);
        }
        for note in &m.knob_notes {
            page.row(key("note"), &shown.refer(note));
        }
        page.block(&self.logs.to_text());
        if let Some(advice) = m.secure_boot.advice() {
            page.blank();
            page.row(key("note"), &advice);
        }
        let unread = shown.unsaid(&m.unread);
        if !unread.is_empty() {
            page.blank();
            page.heading("could not read");
            for u in unread {
                page.row("  - ".to_owned(), &format!("{}: {}", u.path, u.why));
            }
        }
        page.blank();
        self.closing(&mut page, false);
        page.render(layout)
    }

    /// `-q`: one line per known fault (its verdict and name, never
    /// wrapped), then the closing line.
    pub(crate) fn to_quiet_text(&self, layout: Layout) -> Styled {
        let mut page = Page::default();
        for f in &self.faults {
            page.line(
                format!("{:<13} ", f.verdict.status.label(f.severity)),
                status_paint(f),
                &f.id,
                Paint::Plain,
            );
        }
        self.closing(&mut page, true);
        page.render(layout)
    }

    /// The closing line: how many known faults affect the machine, and
    /// which; one line whatever its length with `-q`.
    fn closing(&self, page: &mut Page, quiet: bool) {
        let text = self.closing_line();
        let paint = match self.affected().is_empty() {
            true => Paint::Good,
            false => Paint::Bad,
        };
        match quiet {
            true => page.line(String::new(), Paint::Plain, &text, paint),
            false => page.keyed(String::new(), Paint::Plain, &text, paint),
        }
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
                "no known fault affects this machine unmitigated that doctor could judge; cannot tell: {} (see above)",
                unknown.join(", ")
            ),
            0 => "no known fault affects this machine unmitigated".to_owned(),
            n => format!(
                "{n} known fault{} affect{} this machine: {} (exit status 3)",
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

/// A status's colour.
fn status_paint(f: &FaultReport) -> Paint {
    match (f.verdict.status, f.severity) {
        (Status::Affected, Severity::Info) => Paint::Info,
        (Status::Affected, _) => Paint::Bad,
        (Status::CannotTell, _) => Paint::Unsure,
        (Status::NotAffected | Status::Fixed | Status::Mitigated, _) => Paint::Good,
    }
}

/// `  key   `: the lead of a fault's or a knob's line.
fn key(key: &str) -> String {
    format!("  {key:<6}")
}

/// One known fault: its verdict, why, the next steps, and what it is and
/// where to read more when it matters here. Paths the machine section
/// printed are referred to, never in a command.
fn fault(page: &mut Page, f: &FaultReport, m: &Machine, inv: &Invocation, shown: &Shown) {
    page.blank();
    page.keyed(
        format!("{:<13} ", f.verdict.status.label(f.severity)),
        status_paint(f),
        &format!("{}: {}", f.id, f.title),
        Paint::Plain,
    );
    page.row(key("why"), &shown.refer(&f.verdict.why));
    let cx = advice::Context {
        inv,
        os: m.os.as_ref(),
    };
    for a in advice::advise(&f.verdict.next, cx) {
        next_step(page, &a, shown);
    }
    if matches!(f.verdict.status, Status::Affected | Status::Mitigated) {
        page.row(key("what"), &f.summary);
    }
    let worth_links = match f.verdict.status {
        Status::Affected | Status::Mitigated => true,
        Status::CannotTell => m.gpus.is_some(),
        Status::NotAffected | Status::Fixed => false,
    };
    if worth_links {
        for (i, link) in f.links.iter().enumerate() {
            page.row(key(if i == 0 { "see" } else { "" }), link);
        }
    }
}

/// One next step: its role as the key (`next` for the one to do first),
/// its text and cost, then each command on a line of its own, as printed
/// to be run (no path referred to).
fn next_step(page: &mut Page, a: &Advice, shown: &Shown) {
    let (name, paint) = match a.role {
        "do" => ("next", Paint::Strong),
        "note" => ("", Paint::Plain),
        role => (role, Paint::Plain),
    };
    let text = match &a.cost {
        Some(cost) => format!("{} (cost: {cost})", a.text),
        None => a.text.clone(),
    };
    page.keyed(key(name), paint, &shown.refer(&text), Paint::Plain);
    for c in &a.commands {
        page.command(" ".repeat(10), &c.shown());
    }
}

/// One knob set: its value and source, its judgement, and for a knob that
/// acts here, why, its cost and a link.
fn knob(page: &mut Page, k: &KnobReport, shown: &Shown) {
    let s = &k.setting;
    let effect = s
        .in_effect
        .as_ref()
        .filter(|v| **v != s.value)
        .map_or(String::new(), |v| format!(", {v} in effect"));
    let head = format!("{}={} ({}{effect})", s.name, s.value, s.from);
    match k.judgement {
        knob_verdicts::Judgement::NoEffect | knob_verdicts::Judgement::NoKnownEffect => {
            page.row("  ".to_owned(), &format!("{head}: {}", k.judgement.label()));
        }
        _ => {
            let on = k.fault.as_ref().map_or(String::new(), |f| format!(" {f}"));
            page.row(
                "  ".to_owned(),
                &format!("{head}: {}{on}", k.judgement.label()),
            );
            page.row(key("why"), &shown.refer(&k.why));
            if let Some(cost) = &k.cost {
                page.row(key("cost"), cost);
            }
            if let Some(link) = k.links.first() {
                page.row(key("see"), link);
            }
        }
    }
}
