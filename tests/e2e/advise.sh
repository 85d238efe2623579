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
# odsim's own estimates join the published figures for the metrics it estimates: every ranked answer
# is an estimated-synthetic figure reaching the target, cheapest budget first per method (a method's
# cheaper budgets all fall short of it); --published-only leaves them out (no recall figure but
# dense's); --keys takes them from a dump (estimated-dump).
$odsim advise scenarios/default.yaml --quality 'topk_recall>=0.7' --replications 1 --json \
  --set 'slo={ttft_s: 1h, tokens_per_s: 0.01}' --set run.duration_s=4s > "$tmp/e.json" || { echo "advise estimates failed"; exit 1; }
$odsim advise scenarios/default.yaml --quality 'topk_recall>=0.7' --replications 1 --json --published-only \
  --set 'slo={ttft_s: 1h, tokens_per_s: 0.01}' --set run.duration_s=4s > "$tmp/p.json" || { echo "advise --published-only failed"; exit 1; }
$odsim advise scenarios/default.yaml --quality 'attention_error<=5' --replications 1 --json --keys tests/data/kvdump \
  --set 'slo={ttft_s: 1h, tokens_per_s: 0.01}' --set run.duration_s=4s > "$tmp/d.json" || { echo "advise --keys failed"; exit 1; }
$odsim quality --k 512 --set tokens=16384 --set layers=2 --set kv_heads=2 --set steps=4 --json \
  --method pertoken:34,51,68,102,136,204,272 --method sparq:34,51,68,102,136,204,272 \
  --method fathom:34,46,56,68,92,136,192,272 > "$tmp/q.json" || { echo "quality failed"; exit 1; }
python3 - "$tmp/e.json" "$tmp/p.json" "$tmp/d.json" "$tmp/q.json" <<'PY' || fail=1
import json, sys
e, p, d, q = (json.load(open(f)) for f in sys.argv[1:])
ranked = {r["method"]: r for r in e["ranked"]}
assert {"pertoken", "sparq", "fathom"} <= set(ranked), list(ranked)
def recall(m, bits):
    for r in q["rows"]:
        if r["method"] == m and " bits" in r["setting"] and float(r["setting"].split(" bits")[0]) == bits:
            return r["recall"]["mean"]
for m in ("pertoken", "sparq", "fathom"):
    r = ranked[m]
    assert r["quality"]["source"] == "estimated-synthetic" and "synthetic keys" in r["quality"]["origin"], r
    assert r["quality"]["value"] >= 0.7, r
    bits = float(r["setting"].split("budget: ")[1].split(",")[0])
    got = recall(m, bits)
    assert got is not None and abs(got - r["quality"]["value"]) < 1e-9, (m, bits, got, r["quality"]["value"])
    for b in (34, 46, 51, 56, 68, 92, 102, 136, 192, 204, 272):
        if b < bits and recall(m, b) is not None:
            assert recall(m, b) < 0.7, (m, b, recall(m, b))
assert [r["method"] for r in p["ranked"]] in ([], ["dense"]), p["ranked"]
assert all(r["quality"]["source"] == "published" for r in p["ranked"]), p
assert d["ranked"] and all(r["quality"]["source"] in ("estimated-dump", "published") for r in d["ranked"]), d
assert any(r["quality"]["source"] == "estimated-dump" for r in d["ranked"]), d
print("advise: estimates ranked", sorted(ranked), "match odsim quality; --published-only and --keys as documented")
PY
exit $fail
