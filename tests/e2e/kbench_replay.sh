#!/usr/bin/env bash
# kbench replay --check without a GPU (issue 34): a valid workload gives its one-line summary (the
# hash of its bytes computed here independently), broken ones a message naming file and line
# and exit 2; without a GPU a real run leaves no CSV behind. Builds kbench (kernels/Makefile) and
# is skipped where nvcc is absent.
set -uo pipefail
cd "${ODSIM_ROOT:-.}"
command -v nvcc >/dev/null || { echo "kbench replay: skipped (no nvcc)"; exit 0; }
make -s -C kernels >/dev/null || { echo "FAIL: make -C kernels"; exit 1; }
kb=./kernels/build/kbench
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. tests/e2e/lib/expect.sh
cat > "$tmp/tiny.replay" <<'W'
odsim-replay 1
workload tiny
mode procs
window_ms 10
session
region 4096
op 0 h2d pieces=2 piece_bytes=1024 span=4096
op 1 sync
session
region 4096
op 0 spin stream=1 us=5
end
W
# FNV-1a 64 in bash arithmetic (wraps mod 2^64 as the C code does), from the project's offset basis
# 1469598103934665603 (common/str.c, rf_fnv1a; not FNV's published 14695981039346656037)
h=1469598103934665603
for b in $(od -An -v -tu1 "$tmp/tiny.replay"); do h=$(( (h ^ b) * 0x100000001b3 )); done
fnv=$(printf '%016x' "$h")
expect 0 "tiny.replay: workload tiny, mode procs, 2 sessions, 3 ops, regions 8192 bytes (0.00 GiB), fnv $fnv" \
  -- $kb replay --check "$tmp/tiny.replay"
sed 's/pieces=2 piece_bytes=1024 span=4096/pieces=8 piece_bytes=1024 span=4096/' "$tmp/tiny.replay" > "$tmp/span.replay"
expect 2 "span.replay:7: op h2d: pieces x piece_bytes = 8192 is above span 4096" -- $kb replay --check "$tmp/span.replay"
grep -v '^end$' "$tmp/tiny.replay" > "$tmp/trunc.replay"
expect 2 "trunc.replay: no 'end' line (truncated?)" -- $kb replay --check "$tmp/tiny.replay" "$tmp/trunc.replay"
sed 's/^op 1 sync$/op 1 sync stream=0/' "$tmp/tiny.replay" > "$tmp/key.replay"
expect 2 "key.replay:8: op sync: key 'stream' not known for this kind" -- $kb replay --check "$tmp/key.replay"
expect 2 "usage: kbench replay" -- $kb replay --check
if [ ! -e /dev/nvidiactl ]; then
  expect 2 "could not write the CSV's header" -- $kb replay -o "$tmp/out.csv" "$tmp/tiny.replay"
  [ -e "$tmp/out.csv" ] && { echo "FAIL: a CSV left behind without a GPU"; fail=1; }
fi
[ $fail -eq 0 ] || exit 1
echo "kbench replay --check: summaries and file:line messages as expected"
