#!/usr/bin/env bash
# odsim compare: a run against itself differs nowhere (every difference 0); against the same
# scenario with 4x the replications on a slower link, the step p50 difference is positive, its
# Welch interval excludes 0 and matches the two runs' own intervals; a point in one run only is
# listed; a file that is not a run's JSON is an error naming the file and line.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$odsim run tests/data/small.yaml --json --set run.replications=4 > "$tmp/a.json" 2>/dev/null || { echo "run a failed"; exit 1; }
$odsim run tests/data/small.yaml --json --set run.replications=4 --set hardware.link=pcie3 > "$tmp/b.json" 2>/dev/null || { echo "run b failed"; exit 1; }
$odsim compare "$tmp/a.json" "$tmp/a.json" --json > "$tmp/same.json" || { echo "compare failed"; exit 1; }
$odsim compare "$tmp/a.json" "$tmp/b.json" --json > "$tmp/ab.json" || { echo "compare failed"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import json, sys, math
from statistics import mean
t = sys.argv[1]
same = json.load(open(t + "/same.json"))
for p in same["points"]:
    for f in p["figures"]:
        assert f["diff"] in (0, None), f
        assert f["differs"] in (False, None), f
a, b = json.load(open(t + "/a.json"))[0], json.load(open(t + "/b.json"))[0]
ab = json.load(open(t + "/ab.json"))
f = {x["name"]: x for x in ab["points"][0]["figures"]}["step_p50_s"]
assert abs(f["diff"] - (b["step_p50_s"]["mean"] - a["step_p50_s"]["mean"])) < 1e-12, f
# Welch by hand: each side's standard error from its t(0.975, 3) = 3.182446 half-width
ha = (a["step_p50_s"]["ci95_hi"] - a["step_p50_s"]["ci95_lo"]) / 2 / 3.18244630528
hb = (b["step_p50_s"]["ci95_hi"] - b["step_p50_s"]["ci95_lo"]) / 2 / 3.18244630528
se = math.sqrt(ha * ha + hb * hb)
assert f["diff"] > 0 and f["ci95_lo"] <= f["diff"] - 1.9 * se and f["ci95_hi"] >= f["diff"] + 1.9 * se, (f, se)
assert f["differs"] == (f["ci95_lo"] > 0), f
print("compare: pcie3 - pcie5 step p50 %+.4g s [%.4g, %.4g]" % (f["diff"], f["ci95_lo"], f["ci95_hi"]))
PY
echo '[{"point": "x"' > "$tmp/bad.json"
out=$($odsim compare "$tmp/a.json" "$tmp/bad.json" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -qF "bad.json:2:0: '}' expected" <<<"$out" || { echo "FAIL bad JSON ($rc): $out"; exit 1; }
echo '[{"point": "other", "step_p50_s": {"mean": 1, "ci95_lo": null, "ci95_hi": null, "n": 1}}]' > "$tmp/other.json"
$odsim compare "$tmp/a.json" "$tmp/other.json" | grep -q "point other: in B only" || { echo "FAIL: a point in one run only is not listed"; exit 1; }
