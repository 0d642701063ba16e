//! The layout of doctor's text report: rows of a lead (indent and key)
//! and a text, wrapped to a width with the continuation lines under the
//! text; a command cut with a shell's ` \` so that it still runs as
//! pasted; colour (a few SGR codes) added only after every text went
//! through `report::safe`, so text from outside never carries an escape.
//! Lays out only; decides nothing.

use crate::shared::report::Styled;

/// How the text report is laid out: the command decides (`COLUMNS`, the
/// terminal, `NO_COLOR`, `--color`) and passes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Columns a line may take; a single word longer than that (a path)
    /// stands alone on its line.
    pub(crate) width: usize,
    /// Whether to colour the statuses, headings and commands.
    pub(crate) colour: bool,
}

impl Layout {
    /// The width when nothing tells it (a pipe, a file, no `COLUMNS`).
    pub(crate) const DEFAULT_WIDTH: usize = 80;
    /// The narrowest width laid out: a key and a few words still fit.
    pub(crate) const MIN_WIDTH: usize = 40;

    /// No colour, `width` columns (at least [`Layout::MIN_WIDTH`]).
    pub(crate) fn plain(width: usize) -> Layout {
        Layout {
            width: width.max(Layout::MIN_WIDTH),
            colour: false,
        }
    }
}

/// What a piece of the report is, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paint {
    Plain,
    /// A section's heading, the key of the step to do first.
    Strong,
    /// `AFFECTED`, a closing line that fails.
    Bad,
    /// `not affected`, `fixed`, `mitigated`, a closing line that passes.
    Good,
    /// `cannot tell`.
    Unsure,
    /// `info`, and the commands to run.
    Info,
}

