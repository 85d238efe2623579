#!/usr/bin/env bash
# make install: an installed odsim finds its data under PREFIX/share/odsim from any directory, and
# answers as the checkout does (plan and a short run give the same output).
set -u
cd "${ODSIM_ROOT:-.}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
make -s install PREFIX="$tmp/usr" >/dev/null || { echo "make install failed"; exit 1; }
[ -x "$tmp/usr/bin/odsim" ] && [ -f "$tmp/usr/share/odsim/models/calib/h200.yaml" ] || { echo "FAIL: install lacks the binary or the data"; exit 1; }
./build/rel/odsim plan --model qwen3-8b --method fathom --context 1M --json > "$tmp/here.json"
(cd "$tmp" && env -u ODSIM_ROOT "$tmp/usr/bin/odsim" plan --model qwen3-8b --method fathom --context 1M --json) > "$tmp/installed.json" ||
  { echo "FAIL: the installed odsim cannot plan"; exit 1; }
cmp -s "$tmp/here.json" "$tmp/installed.json" || { echo "FAIL: the installed odsim plans differently"; diff "$tmp/here.json" "$tmp/installed.json" | head; exit 1; }
(cd "$tmp" && env -u ODSIM_ROOT "$tmp/usr/bin/odsim" run scenarios/default.yaml --set run.duration_s=2s --set 'sweep={}' > "$tmp/run.txt" 2>&1) ||
  { echo "FAIL: the installed odsim cannot run the default scenario by its data-root path"; cat "$tmp/run.txt"; exit 1; }
echo "install: PREFIX/bin/odsim finds PREFIX/share/odsim from any directory"
