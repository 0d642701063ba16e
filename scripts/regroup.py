#!/usr/bin/env python3
"""Groups xtask's top-level modules by stage (issue #32), mechanically.

Run from the repository root on a clean tree close to the main of stop 36:

    python3 scripts/regroup.py          # moves, rewrites, renames, cargo fmt
    cargo check --workspace --all-targets

What it does, in order:
  1. `git mv`s every top-level module of `xtask/src` into its group folder
     (MOVES), and the few files whose word collides where modules meet
     (CHILD_RENAMES);
  2. writes the group folders' `mod.rs` (a `//!` header and their `pub mod`
     lines) and `lib.rs`'s list of groups;
  3. rewrites every `crate::<module>` path of xtask/src and `xtask::<module>`
     path of xtask/src/main.rs, xtask/src/bin, xtask/tests, bench and
     xtask-run (code and comments, never string literals), the relative
     paths of `include_str!`/`include_bytes!` in moved files, and every
     `xtask/src/<path>` in the repository's text files (docs, workflows,
     knowledge files, tests);
  4. renames the types whose names collide where modules meet (RENAMES):
     the definition, every path through the defining module or a module
     re-exporting it, and every bare use in a file that imports it;
  5. runs `cargo fmt --all`.

It refuses a dirty tree, a module it has no place for, a destination that
exists, a path it cannot rewrite; on a tree already grouped it says so and
changes nothing. It commits nothing: review with `git status`/`git diff -M`.

What it leaves by hand: a new top-level module (add it to MOVES, in a group
whose imports point one way); a use tree nested under a renamed module
(`crate::{packaging::{dkms, x}}`, refused); a renamed type reached through
a glob import or a re-export it is not told of (RENAMES' last field), which
the compiler names; prose naming modules without their `xtask/src/` path
(ARCHITECTURE.md, `//!` headers); an import between groups that points up
(`repo::no_import_cycles` names it with its file:line).
"""

import os
import re
import subprocess
import sys

SRC = "xtask/src"

# Each top-level module of xtask/src and its new module path. A group named
# like a module it holds (`fetch`) keeps that module's files and gains the
# others as children.
MOVES = {
    # shared infrastructure, below everything
    "diag": "shared::diag",
    "error": "shared::error",
    "hash": "shared::hash",
    "report": "shared::report",
    "settings": "shared::settings",
    "par": "shared::par",  # H5's parallel map (stop 36), if merged
    # package formats: the writers (below the recipe, which names a Format)
    "package": "formats",
    # input: what a run is given
    "invocation": "input::invocation",
    "kernel": "input::kernel",
    "knowledge": "input::knowledge",
    "placement": "input::placement",
    "range": "input::range",  # H5's one range grammar (stop 36), if merged
    "plan": "input::plan",
    "recipe": "input::recipe",
    "target": "input::target",
    "workspace": "input::workspace",
    # fetch: inputs into the verified cache, and their pins
    "fetch": "fetch",
    "cache": "fetch::cache",
    "diff": "fetch::diff",
    "lock": "fetch::lock",
    # apply: a pristine tree made into the patched or rewritten one
    "drift": "apply::drift",
    "extract": "apply::extract",
    "patch": "apply::patch",
    "state": "apply::state",
    "verify": "apply::verify",
    # the build line
    "build": "line",
    # release: packaging files, the dist publication, repositories
    "dist": "release::dist",
    "manifest": "release::manifest",
    "packaging": "release::packaging",
    "publish": "release::outcome",
    "render": "release::render",
    "repos": "release::repos",
    # GPU code objects
    "codeobj": "gpu::codeobj",
    "hipblaslt": "gpu::hipblaslt_cmake",
    "inplace": "gpu::inplace",
    # doctor
    "doctor": "doctor",
    # the command line
    "commands": "cli::commands",
    "run": "cli::run",
    "user": "cli::user",
}

# Modules of MOVES that may be absent (other branches of the stop add them).
OPTIONAL = {"par", "range"}

