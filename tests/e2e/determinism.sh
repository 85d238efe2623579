#!/usr/bin/env bash
# The same inputs and seed give byte-identical output across -O2, -O0 and ASan+UBSan builds: the
# engine's self-test trace and a small scenario's JSON results; another seed gives other results.
# (That the order sessions are listed in does not matter is tests/sim/test_exec.c's
# exec/independent_of_listing_order.)
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for b in rel dbg san; do
  ./build/$b/odsim bench --trace 12345 > "$tmp/trace.$b"
  ./build/$b/odsim run tests/data/small.yaml --json > "$tmp/run.$b"
done
for b in dbg san; do
  cmp "$tmp/trace.rel" "$tmp/trace.$b" || { echo "engine trace differs between rel and $b"; exit 1; }
  cmp "$tmp/run.rel" "$tmp/run.$b" || { echo "scenario results differ between rel and $b"; diff "$tmp/run.rel" "$tmp/run.$b" | head; exit 1; }
done
./build/rel/odsim run tests/data/small.yaml --json > "$tmp/run.again"
cmp "$tmp/run.rel" "$tmp/run.again" || { echo "two runs of one seed differ"; exit 1; }
./build/rel/odsim run tests/data/small.yaml --json --set run.seed=2 > "$tmp/run.seed2"
if cmp -s "$tmp/run.rel" "$tmp/run.seed2"; then echo "another seed gave identical results"; exit 1; fi
echo "determinism: rel, dbg and san agree byte for byte ($(wc -l < "$tmp/trace.rel") trace lines)"
