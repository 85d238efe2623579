#!/usr/bin/env bash
# User plans (docs/plans.md): a hand-written whole plan's step against its closed form; edits of a
# built-in plan (set time, drop, add; one matching nothing refused with its file:line); every
# method's --show-yaml run back as a user plan (step time within 5% of the built-in at 128Ki, its
# emitted replay op for op the built-in's); scenarios with method.plan run; bad files name file:line.
set -uo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. tests/e2e/lib/expect.sh
j() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# a whole plan by hand: spin 100 us, then on stream 1 a spin of 30 us after it: 130 us alone (host ops
# and launches are not on `plan`'s critical path); replayed, a host op of 50 us after the sync: 180 us
# and the launches (each launch_us, the second hidden under the first spin)
cat > "$tmp/hand.yaml" <<'Y'
odsim_plan: 1
name: hand
context: 1Ki
step:
  - {id: a, path: spin, us: 100}
  - {id: b, path: spin, stream: 1, after: [a], us: 30}
  - {path: sync}
  - {id: cpu, path: host, us: 50}
Y
$odsim plan --model qwen3-8b --plan "$tmp/hand.yaml" --context 1Ki --json --emit-replay "$tmp/hand.replay" > "$tmp/hand.json" \
  || { echo "FAIL: plan --plan hand.yaml"; fail=1; }
[ "$(j "$tmp/hand.json" "round(d['total']['step_time_us'], 6)")" = "130.0" ] || { echo "FAIL: hand step $(j "$tmp/hand.json" "d['total']['step_time_us']")"; fail=1; }
[ "$(j "$tmp/hand.json" "d['plan']['form']")" = "whole" ] || { echo "FAIL: plan form"; fail=1; }
grep -q "^op 3 host us=50$" "$tmp/hand.replay" || { echo "FAIL: hand.replay lacks its host op"; fail=1; }
launch=$(awk '/^  launch_us:/ {gsub(/[{},]/," "); for (i=1;i<=NF;i++) if ($i=="value:") print $(i+1)}' models/calib/h200.yaml)
$odsim replay "$tmp/hand.replay" --json > "$tmp/hand_rep.json" || { echo "FAIL: replay hand"; fail=1; }
python3 - "$tmp/hand_rep.json" "$launch" <<'PY' || fail=1
import json, sys
p50, launch = json.load(open(sys.argv[1]))["sessions"][0]["p50_us"], float(sys.argv[2])
print("uplan: hand plan replayed p50 %.2f us (180 us of spins and host, launch_us %.3f)" % (p50, launch))
if not 180 + launch - 0.5 <= p50 <= 180 + 2 * launch: sys.exit("FAIL: hand p50 %.2f outside [180 + launch_us, 180 + 2 launch_us]" % p50)
PY

# edits of sparq's plan at 128Ki
cat > "$tmp/edit.yaml" <<'Y'
odsim_plan: 1
name: edits
context: 128Ki
edit:
  - {match: {kind: topk}, us: 40}
  - {match: {kind: l2_writeback}, drop: true}
  - {after: {kind: attn_combine}, add: {kind: compute, path: compute, flops: 2e9}}
Y
$odsim plan --model qwen3-8b --method sparq --context 128Ki --json > "$tmp/base.json"
$odsim plan --model qwen3-8b --method sparq --plan "$tmp/edit.yaml" --context 128Ki --json > "$tmp/edit.json" \
  || { echo "FAIL: plan with edits"; fail=1; }
python3 - "$tmp/base.json" "$tmp/edit.json" <<'PY' || fail=1
import json, sys
b, e = (json.load(open(f)) for f in sys.argv[1:3])
count = lambda d, k: sum(o["op"] == k for o in d["ops"])
L = len(b["layers"])
topk = [o["time_us"] for o in e["ops"] if o["op"] == "topk"]
assert topk and all(abs(t - 40) < 1e-9 for t in topk), "FAIL: topk times %s" % topk[:3]
assert count(e, "l2_writeback") == 0 and count(b, "l2_writeback") == L, "FAIL: l2_writeback not dropped"
assert count(e, "compute") == L, "FAIL: %d compute ops added, wanted %d" % (count(e, "compute"), L)
assert len(e["ops"]) == len(b["ops"]) - L + L, "FAIL: op count"
print("uplan: edits: topk 40 us, %d l2_writeback dropped, %d compute added; step %.1f -> %.1f us" %
      (L, L, b["total"]["step_time_us"], e["total"]["step_time_us"]))
PY
printf 'odsim_plan: 1\nname: none\ncontext: 128Ki\nedit:\n  - {match: {kind: topk}, us: 40}\n  - {match: {kind: flush, layer: 2}, drop: true}\n' > "$tmp/none.yaml"
expect 1 "none.yaml:6:5: this edit matches no op" -- $odsim plan --model qwen3-8b --method sparq --plan "$tmp/none.yaml" --context 128Ki
expect 1 "runs as method dense" -- $odsim plan --model qwen3-8b --method sparq --plan "$tmp/hand.yaml" --context 1Ki

