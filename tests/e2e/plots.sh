#!/usr/bin/env bash
# Plots that read right, checked on the generated gnuplot scripts of a sweep over the seven methods:
# the latency-vs-sessions plot draws one line per sweep series (not one line through every point),
# its axes start at 0, and no plot's legend has more than 12 entries.
set -u
cd "${ODSIM_ROOT:-.}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
./build/rel/odsim run scenarios/default.yaml --set run.duration_s=20s --set run.replications=1 --out "$tmp/o" > /dev/null 2>&1 ||
  { echo "FAIL: run --out"; exit 1; }
gp="$tmp/o/latency_vs_sessions.gp"
plot=$(grep -m1 '^plot ' "$gp")
series=$(grep -o '\$1==[0-9]*' <<<"$plot" | sort -u | wc -l)
[ "$series" -eq 7 ] || { echo "FAIL: $series series in latency_vs_sessions, wanted 7 (one per method point)"; exit 1; }
grep -q 'set xrange \[0:\*\]' "$gp" && grep -q 'set yrange \[0:\*\]' "$gp" || { echo "FAIL: latency_vs_sessions axes do not start at 0"; exit 1; }
for g in "$tmp"/o/*.gp; do
  n=$(grep -m1 '^plot ' "$g" | grep -o " title " | wc -l)
  [ "$n" -le 12 ] || { echo "FAIL: $(basename "$g") has $n legend entries"; exit 1; }
done
echo "plots: one line per series, axes from 0, at most 12 legend entries"
