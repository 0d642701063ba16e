//! Hunk matching: places the hunks of one file change on the file's lines,
//! strictly (exactly where the hunk says, as dpkg-source does) or, opt-in,
//! with an offset search and fuzz, and says hunk by hunk what it did.

use serde::Serialize;

use super::parse::{Hunk, HunkLine};

/// How far a hunk may move from where it says it belongs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tolerance {
    /// Search for the hunk's context above and below its stated line.
    pub offset: bool,
    /// Ignore up to this many context lines at each end of a hunk.
    pub fuzz: usize,
}

impl Tolerance {
    pub fn strict() -> Tolerance {
        Tolerance::default()
    }

    pub fn is_strict(&self) -> bool {
        !self.offset && self.fuzz == 0
    }
}

/// A hunk that did not land exactly where it said (only with a tolerance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HunkNote {
    /// 1-based hunk number within its file.
    pub hunk: usize,
    pub offset: isize,
    pub fuzz: usize,
}

/// A hunk that found no place to land.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HunkFailure {
    /// 1-based hunk number within its file.
    pub hunk: usize,
    pub header: String,
    /// 1-based line of the file where the first expected line did not match.
    pub line: usize,
    /// The hunk's line that was expected there.
    pub expected: String,
    /// What the file holds there (`None` past the end of the file).
    pub found: Option<String>,
    /// Where the hunk would land with `--offset`, if anywhere.
    pub would_apply_at_offset: Option<isize>,
}

impl std::fmt::Display for HunkFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "hunk #{} `{}`: line {} should be `{}` but is {}",
            self.hunk,
            self.header,
            self.line,
            self.expected,
            match &self.found {
                Some(t) => format!("`{t}`"),
                None => "past the end of the file".to_owned(),
            }
        )?;
        if let Some(off) = self.would_apply_at_offset {
            write!(f, " (the hunk matches at offset {off:+})")?;
        }
        Ok(())
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
pub fn apply(
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
        let Some((at, lead, trail, fuzz)) =
            place(content, &lines, pos, stated + carried, &old, edges, tol)
        else {
            failures.push(failure(content, &lines, pos, stated, n + 1, hunk, &old));
            continue;
        };
        let offset = at as isize - lead as isize - stated;
        if offset != 0 || fuzz != 0 {
            notes.push(HunkNote {
                hunk: n + 1,
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

/// Where `old` (less `lead`/`trail` context lines of fuzz) matches: the line
/// index of the first compared line, the lines dropped at each end and the fuzz.
fn place(
    content: &[u8],
    lines: &[Line],
    pos: usize,
    want: isize,
    old: &[&HunkLine],
    (leading, trailing): (usize, usize),
    tol: Tolerance,
) -> Option<(usize, usize, usize, usize)> {
    for fuzz in 0..=tol.fuzz {
        let lead = fuzz.min(leading);
        let trail = fuzz.min(trailing);
        if fuzz > 0 && lead + trail == 0 || lead + trail > old.len() {
            break;
        }
        let part = &old[lead..old.len() - trail];
        let first = want + lead as isize;
        let fits = |at: isize| {
            at >= pos as isize
                && (at as usize + part.len()) <= lines.len()
                && mismatch(content, lines, at as usize, part).is_none()
        };
        if fits(first) {
            return Some((first as usize, lead, trail, fuzz));
        }
        if tol.offset {
            let span = lines.len() as isize + 1;
            for d in 1..=span {
                for at in [first + d, first - d] {
                    if fits(at) {
                        return Some((at as usize, lead, trail, fuzz));
                    }
                }
            }
        }
    }
    None
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
    pos: usize,
    stated: isize,
    number: usize,
    hunk: &Hunk,
    old: &[&HunkLine],
) -> HunkFailure {
    let at = stated.max(0) as usize;
    let j = mismatch(content, lines, at, old).unwrap_or(0);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let offset = Tolerance {
        offset: true,
        fuzz: 0,
    };
    HunkFailure {
        hunk: number,
        header: hunk.header.clone(),
        line: at + j + 1,
        expected: old.get(j).map(|l| text(&l.text)).unwrap_or_default(),
        found: lines.get(at + j).map(|l| text(&content[l.start..l.end])),
        would_apply_at_offset: place(content, lines, pos, stated, old, (0, 0), offset)
            .map(|(p, _, _, _)| p as isize - stated)
            .filter(|o| *o != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::parse::parse;

    fn hunks(patch: &str) -> Vec<Hunk> {
        parse(patch.as_bytes()).unwrap().remove(0).hunks
    }

    const P: &str = "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n";

    #[test]
    fn strict_applies_in_place() {
        let (out, notes) = apply(b"a\nb\nc\nd\ne\n", &hunks(P), Tolerance::strict()).unwrap();
        assert_eq!(out, b"a\nb\nC\nd\ne\n");
        assert!(notes.is_empty());
    }

    #[test]
    fn strict_refuses_an_offset_that_the_tolerance_accepts() {
        let moved = b"x\na\nb\nc\nd\ne\n";
        let err = apply(moved, &hunks(P), Tolerance::strict()).unwrap_err();
        assert_eq!(err[0].line, 2);
        assert_eq!(err[0].expected, "b");
        assert_eq!(err[0].would_apply_at_offset, Some(1));
        let tol = Tolerance {
            offset: true,
            fuzz: 0,
        };
        let (out, notes) = apply(moved, &hunks(P), tol).unwrap();
        assert_eq!(out, b"x\na\nb\nC\nd\ne\n");
        assert_eq!(notes[0].offset, 1);
    }

    #[test]
    fn fuzz_ignores_edge_context() {
        let tol = Tolerance {
            offset: false,
            fuzz: 1,
        };
        let (out, notes) = apply(b"a\nB\nc\nD\ne\n", &hunks(P), tol).unwrap();
        assert_eq!(out, b"a\nB\nC\nD\ne\n");
        assert_eq!(notes[0].fuzz, 1);
    }

    #[test]
    fn missing_final_newline_is_kept() {
        let p = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n";
        let (out, _) = apply(b"a\nb", &hunks(p), Tolerance::strict()).unwrap();
        assert_eq!(out, b"a\nc");
        assert!(apply(b"a\nb\n", &hunks(p), Tolerance::strict()).is_err());
    }
}
