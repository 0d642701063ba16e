//! Hunk matching: places the hunks of one file change on the file's lines.
//! A hunk's whole context must match exactly; it lands at its stated line or,
//! when the file moved, at the one other place it matches (as `git apply`,
//! GNU `patch -F0` and `dpkg-source` take it, but a context that matches at
//! two places is refused instead of taking the nearest). Fuzz, ignoring
//! context lines at a hunk's ends, is opt-in. Every hunk that did not land at
//! its stated line is reported with where it went.

use serde::Serialize;

use crate::fetch::diff::{Hunk, HunkLine};

/// How far a hunk's context may differ from the file: exact context at any
/// offset always, plus opt-in fuzz.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tolerance {
    /// Ignore up to this many context lines at each end of a hunk.
    pub(crate) fuzz: usize,
}

impl Tolerance {
    /// Exact context (at any offset), no fuzz: the default.
    pub fn strict() -> Tolerance {
        Tolerance::default()
    }

    /// Exact context plus up to `fuzz` ignored context lines at each end.
    pub fn fuzz(fuzz: usize) -> Tolerance {
        Tolerance { fuzz }
    }

    /// This tolerance, with at least the fuzz a recipe allows one patch.
    pub(crate) fn with_fuzz_at_least(self, fuzz: usize) -> Tolerance {
        Tolerance {
            fuzz: self.fuzz.max(fuzz),
        }
    }
}

/// A hunk that did not land exactly at its stated line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct HunkNote {
    /// 1-based hunk number within its file.
    pub(crate) hunk: usize,
    /// 1-based line of the file (before the patch) where the hunk's first
    /// compared line landed.
    pub(crate) line: usize,
    pub(crate) offset: isize,
    pub(crate) fuzz: usize,
}

/// A hunk that found no place to land.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HunkFailure {
    /// 1-based hunk number within its file.
    pub hunk: usize,
    pub(crate) header: String,
    /// 1-based line of the file where the first expected line did not match.
    pub(crate) line: usize,
    /// The hunk's line that was expected there.
    pub(crate) expected: String,
    /// What the file holds there (`None` past the end of the file).
    pub(crate) found: Option<String>,
    /// 1-based lines where the whole context matches, when it matches at
    /// more than one place and none is the stated line: refused as ambiguous.
    pub(crate) ambiguous: Vec<usize>,
    /// The fuzz that would let the hunk land (and the offset it would land
    /// at), when only fuzz would.
    pub(crate) would_apply_with_fuzz: Option<(usize, isize)>,
}

impl std::fmt::Display for HunkFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let [first, rest @ ..] = self.ambiguous.as_slice() {
            let others: Vec<String> = rest.iter().map(|l| l.to_string()).collect();
            return write!(
                f,
                "hunk #{} `{}`: its context matches at line {first} and at line {}, \
                 not at its stated line: refused as ambiguous; add context to the hunk \
                 so that it matches at one place",
                self.hunk,
                self.header,
                others.join(" and at line ")
            );
        }
        write!(
            f,
            "hunk #{} `{}`: line {} should be {} but is {}",
            self.hunk,
            self.header,
            self.line,
            shown(&self.expected),
            match &self.found {
                Some(t) => shown(t),
                None => "past the end of the file".to_owned(),
            }
        )?;
        if let Some((fuzz, off)) = self.would_apply_with_fuzz {
            write!(
                f,
                " (its context matches nowhere exactly; with fuzz {fuzz} it lands at offset \
                 {off:+}: pass `--fuzz {fuzz}` or set `fuzz = {fuzz}` on the patch in the \
                 recipe to accept that, or better refresh the patch against this tree)"
            )?;
        } else {
            write!(f, " (its context matches nowhere in the file)")?;
        }
        Ok(())
    }
}

/// A line of a file or a hunk as a message shows it: quoted, or named when
/// it is empty (an empty pair of backquotes reads as a typo).
fn shown(line: &str) -> String {
    if line.is_empty() {
        "an empty line".to_owned()
    } else {
        format!("`{line}`")
    }
}

#[derive(Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
    newline: bool,
}

fn split(content: &[u8]) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, &b) in content.iter().enumerate() {
        if b == b'\n' {
            lines.push(Line {
                start,
                end: i,
                newline: true,
            });
            start = i + 1;
        }
    }
    if start < content.len() {
        lines.push(Line {
            start,
            end: content.len(),
            newline: false,
        });
    }
    lines
}

