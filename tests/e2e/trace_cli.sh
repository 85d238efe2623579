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
echo "trace CLI: gen deterministic, three importers, info, bad input rejected cleanly"
