#!/usr/bin/env bash
# odsim capacity against brute force: the population it reports meets the SLO (odsim run agrees) and
# one more session does not; a faster link never lowers the capacity.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$odsim capacity tests/data/capacity.yaml --max 64 --json > "$tmp/cap.json"
read -r n4 n5 < <(python3 -c "import json,sys; d=json.load(open('$tmp/cap.json')); print(d[0]['max_sessions'], d[1]['max_sessions'])" 2>/dev/null ||
  grep -o '"max_sessions": [0-9]*' "$tmp/cap.json" | awk '{printf "%s ", $2}')
[ "$n4" -ge 1 ] && [ "$n5" -ge "$n4" ] || { echo "capacity pcie4=$n4 pcie5=$n5"; exit 1; }
met() { $odsim run tests/data/capacity.yaml --point "$1" --set workload.generator.population="$2" --json |
        grep -o '"slo_met": [a-z]*' | head -1 | awk '{print $2}'; }
[ "$(met 1 "$n5")" = true ] || { echo "pcie5 at $n5 sessions should meet the SLO"; exit 1; }
[ "$(met 1 $((n5 + 1)))" = false ] || { echo "pcie5 at $((n5 + 1)) sessions should miss the SLO"; exit 1; }
echo "capacity: pcie4 $n4 sessions, pcie5 $n5; brute force agrees at N and N+1"
# The budget advisor: a method whose every figure (published or odsim's estimate) falls short says
# so with its best estimate; dense (recall 1 by definition) is simulated and meets this easy SLO at
# its cheapest configuration (index on the host).
$odsim advise tests/data/capacity.yaml --quality 'topk_recall>=0.9' --replications 1 --set 'slo={ttft_s: 60s, tokens_per_s: 0.3, attainment: 0.5}' > "$tmp/advise.txt" 2>/dev/null
grep -q "^  fathom    no topk_recall figure of fathom reaches >= 0.9 (.*odsim's estimate is at best 0\.[0-8]" "$tmp/advise.txt" ||
  { echo "advise: fathom should fall short of 0.9 with its best estimate named"; cat "$tmp/advise.txt"; exit 1; }
grep -q "^1. dense     {method: dense, placement: host" "$tmp/advise.txt" || { echo "advise: dense should be advised on the host"; cat "$tmp/advise.txt"; exit 1; }
echo "advise: methods short of the target reported, dense advised at its cheapest placement"
# The quick form is the template with its keys set: the same answer, byte for byte, as the template
# given those --set overrides; malformed quick-form arguments are refused before any simulation.
q=(--set run.duration_s=4s --set run.replications=1 --max 16 --json)
$odsim capacity --box h200-1 --model qwen3-8b --method fathom --context 128Ki --slo step_p99=40ms,ttft=20s "${q[@]}" > "$tmp/quick.json"
$odsim capacity scenarios/capacity_quick.yaml --set hardware.box=h200-1 --set model.name=qwen3-8b --set method.method=fathom \
  --set workload.generator.max_context_tokens=131072 --set workload.generator.shared_prefix_tokens=131072 \
  --set workload.generator.initial_context_median=98304 --set slo.step_p99_s=40ms --set slo.ttft_s=20s "${q[@]}" > "$tmp/long.json"
cmp -s "$tmp/quick.json" "$tmp/long.json" || { echo "capacity quick form differs from the template with the same keys"; diff "$tmp/quick.json" "$tmp/long.json" | head; exit 1; }
grep -q '"max_sessions"' "$tmp/quick.json" || { echo "capacity quick form: no answer"; exit 1; }
for bad in "--slo latency=1s" "--slo step_p99=1s,step_p99=2s" "--context 1e99" "--context 12" "--slo step_p99="; do
  set +e; $odsim capacity --box h200-1 --model qwen3-8b --method fathom --context 1M $bad > "$tmp/o" 2> "$tmp/e"; rc=$?; set -e
  [ "$rc" = 2 ] && [ ! -s "$tmp/o" ] && grep -q "capacity" "$tmp/e" || { echo "capacity $bad: rc $rc"; cat "$tmp/e"; exit 1; }
done
set +e; $odsim capacity scenarios/default.yaml --box h200-1 > /dev/null 2> "$tmp/e"; rc=$?; set -e
[ "$rc" = 2 ] && grep -q "quick form" "$tmp/e" || { echo "capacity: quick-form flag beside a scenario accepted"; exit 1; }
echo "capacity: the quick form answers as its template does; bad quick-form arguments refused"
# An answer on another platform says it is outside every validated regime (tests/e2e/trust.sh), then
# names the assumed parameters that move it, before the table (as odsim run and plan do): on the B200 box the H200-fitted SM index fetch efficiency is one; on its own H200, none.
$odsim capacity --box hgx-b200-8 --model qwen3-8b --method fathom --context 128Ki --set run.duration_s=2s \
  --set run.replications=1 --max 4 --json > "$tmp/b200.json"
$odsim capacity --box hgx-b200-8 --model qwen3-8b --method fathom --context 128Ki --set run.duration_s=2s \
  --set run.replications=1 --max 4 > "$tmp/b200.txt"
$odsim capacity --box h200-1 --model qwen3-8b --method fathom --context 128Ki --set run.duration_s=2s \
  --set run.replications=1 --max 4 --json > "$tmp/h200.json"
python3 - "$tmp/b200.json" "$tmp/h200.json" <<'PY' || exit 1
import json, sys
b, h = (json.load(open(f)) for f in sys.argv[1:])
names = [a["name"] for a in b[0]["assumptions"]]
assert "prefix_gather_eff" in names and all(a["origin"].startswith("assumed") for a in b[0]["assumptions"]), names
assert h[0]["assumptions"] == [], h[0]["assumptions"]
PY
head -1 "$tmp/b200.txt" | grep -q "^validation, point 0 (base): outside every validated regime: box hgx-b200-8 " ||
  { echo "capacity: the validation group (here: none) not first"; head -3 "$tmp/b200.txt"; exit 1; }
sed -n '/^odsim /q;p' "$tmp/b200.txt" | grep -q "^point 0 (base): ASSUMED: " || { echo "capacity: assumptions not in the first lines"; head -3 "$tmp/b200.txt"; exit 1; }
echo "capacity: the validated regime, then the assumed parameters named first on another platform, none on its own"
