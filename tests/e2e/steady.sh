#!/usr/bin/env bash
# run.duration_s: auto and run.ci_target (docs/scenarios.md): a replication runs until its measured
# window spans run.steady_turns mean turns and holds as many finished turns (checked from the JSON's
# per-replication figures); one capped first is `transient` and never meets the SLO, while the same
# run of a fixed length does; the stopping rule stops at the first count whose headline intervals,
# recomputed here from the per-replication figures, are within the target; two runs are byte-identical;
# an auto warm-up under a fixed duration is none; bad settings fail naming the key.
set -u
cd "${ODSIM_ROOT:-.}"
. tests/e2e/lib/expect.sh
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
easy=(--set 'slo={ttft_s: 1h, tokens_per_s: 0.01}')
auto=(--set run.duration_s=auto --set run.warmup_s=auto --set run.steady_turns=5 --set run.max_duration_s=10min)
$odsim run tests/data/small.yaml "${auto[@]}" "${easy[@]}" --set run.replications=3 --json > "$tmp/steady.json" \
  && $odsim run tests/data/small.yaml "${auto[@]}" "${easy[@]}" --set run.replications=1 --set run.max_duration_s=2s --json > "$tmp/capped.json" \
  && $odsim run tests/data/small.yaml "${auto[@]}" "${easy[@]}" --set run.replications=1 --set run.max_duration_s=2s > "$tmp/capped.txt" \
  && $odsim run tests/data/small.yaml "${easy[@]}" --set run.replications=1 --set run.duration_s=2s --json > "$tmp/fixed.json" \
  || { echo "FAIL: odsim run"; exit 1; }
python3 - "$tmp/steady.json" "$tmp/capped.json" "$tmp/fixed.json" <<'PY' || exit 1
import json, sys
steady, capped, fixed = (json.load(open(p))[0] for p in sys.argv[1:4])
run = steady["run"]
assert run["duration_auto"] and not run["transient"] and steady["transient_turns"] is None, run
assert len(run["per_replication"]) == steady["replications"] == 3, run
for k, r in enumerate(run["per_replication"]):
    window = r["duration_s"] - r["warmup_s"]
    assert r["mean_turn_s"] > 0 and window >= 5 * r["mean_turn_s"] * (1 - 1e-9), (k, r)
    assert abs(r["window_turns"] - window / r["mean_turn_s"]) < 1e-6 * r["window_turns"], (k, r)
    assert r["warmup_s"] > 0, ("auto warm-up of 0 s", k, r)
    assert r["duration_s"] < 600, ("ran to the cap", k, r)
assert steady["turns"] >= 5, "the first replication's window holds %d turns" % steady["turns"]
assert run["window_turns"] == min(r["window_turns"] for r in run["per_replication"])
# the window's length differs between replications: each ran until its own rule held
assert len({r["duration_s"] for r in run["per_replication"]}) == 3, run
# capped at 2 s: transient, never met; the same 2 s as a fixed duration meets the easy SLO
assert capped["run"]["transient"] and capped["transient_turns"] is not None and capped["transient_turns"] < 5, capped["run"]
assert not capped["slo_met"] and fixed["slo_met"], (capped["slo_met"], fixed["slo_met"])
assert fixed["transient_turns"] is None and not fixed["run"]["duration_auto"]
print("steady: windows of %.3g+ mean turns; capped run transient (%.3g turns), not met" % (run["window_turns"], capped["transient_turns"]))
PY
grep -q "^  transient: " "$tmp/capped.txt" && grep -q "SLO .*NOT met" "$tmp/capped.txt" || { echo "FAIL: the capped run's text:"; cat "$tmp/capped.txt"; exit 1; }

# the stopping rule: the first count (>= replications, >= 2) whose intervals are all within the target
ci=(--set run.duration_s=auto --set run.steady_turns=5 --set run.max_duration_s=10min --set run.replications=2 --set run.max_replications=12)
for target in 0.5 0.6 0.05; do
  $odsim run tests/data/small.yaml "${ci[@]}" --set run.ci_target=$target --json > "$tmp/ci$target.json" || { echo "FAIL: ci_target $target"; exit 1; }
