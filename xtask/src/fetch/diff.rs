//! Diff parsing, below `patch` and `fetch`: `git format-patch` mbox files,
//! `diff --git` output and plain unified diffs (`diff -urN`, quilt) into
//! per-file hunks. Bytes, not text: a patch may carry any encoding, and
//! lines are compared exactly.

use anyhow::{bail, Context, Result};

/// One line of a hunk: `b' '` context, `b'-'` removed, `b'+'` added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HunkLine {
    pub(crate) kind: u8,
    /// The line without its terminating `\n`.
    pub(crate) text: Vec<u8>,
    /// False when followed by `\ No newline at end of file`.
    pub(crate) newline: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// 1-based start and length on the old and the new side, as in `@@ -a,b +c,d @@`.
    pub(crate) old_start: usize,
    pub(crate) old_len: usize,
    pub(crate) new_start: usize,
    pub(crate) new_len: usize,
    /// The `@@ ... @@` line, for messages.
    pub(crate) header: String,
    pub(crate) lines: Vec<HunkLine>,
}

impl Hunk {
    /// The lines the hunk expects (context and removed).
    pub(crate) fn old_lines(&self) -> impl Iterator<Item = &HunkLine> {
        self.lines.iter().filter(|l| l.kind != b'+')
    }

    /// The lines the hunk leaves (context and added).
    pub(crate) fn new_lines(&self) -> impl Iterator<Item = &HunkLine> {
        self.lines.iter().filter(|l| l.kind != b'-')
    }

    /// The same change undone.
    pub(crate) fn reversed(&self) -> Hunk {
        Hunk {
            old_start: self.new_start,
            old_len: self.new_len,
            new_start: self.old_start,
            new_len: self.old_len,
            header: format!(
                "@@ -{},{} +{},{} @@",
                self.new_start, self.new_len, self.old_start, self.old_len
            ),
            lines: self
                .lines
                .iter()
                .map(|l| HunkLine {
                    kind: match l.kind {
                        b'-' => b'+',
                        b'+' => b'-',
                        k => k,
                    },
                    text: l.text.clone(),
                    newline: l.newline,
                })
                .collect(),
        }
    }
}

/// The change to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilePatch {
    /// Path before, relative to the tree; `None` when the file is created.
    pub(crate) old: Option<String>,
    /// Path after; `None` when the file is deleted.
    pub(crate) new: Option<String>,
    /// `old` is copied, not moved, to `new` (git `copy from`).
    pub(crate) copy: bool,
    pub(crate) old_mode: Option<u32>,
    pub(crate) new_mode: Option<u32>,
    /// The git blob ids (abbreviated, as in `index <pre>..<post>`) of the
    /// file the patch was written against and of the file it leaves.
    pub(crate) index: Option<(String, String)>,
    pub(crate) hunks: Vec<Hunk>,
}

impl FilePatch {
    /// The path this change is known by in messages.
    pub(crate) fn display_path(&self) -> &str {
        self.new.as_deref().or(self.old.as_deref()).unwrap_or("?")
    }

    /// The same change undone (for "is it already applied?" checks).
    pub(crate) fn reversed(&self) -> FilePatch {
        FilePatch {
            old: self.new.clone(),
            new: self.old.clone(),
            copy: false,
            old_mode: self.new_mode,
            new_mode: self.old_mode,
            index: self
                .index
                .as_ref()
                .map(|(pre, post)| (post.clone(), pre.clone())),
            hunks: self.hunks.iter().map(Hunk::reversed).collect(),
        }
    }
}

