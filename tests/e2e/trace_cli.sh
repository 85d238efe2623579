#!/usr/bin/env bash
# The trace commands as a user runs them: generate, import each real trace, inspect; bad files fail
# cleanly naming file and offset, and leave nothing behind.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$odsim trace gen --seed 7 -o "$tmp/a.pb" >/dev/null
$odsim trace gen --seed 7 -o "$tmp/b.pb" >/dev/null
cmp "$tmp/a.pb" "$tmp/b.pb"
$odsim trace info "$tmp/a.pb" --json > "$tmp/info.json"
grep -q '"sessions": 1000' "$tmp/info.json" || { echo "trace info: expected 1000 sessions"; exit 1; }
for spec in "mooncake mooncake_fast25_conversation_trace.jsonl" "azure azure_llm_2023_code.csv" "tracelab tracelab_example_agent_sessions_sanitized.jsonl"; do
  set -- $spec
  $odsim trace import "$1" "traces/data/$2" -o "$tmp/$1.pb" >/dev/null
  $odsim trace info "$tmp/$1.pb" >/dev/null
done
head -c 100 "$tmp/a.pb" > "$tmp/trunc.pb"
if out=$($odsim trace info "$tmp/trunc.pb" 2>&1); then echo "a truncated trace was accepted"; exit 1; fi
grep -q "trunc.pb" <<<"$out" && grep -q "byte" <<<"$out" || { echo "no file/offset in: $out"; exit 1; }
printf '{"timestamp": 0, "input_length": 5\n' > "$tmp/bad.jsonl"
if $odsim trace import mooncake "$tmp/bad.jsonl" -o "$tmp/bad.pb" 2>"$tmp/err"; then echo "bad JSON accepted"; exit 1; fi
grep -q "bad.jsonl:1" "$tmp/err" || { echo "no line in: $(cat "$tmp/err")"; exit 1; }
[ ! -e "$tmp/bad.pb" ] || { echo "half-written output left behind"; exit 1; }
# Replay reads a trace as its sessions arrive: streamed (round-robin placement) and read whole (packed
# placement, which needs the count; the same on one GPU) give the same report, and a file cut after
# the run's last arrival still replays what the run reaches, which the whole-file path refuses.
printf 'sessions: 400\nrate_per_s: 20\ninitial_context_median: 2048\ntool_output_median: 200\ndecode_median: 50\n' > "$tmp/g.yaml"
$odsim trace gen --config "$tmp/g.yaml" -o "$tmp/r.pb" >/dev/null
printf 'hardware: {box: h200-1}\nmodel: {name: qwen3-8b}\nmethod: {method: dense}\nserving: {coarse: true}\nrun: {duration_s: 5s, replications: 1}\n' > "$tmp/r.yaml"
printf 'workload: {kind: trace, trace: %s, replay: closed}\n' "$tmp/r.pb" >> "$tmp/r.yaml"
$odsim run "$tmp/r.yaml" > "$tmp/streamed.txt"
$odsim run "$tmp/r.yaml" --set serving.placement=pack > "$tmp/whole.txt"
cmp "$tmp/streamed.txt" "$tmp/whole.txt" || { echo "streamed and whole-file replays differ"; exit 1; }
head -c $(( $(stat -c %s "$tmp/r.pb") / 2 )) "$tmp/r.pb" > "$tmp/cut.pb"
$odsim run "$tmp/r.yaml" --set "workload.trace=$tmp/cut.pb" > "$tmp/cut.txt"
cmp "$tmp/streamed.txt" "$tmp/cut.txt" >/dev/null || { echo "the cut file replays differently"; exit 1; }
if $odsim run "$tmp/r.yaml" --set "workload.trace=$tmp/cut.pb" --set serving.placement=pack >/dev/null 2>&1; then
  echo "a cut file read whole was accepted"; exit 1
fi
echo "trace CLI: gen deterministic, three importers, info, replay streamed as read, bad input rejected cleanly"
