#!/usr/bin/env bash
# odsim advise ranks methods by cost at equal quality from the published figures: with an SLO any
# setting meets, the methods with a figure reaching the target are ranked by step p50, each with its
# source and origin; the rest are not comparable, with the reason; an unknown metric and a target
# the wrong way round are usage errors naming what to ask.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
$odsim advise scenarios/default.yaml --quality 'longbench_avg>=62' --replications 1 --json \
  --set 'slo={ttft_s: 1h, tokens_per_s: 0.01}' > "$tmp/a.json" || { echo "advise failed"; exit 1; }
python3 - "$tmp/a.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
ranked = [r["method"] for r in d["ranked"]]
nc = {r["method"]: r["reason"] for r in d["not_comparable"]}
# Table 1 of the HashAttention paper gives Double Sparsity (pertoken) 62.78 at 64 bits and
# HashAttention 64.15 at 128 per KV head: both reach 62; Quest's 2- and 4-bit pages are not
# odsim's landmark (its min/max keys are bf16: 256 bits at page 16); no SparQ or Fathom figure;
# dense (the full model's 63.55) meets this SLO too, slowest of the three.
assert set(ranked) == {"pertoken", "hashattn", "dense"}, ranked
assert ranked[-1] == "dense", ranked
steps = [r["step_p50_ms"] for r in d["ranked"]]
assert steps == sorted(steps), steps
for r in d["ranked"]:
    assert r["quality"]["source"] == "published" and "arXiv:2412.14468v2, Table 1" in r["quality"]["origin"], r
    assert r["quality"]["value"] >= 62, r
assert "cannot be asked" in nc["landmark"], nc
assert "no data" in nc["fathom"] and "no data" in nc["sparq"], nc
print("advise: ranked", ranked, "not comparable", sorted(nc))
PY
out=$($odsim advise scenarios/default.yaml --quality 'rouge>=1' 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown metric 'rouge' (known: topk_recall" <<<"$out" || { echo "FAIL unknown metric ($rc): $out"; fail=1; }
out=$($odsim advise scenarios/default.yaml --quality 'longbench_avg_loss_points>=1' 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "is better lower: ask longbench_avg_loss_points<=1" <<<"$out" || { echo "FAIL direction ($rc): $out"; fail=1; }
exit $fail
