#!/usr/bin/env bash
# Outputs never destroy and never run a shell (issue 29): devices, FIFOs, directories, links,
# read-only and hard-linked files at an output path are refused before simulating and left as they
# were; --out directories with shell metacharacters in their names work and execute nothing; a
# killed run leaves no temporaries and no torn plots.
set -uo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=$PWD/build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
refused() { # refused PATH PATTERN: --timeline PATH fails with PATTERN, exit 1
  out=$($odsim run tests/data/small.yaml --timeline "$1" 2>&1); rc=$?
  [ $rc -eq 1 ] || bad "--timeline $1: exit $rc, wanted 1"
  grep -qF -- "$2" <<<"$out" || bad "--timeline $1: message lacks '$2': $out"
}
refused /dev/full "/dev/full: is a character device"
[ -c /dev/full ] || bad "/dev/full is no longer a character device"
mkfifo "$tmp/fifo"; refused "$tmp/fifo" "is a FIFO"; [ -p "$tmp/fifo" ] || bad "FIFO replaced"
mkdir "$tmp/dir"; refused "$tmp/dir" "is a directory"; [ -d "$tmp/dir" ] || bad "directory replaced"
echo keep > "$tmp/target"; ln -s "$tmp/target" "$tmp/link"
refused "$tmp/link" "is a symbolic link"; [ -L "$tmp/link" ] && [ "$(cat "$tmp/target")" = keep ] || bad "symlink or its target changed"
echo keep > "$tmp/ro"; chmod 444 "$tmp/ro"
refused "$tmp/ro" "is read-only"; [ "$(cat "$tmp/ro")" = keep ] || bad "read-only file replaced"
echo keep > "$tmp/h1"; ln "$tmp/h1" "$tmp/h2"
refused "$tmp/h2" "has 2 hard links"; [ "$(cat "$tmp/h1")" = keep ] && [ "$(stat -c %h "$tmp/h1")" = 2 ] || bad "hard link split"
mkdir "$tmp/outdir"; mkfifo "$tmp/outdir/results.csv"
out=$($odsim run tests/data/small.yaml --out "$tmp/outdir" 2>&1) && bad "--out with a FIFO inside accepted"
grep -qF "results.csv: is a FIFO" <<<"$out" || bad "--out FIFO message: $out"
# a regular writable file is replaced, keeping its permissions
echo old > "$tmp/t.json"; chmod 640 "$tmp/t.json"
$odsim run tests/data/small.yaml --timeline "$tmp/t.json" >/dev/null || bad "--timeline onto a regular file failed"
[ "$(stat -c %a "$tmp/t.json")" = 640 ] && grep -q traceEvents "$tmp/t.json" || bad "regular file not replaced as it should be"
# shell metacharacters in --out names and a sweep label with a newline and a gnuplot '!' line
cd "$tmp"
for d in "a;touch pwned1;b" "q'x'touch pwned2" 'd$(touch pwned3)' $'nl\n!touch pwned4'; do
  $odsim run "$OLDPWD/tests/data/small.yaml" --out "$tmp/$d" >/dev/null 2>"$tmp/err" || { bad "--out '$d' failed: $(cat "$tmp/err")"; continue; }
  [ -s "$tmp/$d/latency_vs_context.svg" ] && [ -s "$tmp/$d/latency_vs_context.png" ] && [ -s "$tmp/$d/MANIFEST" ] || bad "--out '$d': plots or manifest missing"
done
cat > "$tmp/inj.yaml" <<Y
hardware: {box: h200-1}
model: {name: qwen3-8b}
method: {method: fathom, budget: 56, k: 1024}
serving: {mode: streams, prefill_chunk: 2048}
workload:
  kind: generator
  generator: {arrival: closed, population: 2, initial_context_median: 100000, turns_median: 4, decode_median: 40}
run: {duration_s: 3s, replications: 1, seed: 1}
sweep:
  name: ["a\n!touch $tmp/pwned5\n", "b'\n!touch $tmp/pwned6\n"]
Y
$odsim run "$tmp/inj.yaml" --out "$tmp/inj" >/dev/null 2>"$tmp/err" || bad "sweep with hostile labels failed: $(cat "$tmp/err")"
(cd "$tmp/inj" && gnuplot latency_vs_context.gp 2>/dev/null)   # a user redrawing runs nothing either
$odsim validate "$OLDPWD/validation/data/h200" --heldout "$OLDPWD/validation/heldout.yaml" --calib "$OLDPWD/models/calib/h200.yaml" --max 3 --out "$tmp/v;touch pwned7'x" >/dev/null 2>"$tmp/err" &&
  [ -s "$tmp/v;touch pwned7'x/validate.svg" ] || bad "validate --out with metacharacters: $(cat "$tmp/err")"
cd "$OLDPWD"
ls "$tmp" | grep -qx 'pwned[0-9]' && bad "a command ran: $(ls "$tmp" | grep -x 'pwned[0-9]')"
# killed mid-run: no temporaries, no torn plots (a plot present is whole; no MANIFEST without all)
echo 'sessions: 2000000' > "$tmp/big.yaml"
for cmd in "run scenarios/default.yaml --out $tmp/kill" "trace gen --config $tmp/big.yaml -o $tmp/kill/big.pb"; do
  mkdir -p "$tmp/kill"
  $odsim $cmd >/dev/null 2>&1 & pid=$!
  sleep 1.5; kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
  left=$(ls -a "$tmp/kill" | grep '\.tmp') && bad "killed '$cmd' left: $left"
  for f in "$tmp"/kill/*.svg; do [ -e "$f" ] && ! tail -c 32 "$f" | grep -q '</svg>' && bad "torn plot $f"; done
  rm -rf "$tmp/kill"
done
[ $fail -eq 0 ] || exit 1
echo "outputs: devices, FIFOs, directories, links, read-only and hard-linked files refused; no shell; kills leave nothing"