# Files inside a module renamed where their word meets another module's of
# the same word: (old module path, new last segment).
CHILD_RENAMES = {
    "packaging::dkms": "dkms_files",
    "packaging::config": "config_files",
}

# The groups, in lib.rs's order, each with its mod.rs header.
GROUPS = {
    "shared": "Shared infrastructure every stage stands on: located\n"
    "//! diagnostics and typed errors, the exit mapping, reporting (the one\n"
    "//! place that prints), settings, sha256. See `ARCHITECTURE.md` here.",
    "formats": None,
    "input": "What a run is given: recipes and their plan, kernel versions and\n"
    "//! ranges, where a patch's paths land, the build target, the knowledge\n"
    "//! files, the workspace and how the tool was invoked. Never touches the\n"
    "//! network. See `ARCHITECTURE.md` here.",
    "fetch": None,
    "apply": "The apply stage: extraction into a staging tree, the patch\n"
    "//! engine, the state record, verdicts on trees and on newer upstreams.\n"
    "//! See `ARCHITECTURE.md` here.",
    "line": None,
    "release": "What a build leaves: the packaging files rendered from\n"
    "//! templates, the atomic publication of a dist folder and its\n"
    "//! manifest, a build's outcome, package repositories. See\n"
    "//! `ARCHITECTURE.md` here.",
    "gpu": "GPU code objects: reading and rewriting them (`codeobj`),\n"
    "//! hipBLASLt's CMake build (`hipblaslt_cmake`), the in-place rewrite of\n"
    "//! an installed library (`inplace`). See `ARCHITECTURE.md` here.",
    "doctor": None,
    "cli": "The command line: one file per command (`commands`), the dispatch\n"
    "//! and exit mapping (`run`), the installed `rocm-patchkit` command\n"
    "//! (`user`). See `ARCHITECTURE.md` here.",
}

# Types renamed where two of one name meet: (new module path of the
# defining file, old name, new name, modules it is also reached through).
RENAMES = [
    ("apply::state", "Manifest", "TreeListing", []),
    ("gpu::codeobj::cache", "Cache", "VerdictCache", ["gpu::codeobj"]),
    ("apply::patch::stage", "Staging", "StagedTree", []),
    ("gpu::inplace::record", "State", "FileState", []),
    ("fetch::tally", "Tally", "FetchTally", []),
    ("doctor::steps", "Step", "NextStep", ["doctor"]),
]

RUST_ROOTS = ["xtask/src", "xtask/tests", "bench", "xtask-run"]
TEXT_EXT = (".rs", ".md", ".toml", ".yml", ".yaml", ".sh", ".py", ".txt", ".json")
SELF = "scripts/regroup.py"


def die(msg):
    sys.stderr.write(f"regroup: {msg}\n")
    sys.exit(1)


