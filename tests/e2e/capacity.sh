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
# The budget advisor: a method with no published point says so; dense (recall 1 by definition) is
# simulated and meets this easy SLO at its cheapest configuration (index on the host).
$odsim advise tests/data/capacity.yaml --quality 'topk_recall>=0.9' --replications 1 --set 'slo={ttft_s: 60s, tokens_per_s: 0.3, attainment: 0.5}' > "$tmp/advise.txt" 2>/dev/null
grep -q "^  fathom    no data" "$tmp/advise.txt" || { echo "advise: fathom should have no data"; cat "$tmp/advise.txt"; exit 1; }
grep -q "^1. dense     {method: dense, placement: host" "$tmp/advise.txt" || { echo "advise: dense should be advised on the host"; cat "$tmp/advise.txt"; exit 1; }
echo "advise: no-data methods reported, dense advised at its cheapest placement"
