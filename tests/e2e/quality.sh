#!/usr/bin/env bash
# odsim quality: the synthetic estimate's first line names its assumed key statistics; --json is one
# JSON document whose exact top-k has recall 1 and dense no error, and hashattn is not comparable;
# the same seed gives byte-identical output in the rel, dbg and san builds; the committed dump
# sample is read, and a truncated or mistyped dump file fails naming the file, with nothing on stdout.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
small=(--set tokens=512 --set layers=2 --set kv_heads=1 --set steps=3)
./build/rel/odsim quality "${small[@]}" > "$tmp/text"
head -n 1 "$tmp/text" | grep -q '^assumed key statistics: synthetic (d=128, 512 tokens' \
  || { echo "first line: $(head -n 1 "$tmp/text")"; exit 1; }
for b in rel dbg san; do ./build/$b/odsim quality "${small[@]}" --json > "$tmp/q.$b"; done
for b in dbg san; do cmp "$tmp/q.rel" "$tmp/q.$b" || { echo "quality differs between rel and $b"; exit 1; }; done
python3 - "$tmp/q.rel" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))            # exactly one document, or this raises
rows = {(r["method"], r["setting"]): r for r in doc["rows"]}
assert doc["key_statistics"].startswith("assumed key statistics: synthetic"), doc["key_statistics"]
assert rows[("exact", "top-k")]["recall"]["mean"] == 1.0
assert rows[("dense", "all tokens")]["attn_error"]["mean"] < 1e-12
assert "learned" in rows[("hashattn", "32 bits/q-head")]["not_comparable"]
assert len(doc["directions"]) == 3
PY
./build/rel/odsim quality --keys tests/data/kvdump --json > "$tmp/dump.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['source']=='estimated-dump' and d['entries']==2" "$tmp/dump.json"
mkdir "$tmp/bad"
cp tests/data/kvdump/layer1_kv0_* "$tmp/bad/"
head -c 1000 tests/data/kvdump/layer1_kv0_keys.npy > "$tmp/bad/layer1_kv0_keys.npy"
if ./build/rel/odsim quality --keys "$tmp/bad" > "$tmp/out" 2> "$tmp/err"; then echo "a truncated dump was accepted"; exit 1; fi
grep -q "layer1_kv0_keys.npy: truncated" "$tmp/err" || { echo "message: $(cat "$tmp/err")"; exit 1; }
[ ! -s "$tmp/out" ] || { echo "stdout written on failure"; exit 1; }
sed 's/<f4/<f8/' tests/data/kvdump/layer1_kv0_keys.npy > "$tmp/bad/layer1_kv0_keys.npy"
if ./build/rel/odsim quality --keys "$tmp/bad" > /dev/null 2> "$tmp/err"; then echo "a float64 dump was accepted"; exit 1; fi
grep -q "layer1_kv0_keys.npy: dtype '<f8'" "$tmp/err" || { echo "message: $(cat "$tmp/err")"; exit 1; }
rc=0; ./build/rel/odsim quality --method nosuch > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "unknown method: exit $rc, not 2"; exit 1; }
echo "quality: first line, JSON, determinism across builds, dump sample and its errors"