done
$odsim run tests/data/small.yaml "${ci[@]}" --set run.ci_target=0.5 --json > "$tmp/again.json" || exit 1
cmp "$tmp/ci0.5.json" "$tmp/again.json" || { echo "FAIL: two runs with ci_target differ"; exit 1; }
$odsim run tests/data/small.yaml "${ci[@]}" --set run.ci_target=0.5 --replications 3 --json > "$tmp/fixed3.json" || exit 1
python3 - "$tmp" <<'PY' || exit 1
import json, math, sys
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131]
heads = ["step_p50_s", "step_p99_s", "ttft_p50_s", "ttft_p99_s", "tokens_per_s_per_session"]
def within(reps, target):
    for h in heads:
        x = [r[h] for r in reps if r[h] is not None]
        if not x: continue
        if len(x) < 2: return False
        m = sum(x) / len(x)
        half = T975[len(x) - 2] * math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1) / len(x))
        if not half <= target * abs(m): return False
    return True
stops = {}
for target in ("0.5", "0.6", "0.05"):
    r = json.load(open("%s/ci%s.json" % (sys.argv[1], target)))[0]
    reps, n = r["run"]["per_replication"], r["replications"]
    assert len(reps) == n and 2 <= n <= 12, (target, n)
    first = next((k for k in range(2, 13) if k <= len(reps) and within(reps[:k], float(target))), None)
    if first is None:
        assert n == 12 and not r["run"]["ci_reached"], (target, n, r["run"]["ci_reached"])
        assert r["run"]["ci_target"] == float(target)
    else:
        assert n == first and r["run"]["ci_reached"], (target, n, first)
    stops[target] = n
# the targets chosen so that the rule stops in between, once at the cap
assert 2 < stops["0.5"] < 12 and stops["0.6"] <= stops["0.5"] and stops["0.05"] == 12, stops
# replication k is the same replication whatever the count: the shorter run's are a prefix
a = json.load(open("%s/ci0.6.json" % sys.argv[1]))[0]["run"]["per_replication"]
b = json.load(open("%s/ci0.5.json" % sys.argv[1]))[0]["run"]["per_replication"]
assert a == b[:len(a)], "replications differ between counts"
f = json.load(open("%s/fixed3.json" % sys.argv[1]))[0]
assert f["replications"] == 3 and f["run"]["per_replication"] == b[:3], "--replications 3"
print("ci_target: stops at %s replications (0.6, 0.5, 0.05), as recomputed from the per-replication figures" % sorted(stops.values()))
PY

# with a fixed duration an auto warm-up is none: the same output as warmup_s 0
$odsim run tests/data/small.yaml --set run.warmup_s=auto --json | grep -v '"scenario":' > "$tmp/wa.json" \
  && $odsim run tests/data/small.yaml --json | grep -v '"scenario":' > "$tmp/w0.json" \
  && cmp -s "$tmp/wa.json" "$tmp/w0.json" || { echo "FAIL: warmup_s auto with a fixed duration is not 0 s"; fail=1; }
expect 1 "key 'run.max_replications': max_replications 2 is below run.replications 3" -- \
  $odsim run tests/data/small.yaml --set run.ci_target=0.1 --set run.replications=3 --set run.max_replications=2
expect 1 "key 'run.duration_s'" -- $odsim run tests/data/small.yaml --set run.duration_s=automatic
expect 1 "key 'run.warmup_s': warmup_s 20 s is not below run.max_duration_s 10 s" -- \
  $odsim run tests/data/small.yaml --set run.duration_s=auto --set run.max_duration_s=10s --set run.warmup_s=20s
[ "$fail" = 0 ] || exit 1
echo "steady: auto duration, transient points, ci_target and its errors as documented"
