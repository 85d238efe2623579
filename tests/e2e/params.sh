#!/usr/bin/env bash
# odsim params --json: one JSON document holding every parameter the text lists (the same keys, in the
# same order, with their defaults), a section alone when one is named; bad arguments refused.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$odsim params > "$tmp/p.txt" && $odsim params --json > "$tmp/p.json" && $odsim params replay --json > "$tmp/r.json" \
  || { echo "FAIL: odsim params"; exit 1; }
python3 - "$tmp/p.txt" "$tmp/p.json" "$tmp/r.json" <<'PY' || exit 1
import json, sys
text = [l.split()[0] for l in open(sys.argv[1]) if l.startswith("  ")]
d, r = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
keys = [p["key"] for s in d["sections"] for p in s["params"]]
hw = [h["key"] for h in d["hardware"]]
# the text prints the scenario and method sections, the generator, the hardware, quality, replay
parts = {s["part"] for s in d["sections"]}
assert parts == {"scenario", "method", "generator", "quality", "replay"}, parts
assert sorted(text) == sorted(keys + hw), set(text) ^ set(keys + hw)
dur = [p for s in d["sections"] if s["section"] == "run" for p in s["params"] if p["key"] == "duration_s"][0]
assert dur["type"] == "seconds" and dur["default"] == "120s" and dur["min"] > 0, dur
mode = [p for s in d["sections"] if s["section"] == "serving" for p in s["params"] if p["key"] == "mode"][0]
assert "streams" in mode["choices"] and "processes" in mode["choices"], mode
assert {s["part"] for s in r["sections"]} == {"replay"} and r["hardware"] == [], r
print("params --json: %d parameters and %d hardware keys, as the text lists them" % (len(keys), len(hw)))
PY
set +e; $odsim params --json --bogus > /dev/null 2>&1; rc1=$?; $odsim params nosuch --json > /dev/null 2>&1; rc2=$?; set -e
[ "$rc1" = 2 ] && [ "$rc2" = 2 ] || { echo "FAIL: bad params arguments gave $rc1 $rc2"; exit 1; }