/// Applies `hunks` to `content`. On failure returns every hunk that did not
/// land (later hunks are still tried, so a report shows them all).
pub(crate) fn apply(
    content: &[u8],
    hunks: &[Hunk],
    tol: Tolerance,
) -> Result<(Vec<u8>, Vec<HunkNote>), Vec<HunkFailure>> {
    let lines = split(content);
    let mut out = Vec::with_capacity(content.len() + 256);
    let mut notes = Vec::new();
    let mut failures = Vec::new();
    let mut pos = 0usize;
    let mut carried: isize = 0;
    for (n, hunk) in hunks.iter().enumerate() {
        let old: Vec<&HunkLine> = hunk.old_lines().collect();
        let new: Vec<&HunkLine> = hunk.new_lines().collect();
        let stated = if hunk.old_len == 0 {
            hunk.old_start
        } else {
            hunk.old_start.saturating_sub(1)
        } as isize;
        let edges = context_edges(hunk);
        let placed = (0..=tol.fuzz).find_map(|fuzz| {
            place(content, &lines, pos, stated + carried, &old, edges, fuzz).transpose()
        });
        let (at, lead, trail, fuzz) = match placed {
            Some(Ok(p)) => p,
            Some(Err(ambiguous)) => {
                let mut f = failure(content, &lines, stated + carried, n + 1, hunk, &old);
                f.ambiguous = ambiguous.iter().map(|l| l + 1).collect();
                failures.push(f);
                continue;
            }
            None => {
                let mut f = failure(content, &lines, stated + carried, n + 1, hunk, &old);
                f.would_apply_with_fuzz = (tol.fuzz + 1..=edges.0.max(edges.1)).find_map(|fz| {
                    match place(content, &lines, pos, stated + carried, &old, edges, fz) {
                        Ok(Some((at, lead, _, _))) => {
                            Some((fz, at as isize - lead as isize - stated))
                        }
                        _ => None,
                    }
                });
                failures.push(f);
                continue;
            }
        };
        let offset = at as isize - lead as isize - stated;
        if offset != 0 || fuzz != 0 {
            notes.push(HunkNote {
                hunk: n + 1,
                line: at - lead + 1,
                offset,
                fuzz,
            });
        }
        carried = offset;
        for line in &lines[pos..at] {
            push_line(&mut out, content, *line);
        }
        let keep = new.len() - trail.min(new.len());
        for line in &new[lead.min(keep)..keep] {
            out.extend_from_slice(&line.text);
            if line.newline {
                out.push(b'\n');
            }
        }
        pos = at + old.len() - lead - trail;
    }
    if !failures.is_empty() {
        return Err(failures);
    }
    for line in &lines[pos..] {
        push_line(&mut out, content, *line);
    }
    Ok((out, notes))
}

fn push_line(out: &mut Vec<u8>, content: &[u8], line: Line) {
    out.extend_from_slice(&content[line.start..line.end]);
    if line.newline {
        out.push(b'\n');
    }
}

/// A place found for a hunk: the line index of the first compared line, the
/// context lines dropped at each end, and the fuzz.
type HunkSite = (usize, usize, usize, usize);

/// Where `old`, less `fuzz` context lines at each end, matches at or after
/// `pos`: at `want` if it matches there, else at the one other place it
/// matches. `Ok(None)` when it matches nowhere, `Err(lines)` (0-based) when
/// it matches at several places and none is `want`.
fn place(
    content: &[u8],
    lines: &[Line],
    pos: usize,
    want: isize,
    old: &[&HunkLine],
    (leading, trailing): (usize, usize),
    fuzz: usize,
) -> Result<Option<HunkSite>, Vec<usize>> {
    let lead = fuzz.min(leading);
    let trail = fuzz.min(trailing);
    if fuzz > 0 && lead + trail == 0 || lead + trail > old.len() {
        return Ok(None);
    }
    let part = &old[lead..old.len() - trail];
    let first = want + lead as isize;
    let fits =
        |at: usize| at + part.len() <= lines.len() && mismatch(content, lines, at, part).is_none();
    if first >= pos as isize && fits(first as usize) {
        return Ok(Some((first as usize, lead, trail, fuzz)));
    }
    if part.is_empty() {
        // A pure insertion with no context (a new file's hunk) has only its line.
        return Ok(None);
    }
    let found: Vec<usize> = (pos..lines.len()).filter(|&at| fits(at)).take(3).collect();
    match found.as_slice() {
        [] => Ok(None),
        [at] => Ok(Some((*at, lead, trail, fuzz))),
        _ => Err(found.iter().map(|at| at - lead).collect()),
    }
}

/// Context lines before the first and after the last change of a hunk.
fn context_edges(hunk: &Hunk) -> (usize, usize) {
    let leading = hunk.lines.iter().take_while(|l| l.kind == b' ').count();
    let trailing = hunk
        .lines
        .iter()
        .rev()
        .take_while(|l| l.kind == b' ')
        .count();
    (leading, trailing)
}

