#!/usr/bin/env bash
# The committed profile is what `odsim fit` gives on the committed data: refitting the primary run
# reproduces models/calib/h200.yaml byte for byte except the command line it records, so a changed
# CSV, fitter or seed file without its refit (a stale profile every study would use) fails here.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=${ODSIM:-./build/rel/odsim}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$odsim fit validation/data/h200 -o "$tmp/h200.yaml" --profile h200-pcie5-vm --json > "$tmp/fit.json" || { echo "profile: odsim fit failed"; exit 1; }
if ! diff <(grep -v '^  command: ' models/calib/h200.yaml) <(grep -v '^  command: ' "$tmp/h200.yaml") >"$tmp/diff"; then
  echo "FAIL: models/calib/h200.yaml is not the fit of validation/data/h200 (refit it: see its sources.command)"
  head -20 "$tmp/diff"
  exit 1
fi
# --json: stdout is one document whose parameters are the profile's, value for value
python3 - "$tmp/fit.json" "$tmp/h200.yaml" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
assert d["rows"]["fit"] > 0 and len(d["params"]) > 100, d["rows"]
for p in d["params"]:   # a curve's knot (NAME_256MiB) lies under its curve's name (NAME: {points: ...})
    assert ("%s:" % p["name"]) in text or ("%s:" % p["name"].rsplit("_", 1)[0]) in text, p["name"]
h2d = [p for p in d["params"] if p["name"] == "h2d_GBps"][0]
assert 50 < h2d["value"] < 60 and h2d["unit"] == "GB/s" and h2d["origin"].startswith("fitted"), h2d
PY
echo "profile: models/calib/h200.yaml is the fit of the committed data; fit --json gives its parameters"
