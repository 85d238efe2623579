#!/usr/bin/env bash
# Runs every Criterion test binary given, then the end-to-end checks, and prints one closing line
# "N passed, N failed" summing the test cases of all of them.
set -u
root=${ODSIM_ROOT:-$(pwd)}
cd "$root" || exit 1
passed=0; failed=0; log=$(mktemp)
for bin in "$@"; do
  echo "== $bin"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" --jobs 2 >"$log" 2>&1
  rc=$?
  tail -n 40 "$log" | grep -v '^\[----\]' | tail -n 15
  line=$(grep -a 'Synthesis:' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "   (no Criterion summary: binary exited $rc)"; failed=$((failed + 1)); continue
  fi
  p=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$line")
  c=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f + c))
  [ "$rc" -ne 0 ] && [ $((f + c)) -eq 0 ] && failed=$((failed + 1))
done
for t in tests/e2e/*.sh; do
  [ -f "$t" ] || continue
  echo "== $t"
  if bash "$t" >"$log" 2>&1; then passed=$((passed + 1)); tail -n 3 "$log"
  else failed=$((failed + 1)); tail -n 30 "$log"; fi
done
rm -f "$log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
