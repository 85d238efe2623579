#!/usr/bin/env bash
# The default scenario's report against its golden copy (tests/golden/default.txt), on the frozen
# profile tests/data/golden_calib.yaml so that refitting models/calib/h200.yaml leaves it alone.
# Updating it is a reviewed change: `make golden` rewrites it, CI never does.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
./build/rel/odsim run scenarios/default.yaml --set calibration=tests/data/golden_calib.yaml | sed '/^odsim [0-9][0-9.]* (/d' > "$tmp"
if ! diff -u tests/golden/default.txt "$tmp" > "$tmp.diff"; then
  head -40 "$tmp.diff"; rm -f "$tmp.diff"
  echo "the default scenario's output changed: review it, then 'make golden'"
  exit 1
fi
rm -f "$tmp.diff"
echo "golden: default scenario output unchanged ($(wc -l < "$tmp") lines)"