/// Parses every file change in `bytes`. Text around the diffs (mail headers,
/// commit message, diffstat, signature) is skipped.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<FilePatch>> {
    let lines: Vec<&[u8]> = split_lines(bytes);
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with(b"diff --git ") {
            let (file, next) =
                parse_git(&lines, i).with_context(|| format!("in the diff at line {}", i + 1))?;
            files.push(file);
            i = next;
        } else if line.starts_with(b"--- ")
            && lines.get(i + 1).is_some_and(|l| l.starts_with(b"+++ "))
            && lines.get(i + 2).is_some_and(|l| l.starts_with(b"@@ "))
        {
            let (file, next) = parse_unified(&lines, i)
                .with_context(|| format!("in the diff at line {}", i + 1))?;
            files.push(file);
            i = next;
        } else {
            i += 1;
        }
    }
    if files.is_empty() {
        bail!("no diff found (expected `diff --git` or `---`/`+++`/`@@` lines)");
    }
    Ok(files)
}

/// `<pre>..<post>` of an `index <pre>..<post> [<mode>]` line, when both are hex.
fn index_ids(value: &str) -> Option<(String, String)> {
    let ids = value.split(' ').next()?;
    let (pre, post) = ids.split_once("..")?;
    let hex = |s: &str| s.len() >= 7 && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(pre) && hex(post)).then(|| (pre.to_ascii_lowercase(), post.to_ascii_lowercase()))
}

fn split_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if bytes.ends_with(b"\n") {
        lines.pop();
    }
    lines
}

fn parse_git(lines: &[&[u8]], start: usize) -> Result<(FilePatch, usize)> {
    let header = std::str::from_utf8(&lines[start][b"diff --git ".len()..])
        .context("the `diff --git` line is not UTF-8")?;
    let (mut old, mut new) = git_header_paths(header)?;
    let mut file = FilePatch {
        old: Some(old.clone()),
        new: Some(new.clone()),
        copy: false,
        old_mode: None,
        new_mode: None,
        index: None,
        hunks: Vec::new(),
    };
    let (mut created, mut deleted) = (false, false);
    let mut i = start + 1;
    while i < lines.len() {
        let line = String::from_utf8_lossy(lines[i]);
        let value = |prefix: &str| line[prefix.len()..].trim_end().to_owned();
        if line.starts_with("diff --git ") || line.starts_with("@@ ") || line.starts_with("--- ") {
            break;
        } else if line.starts_with("old mode ") {
            file.old_mode = Some(mode(&value("old mode "))?);
        } else if line.starts_with("new mode ") {
            file.new_mode = Some(mode(&value("new mode "))?);
        } else if line.starts_with("deleted file mode ") {
            file.old_mode = Some(mode(&value("deleted file mode "))?);
            deleted = true;
        } else if line.starts_with("new file mode ") {
            file.new_mode = Some(mode(&value("new file mode "))?);
            created = true;
        } else if line.starts_with("rename from ") {
            old = unquote(&value("rename from "))?;
        } else if line.starts_with("rename to ") {
            new = unquote(&value("rename to "))?;
        } else if line.starts_with("copy from ") {
            old = unquote(&value("copy from "))?;
            file.copy = true;
        } else if line.starts_with("copy to ") {
            new = unquote(&value("copy to "))?;
        } else if line.starts_with("GIT binary patch") || line.starts_with("Binary files ") {
            bail!("binary diff for `{new}`: binary patches are not supported");
        } else if line.starts_with("index ") {
            file.index = index_ids(&value("index "));
        } else if !(line.starts_with("similarity index ")
            || line.starts_with("dissimilarity index "))
        {
            break;
        }
        i += 1;
    }
    if i + 1 < lines.len() && lines[i].starts_with(b"--- ") && lines[i + 1].starts_with(b"+++ ") {
        let minus = side_path(lines[i], 4)?;
        let plus = side_path(lines[i + 1], 4)?;
        if let Some(p) = minus.0 {
            old = p;
        }
        if let Some(p) = plus.0 {
            new = p;
        }
        i += 2;
    }
    file.old = (!created).then_some(old);
    file.new = (!deleted).then_some(new);
    let (hunks, next) = parse_hunks(lines, i)?;
    file.hunks = hunks;
    Ok((file, next))
}