# every method's plan as a whole user plan, run back
for m in dense pertoken sparq fathom hashattn landmark; do
  $odsim plan --model qwen3-8b --method $m --context 128Ki --show-yaml > "$tmp/$m.yaml" || { echo "FAIL: show-yaml $m"; fail=1; continue; }
  head -1 "$tmp/$m.yaml" | grep -q "^# odsim plan --show-yaml: qwen3-8b, $m" || { echo "FAIL: $m: comment first"; fail=1; }
  grep -q "^# approximate" "$tmp/$m.yaml" || { echo "FAIL: $m: no approximate line"; fail=1; }
  $odsim plan --model qwen3-8b --method $m --context 128Ki --json --emit-replay "$tmp/b.replay" > "$tmp/b.json"
  $odsim plan --model qwen3-8b --plan "$tmp/$m.yaml" --context 128Ki --json --emit-replay "$tmp/u.replay" > "$tmp/u.json" \
    || { echo "FAIL: plan --plan $m.yaml"; fail=1; continue; }
  cmp -s <(grep -v '^#\|^workload' "$tmp/b.replay") <(grep -v '^#\|^workload' "$tmp/u.replay") \
    || { echo "FAIL: $m: the user plan's replay is not the built-in's mapping"; fail=1; }
  python3 - "$tmp/b.json" "$tmp/u.json" $m <<'PY' || fail=1
import json, sys
b, u = (json.load(open(f))["total"]["step_time_us"] for f in sys.argv[1:3])
r = u / b
print("uplan: show-yaml %-9s built-in %9.1f us  user plan %9.1f us  ratio %.3f" % (sys.argv[3], b, u, r))
if not 0.95 <= r <= 1.05: sys.exit("FAIL: %s ratio %.3f outside [0.95, 1.05]" % (sys.argv[3], r))
PY
done

# scenarios: a whole plan and edits beside the scenario file
for p in "dense, plan: hand.yaml" "sparq, plan: edit.yaml"; do
  cat > "$tmp/scn.yaml" <<Y
hardware: {box: h200-1}
model: {name: qwen3-8b}
method: {method: $p}
serving: {mode: streams}
workload:
  kind: generator
  generator: {arrival: closed, population: 2, initial_context_median: 8192, initial_context_sigma: 0, turns_median: 2, decode_median: 50, tool_output_median: 100, max_context_tokens: 64Ki}
run: {duration_s: 1, replications: 1, seed: 1}
Y
  (cd "$tmp" && ODSIM_ROOT="$OLDPWD" "$OLDPWD/$odsim" run scn.yaml --out "$tmp/out" > "$tmp/run.txt" 2>&1) \
    || { echo "FAIL: run with method {$p}"; cat "$tmp/run.txt"; fail=1; continue; }
  grep -q "step latency   p50 [0-9]" "$tmp/run.txt" || { echo "FAIL: {$p}: no step finished"; cat "$tmp/run.txt"; fail=1; }
done
sed -i 's/method: {method: sparq, plan: edit.yaml}/method: {method: sparq, k: 64, plan: hand.yaml}/' "$tmp/scn.yaml"
expect 1 "scn.yaml:3:" -- $odsim run "$tmp/scn.yaml" --out "$tmp/out2"

# bad plan files: file, line and key
printf 'odsim_plan: 1\nname: b\ncontext: 1Ki\nstep:\n  - {path: spin, us: 1, colour: red}\n' > "$tmp/key.yaml"
expect 1 "key.yaml:5:" -- $odsim plan --model qwen3-8b --plan "$tmp/key.yaml" --context 1Ki
printf 'odsim_plan: 1\nname: b\ncontext: 1Ki\nstep:\n  - {path: warp, us: 1}\n' > "$tmp/path.yaml"
expect 1 "path.yaml:5:" -- $odsim plan --model qwen3-8b --plan "$tmp/path.yaml" --context 1Ki
printf 'odsim_plan: 1\nname: b\ncontext: 1Ki\nlayer:\n  - {id: x, path: spin, us: 1, after: [y]}\n  - {id: y, path: spin, us: 1}\n' > "$tmp/fwd.yaml"
expect 1 "fwd.yaml:5:" -- $odsim plan --model qwen3-8b --plan "$tmp/fwd.yaml" --context 1Ki
printf 'odsim_plan: 1\nname: b\ncontext: 1Ki\nstep:\n  - {path: h2d, pieces: 2000000, piece_bytes: 64, span: 1Gi}\n' > "$tmp/big.yaml"
expect 1 "big.yaml:5:" -- $odsim plan --model qwen3-8b --plan "$tmp/big.yaml" --context 1Ki
[ $fail -eq 0 ] && echo "uplan: hand plan, edits, show-yaml round trips, scenarios and bad files as expected"
exit $fail
