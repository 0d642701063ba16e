#!/usr/bin/env bash
# Gives `pub` back, after scripts/narrow_all.py, to every item another
# crate of the workspace uses: `cargo check` in JSON, then
# scripts/restore_pub.py reads the privacy errors (and private_interfaces
# warnings) and widens the definitions they name; again until no error is
# left (at most ten rounds). Run from the repository root; it uses the
# worktree's own target directory unless CARGO_TARGET_DIR says otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${TMPDIR:-/tmp}/pub-loop.$$
mkdir -p "$out"
for i in 1 2 3 4 5 6 7 8 9 10; do
  nice -n 10 cargo check --workspace --all-targets --keep-going \
    --message-format=json >"$out/check.json" 2>"$out/check.err"
  errs=$(grep -c '"level":"error"' "$out/check.json")
  echo "round $i: $errs errors"
  python3 "$here/restore_pub.py" "$out/check.json" . 2>&1 | tail -5 | tee "$out/restore.log"
  [ "$errs" = 0 ] && break
  if grep -q '^restored 0$' "$out/restore.log"; then
    echo "no progress: the errors left are for a hand (see $out/check.json)"
    break
  fi
done
echo "last check: $out/check.json"
