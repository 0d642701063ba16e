//! Located diagnostics: `path:line:col: message`, collected so that a user
//! sees every problem of a recipe at once, and the typed errors of invalid
//! input (`error.rs` maps both to exit status 2).

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found in an input file, with the place it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diag {
    pub(crate) file: PathBuf,
    /// 1-based line and column (columns count characters, not bytes).
    pub(crate) line: usize,
    pub(crate) col: usize,
    pub(crate) message: String,
}

impl Diag {
    /// A diagnostic at byte offset `offset` of `text`, the contents of `file`.
    pub(crate) fn at(file: &Path, text: &str, offset: usize, message: impl Into<String>) -> Diag {
        let (line, col) = line_col(text, offset);
        Diag {
            file: file.to_owned(),
            line,
            col,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            display_path(&self.file).display(),
            self.line,
            self.col,
            self.message
        )
    }
}

/// 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `path` relative to the current directory when it lies below it, so that
/// messages show what a user would type.
pub(crate) fn display_path(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
}

/// Every problem found in a recipe (and the files it names). Exit status 2.
#[derive(Debug)]
pub(crate) struct InvalidInput(pub Vec<Diag>);

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, diag) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{diag}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidInput {}

/// A command was called with arguments that cannot work (exit status 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, text.find('=').unwrap()), (1, 3));
        let second_eq = text.rfind('=').unwrap();
        assert_eq!(line_col(text, second_eq), (2, 4));
    }
}
