//! Rust source as the repository tests read it: comments and literals
//! blanked (same length, newlines kept, so offsets and line numbers stay
//! true), braces matched, and every `fn` with the lines its body spans.

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, sorted.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `src` with every comment (line, block, nested block, doc), string, byte
/// string, raw string and char literal turned into spaces; newlines stay.
/// Lifetimes and labels (`'a`) are code and stay too.
pub(crate) fn blank_comments_and_literals(src: &str) -> String {
    let bytes = src.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i < bytes.len() {
        match comment_or_literal_end(bytes, i) {
            Some(end) => {
                for b in &mut out[i..end] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
                i = end;
            }
            None => i += 1,
        }
    }
    String::from_utf8(out).expect("blanking whole literals keeps UTF-8")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Where the comment or literal that starts at `i` ends (one past it), if
/// one starts there.
fn comment_or_literal_end(b: &[u8], i: usize) -> Option<usize> {
    let next = b.get(i + 1).copied();
    match b[i] {
        b'/' if next == Some(b'/') => Some(find_from(b, i, b'\n').unwrap_or(b.len())),
        b'/' if next == Some(b'*') => Some(block_comment_end(b, i)),
        b'"' => Some(string_end(b, i + 1)),
        b'\'' => char_literal_end(b, i),
        b'r' | b'b' | b'c' if i == 0 || !is_ident(b[i - 1]) => prefixed_literal_end(b, i),
        _ => None,
    }
}

fn find_from(b: &[u8], from: usize, byte: u8) -> Option<usize> {
    b[from..].iter().position(|&c| c == byte).map(|p| from + p)
}

/// One past the `*/` that closes the block comment at `i` (they nest).
fn block_comment_end(b: &[u8], i: usize) -> usize {
    let mut depth = 0;
    let mut j = i;
    while j < b.len() {
        if b[j..].starts_with(b"/*") {
            depth += 1;
            j += 2;
        } else if b[j..].starts_with(b"*/") {
            depth -= 1;
            j += 2;
            if depth == 0 {
                return j;
            }
        } else {
            j += 1;
        }
    }
    b.len()
}

/// One past the `"` closing a string whose text starts at `j`.
fn string_end(b: &[u8], mut j: usize) -> usize {
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// A char literal at `i` (`'x'`, `'\n'`, `'\u{1F600}'`, `'é'`), or `None`
/// for a lifetime or a label.
fn char_literal_end(b: &[u8], i: usize) -> Option<usize> {
    let first = *b.get(i + 1)?;
    if first == b'\\' {
        // The escaped character may itself be a quote: look past it.
        return find_from(b, i + 3, b'\'').map(|p| p + 1);
    }
    let width = match first {
        0xf0.. => 4,
        0xe0.. => 3,
        0xc0.. => 2,
        _ => 1,
    };
    (b.get(i + 1 + width) == Some(&b'\'')).then_some(i + 2 + width)
}

/// `b"..."`, `c"..."`, `b'x'`, and raw strings `r"..."`, `r#"..."#`,
/// `br#"..."#`, `cr"..."` at `i`; `None` for an identifier such as `r#type`.
fn prefixed_literal_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    if b[j] != b'r' {
        match b.get(j + 1) {
            Some(b'"') => return Some(string_end(b, j + 2)),
            Some(b'\'') if b[i] == b'b' => return char_literal_end(b, j + 1),
            Some(b'r') => j += 1,
            _ => return None,
        }
    }
    let hashes = b[j + 1..].iter().take_while(|&&c| c == b'#').count();
    if b.get(j + 1 + hashes) != Some(&b'"') {
        return None;
    }
    let body = j + 2 + hashes;
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let end = b[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map_or(b.len(), |p| body + p + close.len());
    Some(end)
}

/// The offset of the `}` matching the `{` at `open` in blanked text.
pub(crate) fn matching_brace(blanked: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, &c) in blanked.as_bytes().iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// The 1-based line of byte `offset` in `text`.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&c| c == b'\n')
        .count()
        + 1
}

/// A function with a body: its name, the line of its `fn`, and how many
/// lines it spans from that line to its closing brace.
#[derive(Debug, PartialEq)]
pub(crate) struct FnSpan {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) lines: usize,
}

/// Every `fn` with a body in blanked text (nested ones too, each on its
/// own; declarations without a body are left out).
pub(crate) fn functions(blanked: &str) -> Vec<FnSpan> {
    let b = blanked.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = blanked[i..].find("fn").map(|p| i + p) {
        i = p + 2;
        let starts_word = p == 0 || !is_ident(b[p - 1]);
        let spaced = b.get(p + 2).is_some_and(|c| c.is_ascii_whitespace());
        if !(starts_word && spaced) {
            continue;
        }
        let name: String = blanked[p + 2..]
            .trim_start()
            .chars()
            .take_while(|&c| c.is_alphanumeric() || c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let Some(open) = body_open(b, p + 2) else {
            continue;
        };
        let close = matching_brace(blanked, open).expect("every `{` is closed");
        let line = line_at(blanked, p);
        out.push(FnSpan {
            name,
            line,
            lines: line_at(blanked, close) - line + 1,
        });
    }
    out
}

/// The `{` opening the body of the function whose signature starts at
/// `from`, or `None` when a `;` ends it first (a declaration); a `;` inside
/// `(...)` or `[...]` (an array type) belongs to the signature.
fn body_open(b: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, &c) in b.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' if depth == 0 => return Some(j),
            b';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}