/// `a/x b/x` in a `diff --git` line. Without renames both halves name the
/// same path, which settles where the split is even if it holds spaces.
fn git_header_paths(header: &str) -> Result<(String, String)> {
    if header.starts_with('"') {
        let end = closing_quote(header).context("unterminated quoted path")?;
        let old = strip_one(&unquote(&header[..=end])?);
        let new = strip_one(&unquote(header[end + 1..].trim())?);
        return Ok((old, new));
    }
    let n = header.len();
    if n % 2 == 1 {
        let half = (n - 1) / 2;
        let (a, b) = (&header[..half], &header[half + 1..]);
        if header.as_bytes()[half] == b' ' && strip_one(a) == strip_one(b) {
            return Ok((strip_one(a), strip_one(b)));
        }
    }
    match header.split_once(" b/") {
        Some((a, b)) => Ok((strip_one(a), b.to_owned())),
        None => bail!("cannot tell the two paths apart in `diff --git {header}`"),
    }
}

fn closing_quote(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Drops the `a/`/`b/` component; an absolute path is kept whole so that
/// confinement refuses it.
fn strip_one(path: &str) -> String {
    if path.starts_with('/') {
        return path.to_owned();
    }
    match path.split_once('/') {
        Some((_, rest)) => rest.to_owned(),
        None => path.to_owned(),
    }
}

fn mode(text: &str) -> Result<u32> {
    u32::from_str_radix(text, 8).with_context(|| format!("`{text}` is not an octal file mode"))
}

/// A `---`/`+++` line: the path with one leading component stripped (`None`
/// for `/dev/null`) and whether its timestamp is the epoch (`diff -N`).
fn side_path(line: &[u8], skip: usize) -> Result<(Option<String>, bool)> {
    let text = std::str::from_utf8(&line[skip..]).context("a `---`/`+++` path is not UTF-8")?;
    let (path, stamp) = if text.starts_with('"') {
        let end = closing_quote(text).context("unterminated quoted path")?;
        (unquote(&text[..=end])?, &text[end + 1..])
    } else {
        match text.split_once('\t') {
            Some((p, s)) => (p.to_owned(), s),
            None => (text.trim_end().to_owned(), ""),
        }
    };
    let epoch = stamp.trim_start().starts_with("1970-01-01");
    if path == "/dev/null" {
        return Ok((None, epoch));
    }
    Ok((Some(strip_one(&path)), epoch))
}

fn parse_unified(lines: &[&[u8]], start: usize) -> Result<(FilePatch, usize)> {
    let (old, old_epoch) = side_path(lines[start], 4)?;
    let (new, new_epoch) = side_path(lines[start + 1], 4)?;
    let (hunks, next) = parse_hunks(lines, start + 2)?;
    let single = |f: fn(&Hunk) -> (usize, usize)| hunks.len() == 1 && f(&hunks[0]) == (0, 0);
    let created = old.is_none() || (old_epoch && single(|h| (h.old_start, h.old_len)));
    let deleted = new.is_none() || (new_epoch && single(|h| (h.new_start, h.new_len)));
    let path = new.clone().or(old.clone());
    Ok((
        FilePatch {
            old: if created { None } else { old.or(path.clone()) },
            new: if deleted { None } else { path },
            copy: false,
            old_mode: None,
            new_mode: None,
            index: None,
            hunks,
        },
        next,
    ))
}

fn parse_hunks(lines: &[&[u8]], mut i: usize) -> Result<(Vec<Hunk>, usize)> {
    let mut hunks = Vec::new();
    while i < lines.len() && lines[i].starts_with(b"@@ ") {
        let header = String::from_utf8_lossy(lines[i]).into_owned();
        let (old_start, old_len, new_start, new_len) = hunk_header(&header)
            .with_context(|| format!("malformed hunk header at line {}: `{header}`", i + 1))?;
        let mut hunk = Hunk {
            old_start,
            old_len,
            new_start,
            new_len,
            header: header.split(" @@").next().unwrap_or("").to_owned() + " @@",
            lines: Vec::new(),
        };
        let (mut old_left, mut new_left) = (old_len, new_len);
        i += 1;
        while old_left > 0 || new_left > 0 {
            let Some(line) = lines.get(i) else {
                bail!("hunk `{}` ends early: the patch is truncated", hunk.header);
            };
            let (kind, text) = match line.first() {
                None => (b' ', &[][..]),
                Some(b'\\') => {
                    mark_no_newline(&mut hunk);
                    i += 1;
                    continue;
                }
                Some(&k @ (b' ' | b'-' | b'+')) => (k, &line[1..]),
                Some(_) => bail!(
                    "line {} in hunk `{}` starts with none of ' ', '-', '+': the patch is damaged \
                     (short by {old_left} old and {new_left} new lines)",
                    i + 1,
                    hunk.header
                ),
            };
            let fits = match kind {
                b' ' => old_left > 0 && new_left > 0,
                b'-' => old_left > 0,
                _ => new_left > 0,
            };
            if !fits {
                bail!(
                    "line {} overflows hunk `{}`: the line counts do not match the body",
                    i + 1,
                    hunk.header
                );
            }
            if kind != b'+' {
                old_left -= 1;
            }
            if kind != b'-' {
                new_left -= 1;
            }
            hunk.lines.push(HunkLine {
                kind,
                text: text.to_vec(),
                newline: true,
            });
            i += 1;
        }
        if lines.get(i).is_some_and(|l| l.starts_with(b"\\")) {
            mark_no_newline(&mut hunk);
            i += 1;
        }
        hunks.push(hunk);
    }
    Ok((hunks, i))
}

fn mark_no_newline(hunk: &mut Hunk) {
    if let Some(last) = hunk.lines.last_mut() {
        last.newline = false;
    }
}

fn hunk_header(header: &str) -> Option<(usize, usize, usize, usize)> {
    let body = header.strip_prefix("@@ -")?;
    let (ranges, _) = body.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((s, l)) => Some((s.parse().ok()?, l.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (c, d) = range(new)?;
    Some((a, b, c, d))
}

/// Undoes git's C-style quoting of paths (`"a/t\303\244b"`).
fn unquote(text: &str) -> Result<String> {
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return Ok(text.to_owned());
    };
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let c = *bytes
            .get(i + 1)
            .context("dangling backslash in a quoted path")?;
        i += 2;
        out.push(match c {
            b'n' => b'\n',
            b't' => b'\t',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'r' => b'\r',
            b'v' => 11,
            b'0'..=b'7' => {
                let digits = bytes.get(i - 1..i + 2).context("short octal escape")?;
                i += 1 + 1;
                u8::from_str_radix(std::str::from_utf8(digits)?, 8)?
            }
            other => other,
        });
    }
    String::from_utf8(out).context("a quoted path is not UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_paths_with_spaces_and_quotes() {
        assert_eq!(
            git_header_paths("a/x y.c b/x y.c").unwrap(),
            ("x y.c".into(), "x y.c".into())
        );
        assert_eq!(
            git_header_paths("\"a/t\\303\\244b\" \"b/t\\303\\244b\"").unwrap(),
            ("täb".into(), "täb".into())
        );
    }

    #[test]
    fn hunk_without_lengths() {
        assert_eq!(hunk_header("@@ -3 +3 @@ fn"), Some((3, 1, 3, 1)));
        assert_eq!(hunk_header("@@ -0,0 +1,2 @@"), Some((0, 0, 1, 2)));
    }

    #[test]
    fn no_newline_marker_applies_to_previous_line() {
        let p = b"--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n";
        let files = parse(p).unwrap();
        let lines = &files[0].hunks[0].lines;
        assert!(!lines[0].newline);
        assert!(lines[1].newline);
    }
}