fn mismatch(content: &[u8], lines: &[Line], at: usize, old: &[&HunkLine]) -> Option<usize> {
    old.iter().enumerate().find_map(|(j, want)| {
        let Some(have) = lines.get(at + j) else {
            return Some(j);
        };
        let same =
            &content[have.start..have.end] == want.text.as_slice() && have.newline == want.newline;
        (!same).then_some(j)
    })
}

fn failure(
    content: &[u8],
    lines: &[Line],
    stated: isize,
    number: usize,
    hunk: &Hunk,
    old: &[&HunkLine],
) -> HunkFailure {
    let at = stated.max(0) as usize;
    let j = mismatch(content, lines, at, old).unwrap_or(0);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    HunkFailure {
        hunk: number,
        header: hunk.header.clone(),
        line: at + j + 1,
        expected: old.get(j).map(|l| text(&l.text)).unwrap_or_default(),
        found: lines.get(at + j).map(|l| text(&content[l.start..l.end])),
        ambiguous: Vec::new(),
        would_apply_with_fuzz: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::diff::parse;

    fn hunks(patch: &str) -> Vec<Hunk> {
        parse(patch.as_bytes()).unwrap().remove(0).hunks
    }

    const P: &str = "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n";

    #[test]
    fn applies_in_place_without_a_note() {
        let (out, notes) = apply(b"a\nb\nc\nd\ne\n", &hunks(P), Tolerance::strict()).unwrap();
        assert_eq!(out, b"a\nb\nC\nd\ne\n");
        assert!(notes.is_empty());
    }

    #[test]
    fn exact_context_lands_at_an_offset_and_says_where() {
        let moved = b"x\na\nb\nc\nd\ne\n";
        let (out, notes) = apply(moved, &hunks(P), Tolerance::strict()).unwrap();
        assert_eq!(out, b"x\na\nb\nC\nd\ne\n");
        assert_eq!(
            notes,
            vec![HunkNote {
                hunk: 1,
                line: 3,
                offset: 1,
                fuzz: 0
            }]
        );
    }

    #[test]
    fn a_context_matching_twice_elsewhere_is_refused_naming_both_lines() {
        let twice = b"x\ny\nb\nc\nd\nb\nc\nd\n";
        let err = apply(twice, &hunks(P), Tolerance::strict()).unwrap_err();
        assert_eq!(err[0].ambiguous, vec![3, 6]);
        let text = err[0].to_string();
        assert!(text.contains("line 3 and at line 6"), "{text}");
    }

    #[test]
    fn the_stated_line_wins_over_a_second_match() {
        let twice = b"a\nb\nc\nd\nb\nc\nd\n";
        let (out, notes) = apply(twice, &hunks(P), Tolerance::strict()).unwrap();
        assert_eq!(out, b"a\nb\nC\nd\nb\nc\nd\n");
        assert!(notes.is_empty());
    }

    #[test]
    fn fuzz_only_when_asked_and_the_refusal_names_it() {
        let changed = b"a\nB\nc\nD\ne\n";
        let err = apply(changed, &hunks(P), Tolerance::strict()).unwrap_err();
        assert_eq!(err[0].would_apply_with_fuzz, Some((1, 0)));
        let text = err[0].to_string();
        assert!(
            text.contains("--fuzz 1") && text.contains("fuzz = 1"),
            "{text}"
        );
        let (out, notes) = apply(changed, &hunks(P), Tolerance::fuzz(1)).unwrap();
        assert_eq!(out, b"a\nB\nC\nD\ne\n");
        assert_eq!(notes[0].fuzz, 1);
    }

    #[test]
    fn an_empty_expected_line_is_named_not_shown_as_empty_quotes() {
        // The hunk's trailing context is an empty line the file does not have.
        let p = "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n \n";
        let err = apply(b"a\nb\nc\n", &hunks(p), Tolerance::strict()).unwrap_err();
        let text = err[0].to_string();
        assert!(
            text.contains("line 4 should be an empty line but is past the end of the file"),
            "{text}"
        );
        let err = apply(b"a\nb\nc\n\nz\n", &hunks(P), Tolerance::strict()).unwrap_err();
        let text = err[0].to_string();
        assert!(
            text.contains("line 4 should be `d` but is an empty line"),
            "{text}"
        );
    }

    #[test]
    fn missing_final_newline_is_kept() {
        let p = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n";
        let (out, _) = apply(b"a\nb", &hunks(p), Tolerance::strict()).unwrap();
        assert_eq!(out, b"a\nc");
        assert!(apply(b"a\nb\n", &hunks(p), Tolerance::strict()).is_err());
    }
}