def git(*args, capture=False):
    r = subprocess.run(["git", *args], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"git {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------- lexing


def spans(text):
    """(kind, start, end) of the comments ('c') and literals ('s') of Rust
    source; the rest is code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(("c", i, j))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(("c", i, j))
            i = j
        elif m := re.compile(r'b?r(#*)"').match(text, i):
            if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i += 1
                continue
            end = text.find('"' + m.group(1), m.end())
            if end < 0:
                die("unterminated raw string")
            out.append(("s", i, end + 1 + len(m.group(1))))
            i = end + 1 + len(m.group(1))
        elif c == '"' or (c == "b" and text.startswith('b"', i) and not prev_ident(text, i)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(("s", i, j + 1))
            i = j + 1
        elif c == "'":
            if text.startswith("\\", i + 1):
                j = text.find("'", i + 3)
                out.append(("s", i, j + 1))
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                out.append(("s", i, i + 3))
                i += 3
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return out


def prev_ident(text, i):
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def masked(text, keep_comments=False):
    """`text` with literals (and comments unless kept) blanked, same length."""
    chars = list(text)
    for kind, a, b in spans(text):
        if kind == "s" or not keep_comments:
            for k in range(a, b):
                if chars[k] != "\n":
                    chars[k] = " "
    return "".join(chars)


def comments_only(text):
    """`text` with everything but comments blanked, same length."""
    chars = [c if c == "\n" else " " for c in text]
    for kind, a, b in spans(text):
        if kind == "c":
            chars[a:b] = text[a:b]
    return "".join(chars)


def apply_edits(text, edits):
    """Replaces (start, end, new) ranges, which must not overlap."""
    edits = sorted(set(edits))
    out, at = [], 0
    for a, b, new in edits:
        if a < at:
            die(f"overlapping edits at offset {a}")
        out.append(text[at:a])
        out.append(new)
        at = b
    out.append(text[at:])
    return "".join(out)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


# ---------------------------------------------------------- module paths

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
SEP = r"\s*::\s*"


def module_map():
    """Old module path (tuple) -> new module path (tuple), top-level moves
    and child renames."""
    out = {}
    for old, new in MOVES.items():
        out[(old,)] = tuple(new.split("::"))
    for old, last in CHILD_RENAMES.items():
        parts = tuple(old.split("::"))
        out[parts] = out[parts[:1]] + parts[1:-1] + (last,)
    return out


MAP = module_map()


def map_path(segs):
    """The new segments for a path from the crate root, or None if it
    names nothing moved."""
    for k in range(len(segs), 0, -1):
        new = MAP.get(tuple(segs[:k]))
        if new is not None:
            # a renamed child under a moved parent: the child's entry wins
            return list(new) + segs[k:]
    return None


def rewrite_root_paths(text, roots, where):
    """Rewrites `<root>::a::b` and `<root>::{a::b, c}` for each root word."""
    code = masked(text, keep_comments=True)
    edits = []
    pat = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(roots) + r")" + SEP)
    for m in pat.finditer(code):
        if m.group(1) == "crate" and code[max(0, m.start() - 4) : m.start()].endswith("pub("):
            continue
        start = m.end()
        if code.startswith("{", start):
            edits += rewrite_brace(code, start, where)
        else:
            edits += rewrite_segments(code, start, where)
    return apply_edits(text, edits)


def rewrite_segments(code, start, where):
    pm = re.compile(IDENT + "(?:" + SEP + IDENT + ")*").match(code, start)
    if not pm:
        return []
    segs = re.split(SEP, pm.group(0))
    bounds = [(x.start(), x.end()) for x in re.finditer(IDENT, pm.group(0))]
    new = map_path(segs)
    if new is None:
        return []
    # replace only the segments the mapping consumed
    for k in range(len(segs), 0, -1):
        if tuple(segs[:k]) in MAP:
            break
    end = start + bounds[k - 1][1]
    return [(start, end, "::".join(new[: len(new) - (len(segs) - k)]))]


def rewrite_brace(code, open_at, where):
    """Each item of `{a::b, c as d, e::{f, g}}` right after a root."""
    close = matching(code, open_at)
    edits = []
    depth, item_start = 0, open_at + 1
    for j in range(open_at + 1, close + 1):
        ch = code[j]
        if ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        elif (ch == "," and depth == 0) or j == close:
            item = code[item_start:j]
            lead = len(item) - len(item.lstrip())
            s = item_start + lead
            nested = "{" in item
            e = rewrite_segments(code, s, where)
            if nested and e:
                head = re.match(IDENT + "(?:" + SEP + IDENT + ")*", code[s:]).group(0)
                segs = re.split(SEP, head)
                if any(k[: len(segs)] == tuple(segs) and len(k) > len(segs) for k in MAP):
                    die(f"{where}:{line_of(code, s)}: a nested use tree under a renamed module; rewrite it by hand first")
            edits += e
            item_start = j + 1
    return edits


def matching(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    die("unbalanced braces")


# ------------------------------------------------------------------ moves


def module_files(mod_path):
    """(file or dir) paths on disk of a module path of the old tree."""
    base = os.path.join(SRC, *mod_path)
    return [p for p in (base + ".rs", base) if os.path.exists(p)]


def dest_of(mod_path, new_path, src):
    base_new = os.path.join(SRC, *new_path)
    if os.path.isdir(src):
        return base_new
    return base_new + ".rs"


def preflight():
    if not os.path.isfile(os.path.join(SRC, "lib.rs")):
        die("run me from the repository root")
    lib = read(os.path.join(SRC, "lib.rs"))
    declared = re.findall(r"^pub mod (\w+);", lib, re.M)
    groups = [g for g in GROUPS]
    if sorted(declared) == sorted(groups):
        print("regroup: xtask/src is already grouped; nothing to do")
        sys.exit(0)
    if git("status", "--porcelain", "--untracked-files=no").strip():
        die("the work tree has uncommitted changes; commit or stash them first")
    unknown = sorted(set(declared) - set(MOVES))
    if unknown:
        die(f"top-level modules with no place in MOVES: {', '.join(unknown)}; add them")
    missing = sorted(set(MOVES) - set(declared) - OPTIONAL)
    for name in sorted(OPTIONAL - set(declared)):
        del MOVES[name]
    MAP.clear()
    MAP.update(module_map())
    if missing:
        die(f"modules in MOVES that lib.rs does not declare: {', '.join(missing)}; remove them")
    other = [l for l in lib.splitlines() if l and not l.startswith("//!") and not re.match(r"pub mod \w+;$", l)]
    if other:
        die(f"lib.rs holds more than `//!` lines and `pub mod` lines: {other[:3]}; extend the script")
    for old in CHILD_RENAMES:
        if not module_files(tuple(old.split("::"))):
            die(f"{old} (CHILD_RENAMES) is not in the tree")
    for path, old, new, _ in RENAMES:
        if new in defined_names():
            die(f"{new} is already a type name; choose another for {path}::{old}")
    return lib


_names = None


def defined_names():
    global _names
    if _names is None:
        _names = set()
        for f in rust_files([SRC]):
            _names |= set(re.findall(r"\b(?:struct|enum|trait|type)\s+(\w+)", read(f)))
    return _names


def rust_files(roots):
    out = []
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in ("target", ".git")]
            out += [os.path.join(d, f) for f in files if f.endswith(".rs")]
    return sorted(out)


def plan_moves():
    """[(src, dst)] on disk, and the file map old path -> new path."""
    moves = []
    for old, last in CHILD_RENAMES.items():
        parts = tuple(old.split("::"))
        for src in module_files(parts):
            dst = os.path.join(os.path.dirname(src), last + (".rs" if src.endswith(".rs") else ""))
            moves.append((src, dst))
    for old, new in MOVES.items():
        if (old,) == tuple(new.split("::")):
            continue
        for src in module_files((old,)):
            moves.append((src, dest_of((old,), new.split("::"), src)))
    return moves


def file_map(moves):
    """Every tracked path under xtask/src (files and folders) to its new one."""
    out = {}
    tracked = git("ls-files", SRC).split()
    for f in tracked:
        new = f
        for src, dst in moves:  # child renames first, then their parents
            if new == src or new.startswith(src + "/"):
                new = dst + new[len(src):]
        out[f] = new
    for src, dst in moves:
        if os.path.isdir(src):
            out[src] = dst
    return out


def do_moves(moves):
    for src, dst in moves:
        if os.path.exists(dst) and not os.path.isdir(dst):
            die(f"{dst} exists; refusing to move {src} onto it")
        if os.path.isdir(src) and os.path.exists(dst):
            die(f"{dst} exists; refusing to move {src} onto it")
    for src, dst in moves:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        git("mv", src, dst)


# --------------------------------------------------------------- rewrites


def fix_includes(fmap):
    """Relative include_str!/include_bytes! paths of moved files."""
    rev = {v: k for k, v in fmap.items()}
    for new in fmap.values():
        if not new.endswith(".rs") or not os.path.isfile(new):
            continue
        old = rev[new]
        if os.path.dirname(old) == os.path.dirname(new):
            continue
        text = read(new)

        def repl(m):
            rel = m.group(2)
            target = os.path.normpath(os.path.join(os.path.dirname(old), rel))
            target = fmap.get(target, target)
            return f'{m.group(1)}("{os.path.relpath(target, os.path.dirname(new))}")'

        out = re.sub(r'(include_str!|include_bytes!)\("([^"/][^"]*)"\)', repl, text)
        if "#[path" in text and os.path.basename(new) != "mod.rs" and "/" not in os.path.relpath(old, SRC):
            die(f"{new}: a #[path] attribute in a moved top-level file; check it by hand")
        if out != text:
            write(new, out)


def rewrite_rust():
    for f in rust_files(RUST_ROOTS):
        text = read(f)
        roots = ["crate"]
        in_lib = f.startswith(SRC + "/") and not (f == SRC + "/main.rs" or f.startswith(SRC + "/bin/"))
        if not in_lib:
            roots = ["xtask"] if f != SRC + "/main.rs" else ["xtask"]
        out = rewrite_root_paths(text, roots, f)
        out = rewrite_child_renames(f, out)
        out = rewrite_bound_names(f, out)
        if out != text:
            write(f, out)


def renamed_last():
    """New module path -> old last segment, for the modules whose own name
    changes (`package` -> `formats`)."""
    out = {}
    for old, new in MAP.items():
        if old[-1] != new[-1]:
            out[new] = old[-1]
    return out


def rewrite_bound_names(f, text):
    """`package::write` where the file imported `crate::package` (now
    `use crate::formats;`, binding `formats`)."""
    renamed = renamed_last()
    code = masked(text)
    edits = []
    for path, at in use_leaves(code):
        full = resolve(path, f)
        if full is None or tuple(full) not in renamed:
            continue
        if re.match(r"\s*as\b", code[at + len(path[-1]) :]):
            continue
        old = renamed[tuple(full)]
        for m in re.finditer(r"(?<![A-Za-z0-9_:])" + old + r"(?=\s*::)", code):
            edits.append((m.start(), m.end(), full[-1]))
    for path, at in use_leaves(code):
        full = resolve(path, f)
        kids = children_renamed().get(tuple(full or ()))
        if not kids or re.match(r"\s*as\b", code[at + len(path[-1]) :]):
            continue
        for old_kid, new_kid in kids.items():
            pat = r"(?<![A-Za-z0-9_:])" + path[-1] + SEP + r"(" + old_kid + r")\b"
            for m in re.finditer(pat, code):
                edits.append((m.start(1), m.end(1), new_kid))
    return apply_edits(text, edits)


def children_renamed():
    """New parent path -> {old child word: new child word}."""
    out = {}
    for old, last in CHILD_RENAMES.items():
        parts = tuple(old.split("::"))
        out.setdefault(MAP[parts[:1]] + parts[1:-1], {})[parts[-1]] = last
    return out


def rewrite_child_renames(f, text):
    """`mod dkms;` in the parent and `dkms::`/`super::dkms` beside it."""
    for old, last in CHILD_RENAMES.items():
        parts = old.split("::")
        parent_dir = os.path.join(SRC, *[MOVES[parts[0]].replace("::", "/")] + parts[1:-1])
        word = parts[-1]
        if os.path.dirname(f) != parent_dir and not f.startswith(parent_dir + "/"):
            continue
        code = masked(text, keep_comments=True)
        edits = []
        is_parent = f == os.path.join(parent_dir, "mod.rs")
        pats = [r"(?<![A-Za-z0-9_:])" + word + r"(?=\s*::)", r"(?<=\bmod )" + word + r"(?=;)"] if is_parent else []
        pats.append(r"(?<=super::)" + word + r"\b")
        pats.append(r"(?<=self::)" + word + r"\b")
        for p in pats:
            edits += [(m.start(), m.end(), last) for m in re.finditer(p, code)]
        text = apply_edits(text, edits)
    return text


def rewrite_text_paths(fmap):
    """`xtask/src/<old>` in every tracked text file, longest match first."""
    keys = sorted(fmap, key=len, reverse=True)
    pat = re.compile(r"xtask/src/([A-Za-z0-9_./*-]*[A-Za-z0-9_*])")
    for f in git("ls-files").split():
        if f == SELF or not f.endswith(TEXT_EXT) or not os.path.isfile(f) or "/snapshots/" in f:
            continue
        text = read(f)

        def repl(m):
            path = "xtask/src/" + m.group(1)
            for k in keys:
                if path == k or path.startswith(k + "/") or path.startswith(k.removesuffix(".rs") + "/"):
                    if path == k or path.startswith(k + "/"):
                        return fmap[k] + path[len(k):]
            return path

        out = pat.sub(repl, text)
        if out != text:
            write(f, out)


def write_groups(lib):
    header = "\n".join(l for l in lib.splitlines() if l.startswith("//!"))
    body = "".join(f"pub mod {g};\n" for g in GROUPS)
    write(os.path.join(SRC, "lib.rs"), header + "\n\n" + body)
    children = {}
    for old, new in MOVES.items():
        parts = new.split("::")
        if len(parts) == 2:
            children.setdefault(parts[0], []).append(parts[1])
    for group, kids in children.items():
        mod = os.path.join(SRC, group, "mod.rs")
        decls = "".join(f"pub mod {k};\n" for k in sorted(kids))
        if GROUPS[group] is None:  # an existing module gains children
            text = read(mod)
            last = [m.end() for m in re.finditer(r"^(pub )?mod \w+;\n", text, re.M)]
            if not last:
                die(f"{mod}: no `mod` lines to put {kids} beside")
            text = text[: last[-1]] + decls + text[last[-1] :]
            write(mod, text)
        else:
            if os.path.exists(mod):
                die(f"{mod} exists")
            write(mod, f"//! {GROUPS[group]}\n\n{decls}")
            git("add", mod)


# ---------------------------------------------------------------- renames


def file_module(f):
    """The module path of a file of the library, None for other crates."""
    if not f.startswith(SRC + "/") or f == SRC + "/main.rs" or f.startswith(SRC + "/bin/"):
        return None
    parts = os.path.relpath(f, SRC)[:-3].split("/")
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return parts


def use_leaves(code):
    """(path segments, offset of the last segment) of every leaf of every
    `use` tree in masked code."""
    out = []
    for m in re.finditer(r"\buse\s+", code):
        end = code.find(";", m.end())
        toks = [(x.start() + m.end(), x.group(0)) for x in re.finditer(IDENT + r"|::|[{},*]", code[m.end():end])]
        expand(toks, [0], [], out)
    return out


def expand(toks, i, prefix, out):
    path = list(prefix)
    last = None
    while i[0] < len(toks):
        at, tok = toks[i[0]]
        if tok == "{":
            i[0] += 1
            while i[0] < len(toks) and toks[i[0]][1] != "}":
                if toks[i[0]][1] == ",":
                    i[0] += 1
                else:
                    expand(toks, i, path, out)
            i[0] += 1
            return
        if tok in ("}", ","):
            break
        if tok == "::":
            i[0] += 1
            continue
        if tok == "*":
            i[0] += 1
            return
        if tok == "as":
            i[0] += 2
            break
        if not (tok == "self" and path):
            path.append(tok)
        last = at
        i[0] += 1
    if last is not None:
        out.append((path, last))


def resolve(path, f):
    """`path` from the crate root, as seen from file `f`; None when it
    starts with a name in scope (or the file is not the library's)."""
    if not path:
        return None
    if path[0] in ("crate", "xtask"):
        return path[1:]
    here = file_module(f)
    if path[0] not in ("super", "self") or here is None:
        return None
    base, rest = list(here), list(path)
    if rest[0] == "self":
        rest.pop(0)
    while rest and rest[0] == "super":
        if not base:
            return None
        base.pop()
        rest.pop(0)
    return base + rest


def accepted(qual, f, homes):
    """Whether the path `qual` (the segments before the type's name), seen
    from file `f`, names one of `homes` (module paths as lists)."""
    full = resolve(qual, f)
    if full is not None:
        return full in homes
    if not qual:
        return False
    here = file_module(f)
    for h in homes:
        if h[-len(qual):] != qual:
            continue
        if len(qual) >= 2 or (here is not None and here[: len(h) - 1] == h[:-1]):
            return True
    return False


def imports_path(code, f, homes, qual):
    """Whether the file brings the module named by the one-segment `qual`
    into scope from one of `homes` (`use crate::apply::state;`)."""
    return any(p and p[-1] == qual[0] and resolve(p, f) in homes for p, _ in use_leaves(code))


INCLUDED_BY = {}


def rename_types():
    files = rust_files(RUST_ROOTS)
    for f in files:
        for n in re.findall(r'#\[path = "([^"]+)"\]', read(f)):
            INCLUDED_BY[os.path.normpath(os.path.join(os.path.dirname(f), n))] = f
    for path, old, new, reexports in RENAMES:
        parts = path.split("::")
        cands = [os.path.join(SRC, *parts) + ".rs", os.path.join(SRC, *parts, "mod.rs")]
        home = next((c for c in cands if os.path.isfile(c)), None)
        if home is None:
            die(f"{path}: no file for the module defining {old}")
        if not re.search(r"\b(struct|enum|type|trait)\s+" + old + r"\b", read(home)):
            die(f"{home} defines no {old}")
        homes = [parts] + [r.split("::") for r in reexports]
        touched, bare_files = [], set()
        for f in files:
            text = read(f)
            if old not in text:
                continue
            code = masked(text)
            edits = []
            parent = INCLUDED_BY.get(f)
            bare = f == home or (parent in bare_files and re.search(r"\buse super::\*", code))
            for leaf, at in use_leaves(code):
                if leaf and leaf[-1] == old and accepted(leaf[:-1], f, homes):
                    edits.append((at, at + len(old), new))
                    bound = re.match(r"\s*as\b", code[at + len(old):])
                    bare = bare or not bound
            for m in re.finditer(r"(?<![A-Za-z0-9_])" + old + r"(?![A-Za-z0-9_])", code):
                if any(a == m.start() for a, _, _ in edits):
                    continue
                q = re.search(r"((?:" + IDENT + SEP + r")+)$", code[max(0, m.start() - 300) : m.start()])
                if q:
                    qual = re.split(SEP, q.group(1).strip())[:-1]
                    if accepted(qual, f, homes) or (
                        len(qual) == 1 and imports_path(code, f, homes, qual)
                    ):
                        edits.append((m.start(), m.end(), new))
                elif bare:
                    edits.append((m.start(), m.end(), new))
            if bare:
                bare_files.add(f)
            if bare:  # doc references: `Old`, [`Old`], `Old::x`
                doc = comments_only(text)
                for m in re.finditer(r"(?<=[`\[])" + old + r"(?![A-Za-z0-9_])", doc):
                    edits.append((m.start(), m.end(), new))
            if edits:
                write(f, apply_edits(text, edits))
                touched.append(f)
        if not touched:
            die(f"{path}::{old}: nothing renamed")
        print(f"regroup: {path}::{old} -> {new} in {len(touched)} files")


def main():
    lib = preflight()
    moves = plan_moves()
    fmap = file_map(moves)
    do_moves(moves)
    fix_includes(fmap)
    rewrite_rust()
    write_groups(lib)
    rewrite_text_paths(fmap)
    rename_types()
    subprocess.run(["cargo", "fmt", "--all"], check=True)
    left = []
    for f in rust_files([SRC]):
        code = masked(read(f))
        for top in MOVES:
            if MOVES[top].split("::")[0] == top:
                continue
            for m in re.finditer(r"\bcrate::" + top + r"\b", code):
                left.append(f"{f}:{line_of(code, m.start())}: crate::{top}")
    if left:
        die("paths left unrewritten:\n  " + "\n  ".join(left))
    print("regroup: done; now `cargo check --workspace --all-targets` and review `git status`")


if __name__ == "__main__":
    main()
