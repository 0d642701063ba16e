//! Text from outside never reaches the terminal raw (issue #25): an escape
//! sequence in an archive entry name, in a patch's file path and in the
//! machine's osrelease (`doctor_hostile.rs`) is shown escaped by the one
//! function the output goes through (`report::safe`).

use crate::support::patch::{self as ps, TarEntry as E};
use crate::support::{Project, Run};

/// An OSC title change, a bell, a screen clear and a C1 CSI.
const ESCAPES: &str = "\x1b]0;pwned\x07\x1b[2J\u{9b}1m";
const SHOWN: &str = "\\x1b]0;pwned\\x07\\x1b[2J\\u{9b}1m";

#[track_caller]
fn no_raw_controls(run: &Run) {
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(
            !text.contains(['\x1b', '\x07', '\u{9b}', '\r']),
            "raw control bytes reach the terminal on {name}: {text:?}"
        );
    }
}

#[test]
fn an_archive_entry_name_is_shown_escaped() {
    let p = Project::new();
    p.recipe(
        "evil",
        &ps::recipe_text(
            "evil",
            "1.0",
            "[source]\nlocal = \"evil.tar.gz\"\nstrip = 1\n",
        ),
    );
    let name = format!("linux-x/{ESCAPES}fifo");
    ps::tar(
        &p.root().join("evil.tar.gz"),
        &[E::File("linux-x/a.c", "a\n"), E::Fifo(&name)],
    );
    let run = p.xtask(&["apply", "evil"]);
    run.fails_with(1).stderr_has(SHOWN);
    no_raw_controls(&run);
}

#[test]
fn a_patch_path_is_shown_escaped() {
    let p = Project::new();
    p.file("src/drivers/a.c", "a\n");
    p.file(
        "patches/evil/0001-evil.patch",
        format!("--- a/drivers/{ESCAPES}.c\n+++ b/drivers/{ESCAPES}.c\n@@ -1 +1 @@\n-a\n+b\n"),
    );
    p.file("patches/evil/series", "0001-evil.patch\n");
    p.recipe(
        "evil",
        &ps::recipe_text(
            "evil",
            "1.0",
            "[source]\nlocal = \"src\"\n\n[[patch]]\nfile = \"0001-evil.patch\"\n",
        ),
    );
    for args in [&["apply", "evil"][..], &["plan", "evil"][..]] {
        let run = p.xtask(args);
        no_raw_controls(&run);
        if run.code != 0 {
            run.stderr_has(SHOWN);
        }
    }
    p.xtask(&["apply", "evil"]).fails_with(1);
}
