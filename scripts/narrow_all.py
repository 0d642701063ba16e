#!/usr/bin/env python3
"""Every `pub` item, field and module of the workspace's Rust sources
becomes `pub(crate)` (issue #32: items are `pub(crate)` unless another
crate uses them); `scripts/pub_loop.sh` then gives `pub` back to what
another crate uses, as the compiler names it.

    python3 scripts/narrow_all.py [ROOT]

Narrowed: the xtask library (`xtask/src`, but its binaries' roots
`main.rs` and `bin/`, which other crates never see), the bench
(`bench/src`) and the integration tests (`xtask/tests`), whose items no
other crate can use. Prints how many it narrowed.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
ITEM = re.compile(
    r"^(\s*)pub (?=(?:(?:async |unsafe |const |extern \"C\" )*fn|struct|enum|const|static"
    r"|trait|type|mod|union|use|macro_rules) |[A-Za-z_][A-Za-z0-9_]* *:)"
)


def skipped(src, f):
    rel = f.relative_to(src)
    return src.name == "src" and src.parent.name == "xtask" and (
        rel.parts == ("main.rs",) or rel.parts[0] == "bin"
    )


n = 0
for src in [root / "xtask/src", root / "bench/src", root / "xtask/tests"]:
    for f in sorted(src.rglob("*.rs")):
        if skipped(src, f):
            continue
        text = f.read_text()
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if ITEM.match(line):
                lines[i] = line.replace("pub ", "pub(crate) ", 1)
                n += 1
        new = "\n".join(lines)
        if new != text:
            f.write_text(new)
print(f"narrowed {n}", file=sys.stderr)