impl Paint {
    fn sgr(self) -> Option<&'static str> {
        match self {
            Paint::Plain => None,
            Paint::Strong => Some("1"),
            Paint::Bad => Some("1;31"),
            Paint::Good => Some("32"),
            Paint::Unsure => Some("33"),
            Paint::Info => Some("36"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Words wrapped under the text.
    Prose,
    /// A shell command: cut with ` \`, its continuation indented more.
    Command,
    /// One line whatever its length (`-q`'s verdicts).
    Line,
}

#[derive(Debug)]
struct Row {
    lead: String,
    lead_paint: Paint,
    text: String,
    paint: Paint,
    kind: Kind,
}

/// The rows of a report, laid out by [`Page::render`].
#[derive(Debug, Default)]
pub(crate) struct Page {
    rows: Vec<Row>,
}

impl Page {
    fn push(&mut self, lead: String, lead_paint: Paint, text: &str, paint: Paint, kind: Kind) {
        self.rows.push(Row {
            lead,
            lead_paint,
            text: text.to_owned(),
            paint,
            kind,
        });
    }

    /// An empty line.
    pub(crate) fn blank(&mut self) {
        self.push(String::new(), Paint::Plain, "", Paint::Plain, Kind::Line);
    }

    /// A section's heading, at the left margin.
    pub(crate) fn heading(&mut self, text: &str) {
        self.push(
            String::new(),
            Paint::Plain,
            text,
            Paint::Strong,
            Kind::Prose,
        );
    }

    /// `lead` then `text` wrapped under itself; each line of `text` (a
    /// value may hold a `\n`) starts a row of its own under the first.
    pub(crate) fn row(&mut self, lead: String, text: &str) {
        self.keyed(lead, Paint::Plain, text, Paint::Plain);
    }

    /// [`Page::row`] with the lead's key and the text painted.
    pub(crate) fn keyed(&mut self, lead: String, lead_paint: Paint, text: &str, paint: Paint) {
        let hang = " ".repeat(lead.chars().count());
        for (i, part) in text.split('\n').enumerate() {
            let lead = if i == 0 { lead.clone() } else { hang.clone() };
            self.push(lead, lead_paint, part, paint, Kind::Prose);
        }
    }

    /// A command to run, after `lead`.
    pub(crate) fn command(&mut self, lead: String, text: &str) {
        self.push(lead, Paint::Plain, text, Paint::Info, Kind::Command);
    }

    /// One line never wrapped.
    pub(crate) fn line(&mut self, lead: String, lead_paint: Paint, text: &str, paint: Paint) {
        self.push(lead, lead_paint, text, paint, Kind::Line);
    }

    /// Lines rendered elsewhere (`  key   text`): each keeps its indent
    /// and key, and wraps under the text after them.
    pub(crate) fn block(&mut self, text: &str) {
        for line in text.lines() {
            let (lead, rest) = split_lead(line);
            match lead.is_empty() && !rest.is_empty() {
                true => self.heading(rest),
                false if rest.is_empty() => self.blank(),
                false => self.row(lead.to_owned(), rest),
            }
        }
    }

    /// The rows laid out for `layout`.
    pub(crate) fn render(&self, layout: Layout) -> Styled {
        let mut out = Styled::default();
        for row in &self.rows {
            let lines = match row.kind {
                Kind::Prose => wrap(&row.lead, &row.text, layout.width, false),
                Kind::Command => wrap(&row.lead, &row.text, layout.width, true),
                Kind::Line => vec![format!("{}{}", row.lead, row.text)],
            };
            let paint = |p: Paint| p.sgr().filter(|_| layout.colour);
            for (i, line) in lines.iter().enumerate() {
                let split = if i == 0 { row.lead.chars().count() } else { 0 };
                let at = line
                    .char_indices()
                    .nth(split)
                    .map_or(line.len(), |(b, _)| b);
                let (lead, text) = line.split_at(at);
                let key = lead.trim();
                match key.is_empty() {
                    true => out.push(lead, None),
                    false => {
                        let start = lead.find(key).unwrap_or(0);
                        out.push(&lead[..start], None);
                        out.push(key, paint(row.lead_paint));
                        out.push(&lead[start + key.len()..], None);
                    }
                }
                out.push(text, paint(row.paint));
                out.push("\n", None);
            }
        }
        out
    }
}

/// A line's indent and key (a word and the run of two or more spaces
/// after it, within its first 16 columns), and the rest.
fn split_lead(line: &str) -> (&str, &str) {
    let indent = line.len() - line.trim_start().len();
    let after = &line[indent..];
    let key_end = after
        .find("  ")
        .filter(|&k| indent + k < 16 && !after[..k].contains(' '));
    let at = match key_end {
        Some(k) => indent + k + (after[k..].len() - after[k..].trim_start().len()),
        None => indent,
    };
    line.split_at(at)
}

/// `lead` then the words of `text` (escaped for the terminal) in lines of
/// at most `width` columns, continuation lines under the text; a word
/// longer than the room stands alone. A command's lines end in ` \`
/// and its continuation is indented two more columns.
fn wrap(lead: &str, text: &str, width: usize, command: bool) -> Vec<String> {
    let text = crate::shared::report::safe(text);
    let hang = lead.chars().count() + if command { 2 } else { 0 };
    let cut = if command { 2 } else { 0 };
    let mut lines: Vec<String> = Vec::new();
    let mut current = lead.to_owned();
    let mut used = lead.chars().count();
    let mut empty = true;
    for word in text.split_whitespace() {
        let w = word.chars().count();
        if !empty && used + 1 + w + cut > width {
            if command {
                current.push_str(" \\");
            }
            lines.push(current);
            current = " ".repeat(hang);
            used = hang;
            empty = true;
        }
        if !empty {
            current.push(' ');
            used += 1;
        }
        current.push_str(word);
        used += w;
        empty = false;
    }
    lines.push(current.trim_end().to_owned());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(page: &Page, layout: Layout) -> String {
        page.render(layout).as_str().to_owned()
    }

    #[test]
    fn prose_wraps_under_its_text_and_a_long_word_stands_alone() {
        let mut page = Page::default();
        let path = format!("/{}", "p".repeat(70));
        page.row(
            format!("  {:<6}", "why"),
            &format!("one two three {path} four five six seven eight"),
        );
        let text = shown(&page, Layout::plain(40));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  why   one two three");
        assert_eq!(lines[1], format!("        {path}"));
        assert_eq!(lines[2], "        four five six seven eight");
        assert!(lines.iter().all(|l| l.len() <= 40 || l.trim() == path));
    }

    #[test]
    fn a_command_is_cut_so_that_a_shell_reads_it_whole() {
        let mut page = Page::default();
        page.command(
            " ".repeat(10),
            "sudo apt install ./dist/amdgpu-expert-sched-6.14/*.deb now",
        );
        let text = shown(&page, Layout::plain(40));
        assert_eq!(
            text,
            "          sudo apt install \\\n            ./dist/amdgpu-expert-sched-6.14/*.deb \\\n            now\n"
        );
    }

    #[test]
    fn colour_comes_after_escaping_and_only_when_asked() {
        let mut page = Page::default();
        page.keyed(
            "AFFECTED ".to_owned(),
            Paint::Bad,
            "evil\x1b[2Jname",
            Paint::Plain,
        );
        let plain = shown(&page, Layout::plain(80));
        assert_eq!(plain, "AFFECTED evil\\x1b[2Jname\n");
        let colour = shown(
            &page,
            Layout {
                width: 80,
                colour: true,
            },
        );
        assert_eq!(colour, "\x1b[1;31mAFFECTED\x1b[0m evil\\x1b[2Jname\n");
    }

    #[test]
    fn a_block_keeps_its_keys() {
        let mut page = Page::default();
        page.block("\nGPU faults in logs\n  read   kern.log (3 lines)\n  no GPU fault in them\n");
        let text = shown(&page, Layout::plain(80));
        assert_eq!(
            text,
            "\nGPU faults in logs\n  read   kern.log (3 lines)\n  no GPU fault in them\n"
        );
        assert_eq!(split_lead("  read   x y"), ("  read   ", "x y"));
        assert_eq!(split_lead("  no GPU fault"), ("  ", "no GPU fault"));
    }
}
