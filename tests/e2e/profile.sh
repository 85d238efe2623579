#!/usr/bin/env bash
# The committed profile is what `odsim fit` gives on the committed data: refitting the primary run
# reproduces models/calib/h200.yaml byte for byte except the command line it records, so a changed
# CSV, fitter or seed file without its refit (a stale profile every study would use) fails here.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=${ODSIM:-./build/rel/odsim}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$odsim fit validation/data/h200 -o "$tmp/h200.yaml" --profile h200-pcie5-vm --quiet || { echo "profile: odsim fit failed"; exit 1; }
if ! diff <(grep -v '^  command: ' models/calib/h200.yaml) <(grep -v '^  command: ' "$tmp/h200.yaml") >"$tmp/diff"; then
  echo "FAIL: models/calib/h200.yaml is not the fit of validation/data/h200 (refit it: see its sources.command)"
  head -20 "$tmp/diff"
  exit 1
fi
echo "profile: models/calib/h200.yaml is the fit of the committed data"
