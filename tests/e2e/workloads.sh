#!/usr/bin/env bash
# The committed random replay workloads (validation/workloads/, issue 34): `odsim workload gen`
# rewrites both sets byte for byte (rel and the sanitizer build alike), their strata hold (each mode
# and session stratum >= 20 workloads, >= 25% short steps with syncs, <= 16 GiB pinned), `workload
# check` reads every file. (Bad arguments and files: tests/e2e/bad_input.sh.)
set -uo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
stat_of() { awk -v k="$1" '$1 == k {print $2}' "$2"; }

for set in random_dev:120 random:240; do
  name=${set%:*} n=${set#*:}
  $odsim workload gen --set "$name" -o "$tmp/$name" --stats > "$tmp/$name.stats" || { echo "FAIL: gen $name"; fail=1; continue; }
  diff -r "validation/workloads/$name" "$tmp/$name" > "$tmp/diff" ||
    { echo "FAIL: $name regenerated differs from validation/workloads/$name"; head -20 "$tmp/diff"; fail=1; }
  ./build/san/odsim workload gen --set "$name" -o "$tmp/$name.san" > /dev/null &&
    diff -r "$tmp/$name" "$tmp/$name.san" > /dev/null || { echo "FAIL: $name differs in the sanitizer build"; fail=1; }
  s="$tmp/$name.stats"
  [ "$(stat_of workloads "$s")" = "$n" ] || { echo "FAIL: $name has $(stat_of workloads "$s") workloads, not $n"; fail=1; }
  for k in mode.procs mode.streams mode.batched sessions.1 sessions.2-4 sessions.5-16; do
    v=$(stat_of "$k" "$s")
    [ "${v:-0}" -ge 20 ] || { echo "FAIL: $name: $k = ${v:-none} < 20"; fail=1; }
  done
  short=$(stat_of short_with_sync "$s")
  [ $((4 * ${short:-0})) -ge "$n" ] || { echo "FAIL: $name: $short short steps with syncs of $n (< 25%)"; fail=1; }
  awk '$1 == "pinned_max_gib" && $2 > 16 {exit 1}' "$s" || { echo "FAIL: $name pins more than 16 GiB"; fail=1; }
  # every committed file parses; check sees the same modes as gen
  $odsim workload check validation/workloads/"$name"/*.replay > "$tmp/$name.check" || { echo "FAIL: check $name"; fail=1; }
  [ "$(wc -l < "$tmp/$name.check")" -eq "$n" ] || { echo "FAIL: check printed $(wc -l < "$tmp/$name.check") lines for $name"; fail=1; }
  for m in procs streams batched; do
    c=$(grep -c " mode=$m " "$tmp/$name.check")
    [ "$c" = "$(stat_of "mode.$m" "$s")" ] || { echo "FAIL: $name: check counts $c $m, gen $(stat_of "mode.$m" "$s")"; fail=1; }
  done
  echo "$name: $(tr '\n' ' ' < "$s" | cut -c1-160)"
done

# a part of a set is the same files
$odsim workload gen --set random_dev --first 117 --count 3 -o "$tmp/part" > /dev/null &&
  for f in rdev-0117 rdev-0118 rdev-0119; do cmp -s "$tmp/part/$f.replay" "validation/workloads/random_dev/$f.replay" || { echo "FAIL: --first/--count: $f differs"; fail=1; }; done
[ "$(ls "$tmp/part" | wc -l)" -eq 3 ] || { echo "FAIL: --count 3 wrote $(ls "$tmp/part" | wc -l) files"; fail=1; }

$odsim params replay | grep -q "nominal_ce .*50e9" || { echo "FAIL: params replay lacks the nominal CE rate"; fail=1; }
# check --json: one document with the text's figures, workload by workload
$odsim workload check validation/workloads/sharing/*.replay > "$tmp/sh.txt" &&
  $odsim workload check --json validation/workloads/sharing/*.replay > "$tmp/sh.json" || { echo "FAIL: check --json"; fail=1; }
python3 - "$tmp/sh.txt" "$tmp/sh.json" <<'PY' || fail=1
import json, sys
rows = [dict(kv.split("=") for kv in l.split()[1:]) | {"name": l.split()[0]} for l in open(sys.argv[1])]
js = json.load(open(sys.argv[2]))
assert [r["name"] for r in rows] == [j["name"] for j in js], "order"
for r, j in zip(rows, js):
    assert r["mode"] == j["mode"] and int(r["sessions"]) == j["sessions"] and int(r["ops"]) == j["ops"], (r, j)
    assert abs(float(r["nominal_ms"]) - j["nominal_ms"]) < 1e-3, (r, j)
PY
[ $fail -eq 0 ] && echo "workloads: both sets regenerate byte for byte, strata hold, check reads them (text and JSON)"
exit $fail
