//! How a command ends when it does not succeed, and the one mapping of each
//! ending to its exit status and to what is printed on stderr.

use crate::shared::diag::{InvalidInput, UsageError};
use crate::shared::report;

/// A command's ending other than success. Commands return it; only
/// `run.rs` turns it into an exit status.
#[derive(Debug)]
pub enum Error {
    /// A verdict, not a failure: doctor found a known fault affecting the
    /// machine unmitigated. Its report (on stdout) already says which.
    FaultsAffect,
    /// The command failed: invalid input (a recipe, the knowledge file,
    /// arguments) or anything else.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Error {
    fn from(err: anyhow::Error) -> Error {
        Error::Failed(err)
    }
}

impl Error {
    /// The exit status: 3 when a known fault affects the machine, 2 for
    /// invalid input (bad recipe, knowledge file or arguments), 1 for every
    /// other failure.
    pub(crate) fn code(&self) -> u8 {
        match self {
            Error::FaultsAffect => 3,
            Error::Failed(err)
                if err
                    .chain()
                    .any(|e| e.is::<InvalidInput>() || e.is::<UsageError>()) =>
            {
                2
            }
            Error::Failed(_) => 1,
        }
    }

    /// The lines to print on stderr, made safe (text from outside, such as
    /// paths, entry names and recipe values, is in the messages); none for
    /// a verdict. Located problems come one per line, then what was being
    /// done when they were found.
    pub(crate) fn message(&self) -> Option<String> {
        let Error::Failed(err) = self else {
            return None;
        };
        let safe = |text: String| report::safe(&text).into_owned();
        Some(match err.downcast_ref::<InvalidInput>() {
            Some(invalid) => {
                // the invalid input itself is the outermost error when no
                // context was added to it
                let bare = err.chain().next().is_some_and(|e| e.is::<InvalidInput>());
                let then = if bare {
                    "error: the recipe is invalid (see above)".to_owned()
                } else {
                    format!("error: {}", safe(err.to_string()))
                };
                format!("{}\n{then}", safe(invalid.to_string()))
            }
            None => format!("error: {}", safe(format!("{err:#}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;
    use crate::shared::diag::Diag;

    fn invalid() -> anyhow::Error {
        let diag = Diag::at("r.toml".as_ref(), "a = 1\n", 4, "bad \x1b");
        InvalidInput(vec![diag]).into()
    }

    #[test]
    fn each_ending_has_its_status() {
        assert_eq!(Error::FaultsAffect.code(), 3);
        assert_eq!(Error::from(invalid()).code(), 2);
        let usage = anyhow::Error::new(UsageError("no".to_owned())).context("running");
        assert_eq!(Error::from(usage).code(), 2);
        assert_eq!(Error::from(anyhow::anyhow!("failed")).code(), 1);
    }

    #[test]
    fn invalid_input_is_printed_located_then_what_was_done() {
        assert_eq!(Error::FaultsAffect.message(), None);
        assert_eq!(
            Error::from(invalid()).message().unwrap(),
            "r.toml:1:5: bad \\x1b\nerror: the recipe is invalid (see above)"
        );
        let with_context = Err::<(), _>(invalid()).context("reading the knowledge file");
        assert_eq!(
            Error::from(with_context.unwrap_err()).message().unwrap(),
            "r.toml:1:5: bad \\x1b\nerror: reading the knowledge file"
        );
        let other = anyhow::anyhow!("a\x07b").context("doing");
        assert_eq!(
            Error::from(other).message().unwrap(),
            "error: doing: a\\x07b"
        );
    }
}
