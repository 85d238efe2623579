#!/usr/bin/env bash
# What-ifs answer through one assembly: plan without --calib is plan with the study's default
# profile, found under the data root from any directory.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
root=$(pwd)
odsim=$root/build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in dense fathom sparq pertoken hashattn landmark; do
  $odsim plan --model qwen3-8b --method $m --context 1M --json > "$tmp/default.json"
  $odsim plan --model qwen3-8b --method $m --context 1M --calib models/calib/h200.yaml --json > "$tmp/h200.json"
  cmp -s "$tmp/default.json" "$tmp/h200.json" || { echo "plan $m: default calibration is not models/calib/h200.yaml"; exit 1; }
  (cd "$tmp" && ODSIM_ROOT=$root $odsim plan --model qwen3-8b --method $m --context 1M --json > "$tmp/elsewhere.json")
  cmp -s "$tmp/default.json" "$tmp/elsewhere.json" || { echo "plan $m: another directory finds other data"; exit 1; }
done
echo "plan: the default calibration is models/calib/h200.yaml, from any directory"
