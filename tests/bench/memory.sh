#!/usr/bin/env bash
# Peak memory against trace length (issue 29): the peak resident set (GNU time's %M, the child's
# getrusage ru_maxrss) of `trace gen`, `trace info`, `trace import azure` and a replay `run` on a large
# and a small trace, and their ratio (the target is at most 2x). `make bench` runs it.
#   BENCH_TURNS        turns of the large trace (default 1000000; `make bench BENCH_TURNS=10000000`
#                      for the 10M-turn case of issue 29: ~3 minutes and 6 GB, BENCHMARKS.md)
#   BENCH_SMALL_TURNS  turns of the small one (default 10000)
#   BENCH_DIR          where the traces go (default a temporary directory, removed at the end)
# The traces: sessions of exactly 50 turns (turns_sigma 0), small contexts, arrivals compressed
# into about 60 s; the run replays the whole file (closed loop within a session: think times) until
# a second past the last arrival, so every session arrives and is admitted to the executor. The
# Azure CSV has one row (a one-turn session) per turn of the trace.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=$PWD/build/rel/odsim
big=${BENCH_TURNS:-1000000}
small=${BENCH_SMALL_TURNS:-10000}
[ -x /usr/bin/time ] || { echo "bench memory: needs GNU time (/usr/bin/time) for the peak RSS"; exit 1; }
dir=${BENCH_DIR:-}
if [ -z "$dir" ]; then dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT; fi
mkdir -p "$dir"

# peak KB of one command; its output goes to $dir/last.out
peak() { /usr/bin/time -f %M -o "$dir/rss" "$@" > "$dir/last.out" 2>&1 || { cat "$dir/last.out"; exit 1; }; cat "$dir/rss"; }

measure() { # turns -> $dir/m<turns>: the peaks of gen, info, import and run in KB, then wall seconds
  local n=$1 sessions=$(( ($1 + 49) / 50 )) t0=$SECONDS
  printf 'sessions: %d\nrate_per_s: %s\nturns_median: 50\nturns_sigma: 0\ninitial_context_median: 2048\ntool_output_median: 200\ntool_output_max: 4096\ndecode_median: 50\ndecode_max: 512\n' \
    "$sessions" "$(awk -v s="$sessions" 'BEGIN { printf "%.6g", s / 60 }')" > "$dir/g$n.yaml"
  local gen info imp run
  gen=$(peak "$odsim" trace gen --config "$dir/g$n.yaml" -o "$dir/t$n.pb")
  info=$(peak "$odsim" trace info "$dir/t$n.pb")
  grep -q "turns                  $n\$" "$dir/last.out" || { echo "bench memory: expected $n turns"; cat "$dir/last.out"; exit 1; }
  last=$(awk '/time span/ { sub(/\)/, "", $7); printf "%d", $7 + 1 }' "$dir/last.out") # past the last arrival
  awk -v n="$n" 'BEGIN { print "TIMESTAMP,ContextTokens,GeneratedTokens";
    for (i = 0; i < n; i++) { us = int(i * 60e6 / n); printf "2023-11-16 18:%02d:%02d.%06d0,%d,%d\n", 17 + int(us / 60e6), int(us / 1e6) % 60, us % 1000000, 1000 + i % 4000, 10 + i % 300 } }' > "$dir/a$n.csv"
  imp=$(peak "$odsim" trace import azure "$dir/a$n.csv" -o "$dir/a$n.pb")
  rm -f "$dir/a$n.csv" "$dir/a$n.pb"
  printf 'hardware: {box: h200-1}\nmodel: {name: qwen3-8b}\nmethod: {method: dense}\nserving: {coarse: true}\nrun: {duration_s: %ss, replications: 1}\nworkload: {kind: trace, trace: %s, replay: closed}\n' \
    "$last" "$dir/t$n.pb" > "$dir/r$n.yaml"
  run=$(peak "$odsim" run "$dir/r$n.yaml")
  grep -q "sessions $sessions," "$dir/last.out" || { echo "bench memory: the run did not admit all $sessions sessions"; grep sessions "$dir/last.out"; exit 1; }
  echo "$gen $info $imp $run $(( SECONDS - t0 ))" > "$dir/m$n"
}

measure "$small"
measure "$big"
read -r sg si sm sr st < "$dir/m$small"
read -r bg bi bm br bt < "$dir/m$big"
printf 'peak RSS (MB)        %12s %12s   ratio (target <= 2x)\n' "$small turns" "$big turns"
row() { awk -v w="$1" -v a="$2" -v b="$3" 'BEGIN { printf "  %-18s %12.1f %12.1f   %.2fx\n", w, a / 1024, b / 1024, b / a }'; }
row "trace gen" "$sg" "$bg"
row "trace info" "$si" "$bi"
row "trace import azure" "$sm" "$bm"
row "run (replay)" "$sr" "$br"
echo "  (wall: $st s small, $bt s large)"
