#!/usr/bin/env python3
"""Read `cargo check --message-format=json` output; for every privacy error from a use
outside the crate, and every private_interfaces warning, give the definition back `pub`."""
import json, re, sys, pathlib

root = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else ".")
fixes = set()   # (file, line)
fields = set()  # (struct, field)
reexports = set()  # (file re-exporting, name)
def span_of(children, pat):
    for c in children:
        if re.search(pat, c["message"]) and c["spans"]:
            s = c["spans"][0]; return (s["file_name"], s["line_start"])
for l in open(sys.argv[1]):
    try: m = json.loads(l)
    except Exception: continue
    if m.get("reason") != "compiler-message": continue
    msg = m["message"]; code = (msg.get("code") or {}).get("code"); text = msg["message"]
    if code in ("E0603", "E0624"):
        sp = span_of(msg["children"], r"defined here") or next(((s["file_name"], s["line_start"]) for s in msg["spans"] if "defined here" in (s.get("label") or "")), None)
        if sp: fixes.add(sp)
        else: print("no span:", text, file=sys.stderr)
    elif code in ("E0616", "E0451"):
        f = re.match(r"fields? `([^`]+)`(?: and `([^`]+)`)?.* of (?:struct|union|variant) `([^`]+)` (?:is|are) private", text)
        if f:
            st = f.group(3).split("::")[-1].split("<")[0]
            for name in re.findall(r"`([^`]+)`", text.split(" of ")[0]): fields.add((st, name))
        else: print("unparsed:", text, file=sys.stderr)
    elif code in ("E0364", "E0365"):
        name = re.match(r"`([^`]+)`", text).group(1)
        reexports.add((msg["spans"][0]["file_name"], name))
    elif code == "private_interfaces" or (code is None and "more private than" in text):
        for c in msg["children"]:
            for s in c["spans"]:
                fixes.add((s["file_name"], s["line_start"]))
# apply line fixes
n = 0
for (fn, line) in sorted(fixes):
    p = root / fn; lines = p.read_text().split("\n"); i = line - 1
    # walk back over attributes to the item line holding pub(crate)
    for j in range(i, min(i + 3, len(lines))):
        if "pub(crate) " in lines[j]:
            lines[j] = lines[j].replace("pub(crate) ", "pub ", 1); n += 1; break
    else: print("no pub(crate) at", fn, line, lines[i].strip(), file=sys.stderr)
    p.write_text("\n".join(lines))
for (st, field) in sorted(fields):
    done = False
    for p in (root / "xtask/src").rglob("*.rs"):
        t = p.read_text(); mm = re.search(r"struct %s\b[^{;]*\{" % re.escape(st), t)
        if not mm: continue
        end = t.find("\n}", mm.end())
        body = t[mm.end():end]
        nb, k = re.subn(r"pub\(crate\) (%s *:)" % re.escape(field), r"pub \1", body, count=1)
        if k: p.write_text(t[:mm.end()] + nb + t[end:]); n += 1; done = True; break
    if not done: print("field not found:", st, field, file=sys.stderr)
for (fn, name) in sorted(reexports):
    base = (root / fn).parent
    pat = re.compile(r"^(\s*)pub\(crate\) ((?:async |unsafe |const )*(?:fn|struct|enum|const|static|trait|type|mod|union) +%s\b)" % re.escape(name), re.M)
    hits = [p for p in base.rglob("*.rs") if pat.search(p.read_text())]
    if not hits:  # re-exported from another group (`pub use crate::shared::x::Y`)
        hits = [p for p in (root / "xtask/src").rglob("*.rs") if pat.search(p.read_text())]
    if len(hits) != 1: print("re-export source ambiguous:", fn, name, hits, file=sys.stderr); continue
    t = hits[0].read_text(); hits[0].write_text(pat.sub(r"\1pub \2", t, count=1)); n += 1
print(f"restored {n}", file=sys.stderr)
