#!/usr/bin/env bash
# odsim plan --emit-replay: every built-in method's decode step at 128Ki and 1Mi tokens (qwen3-8b,
# h200-1) written as a replay workload that `odsim workload check` reads and `odsim replay` predicts
# within 15% of the plan's standalone step (`odsim plan --json`'s step_time_us).
# Known gaps (the mapping loses or adds time; asserted as what they are, not hidden):
#  - pertoken and hashattn at 128Ki: the replay's `gather` is one form (pieces at random slots,
#    costed as a gather alone), while the methods' winner fetch is the per-KV-head gather of
#    mostly-repeated winners (COST_SM_HEADS): its 10240 pieces of 512 B cost about 90 us more per
#    layer as a replay gather (1.30x and 1.22x); at 1Mi the rest of the step dwarfs it.
#  - dense at 1Mi: each replay op has device buffers of its own, so the 36 layers' K/V copies need
#    324 GB of HBM: odsim replay (like kbench) refuses the workload.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
for m in dense pertoken sparq fathom hashattn landmark; do
  for c in 131072 1048576; do
    f="$tmp/$m-$c.replay"
    $odsim plan --model qwen3-8b --method $m --context $c --emit-replay "$f" --json > "$tmp/plan.json" \
      || { echo "FAIL: plan --emit-replay $m $c"; fail=1; continue; }
    head -1 "$f" | grep -q "^# odsim plan --emit-replay: qwen3-8b, $m, decode step" \
      || { echo "FAIL: $m $c: no comment line first"; fail=1; }
    grep -q "^workload plan-$m-$c$" "$f" || { echo "FAIL: $m $c: workload name"; fail=1; }
    $odsim workload check "$f" > /dev/null || { echo "FAIL: workload check $m $c"; fail=1; continue; }
    if [ "$m-$c" = dense-1048576 ]; then
      out=$($odsim replay "$f" --json 2>&1) && { echo "FAIL: dense 1Mi replayed (known gap closed? update the test)"; fail=1; }
      grep -q "device buffers take" <<<"$out" || { echo "FAIL: dense 1Mi: $out"; fail=1; }
      echo "plan_replay: dense 1048576 refused as known (device buffers of its own per op)"
      continue
    fi
    $odsim replay "$f" --json > "$tmp/replay.json" || { echo "FAIL: replay $m $c"; fail=1; continue; }
    python3 - "$tmp/plan.json" "$tmp/replay.json" "$m-$c" <<'PY' || fail=1
import json, sys
plan, rep, case = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
known = {"pertoken-131072": (1.25, 1.35), "hashattn-131072": (1.17, 1.27)}   # see the header
step, p50 = plan["total"]["step_time_us"], rep["sessions"][0]["p50_us"]
r = p50 / step
lo, hi = known.get(case, (0.85, 1.15))
print("plan_replay: %-18s plan %10.1f us  replay p50 %10.1f us  ratio %.3f%s" % (case, step, p50, r, "  (known gap)" if case in known else ""))
if not lo <= r <= hi:
    sys.exit("FAIL: %s: ratio %.3f outside [%.2f, %.2f]" % (case, r, lo, hi))
PY
  done
done
# a plan that does not fit a replay session fails with a message and writes nothing
out=$($odsim plan --model qwen3-8b --method fathom --context 1M --emit-replay "$tmp/no/such/dir.replay" 2>&1) \
  && { echo "FAIL: a missing directory accepted"; fail=1; }
grep -q "emit-replay $tmp/no/such/dir.replay" <<<"$out" || { echo "FAIL: message does not name the file: $out"; fail=1; }
[ $fail -eq 0 ] && echo "plan_replay: every method's plan emitted, checked and predicted"
exit $fail
