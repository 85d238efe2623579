#!/usr/bin/env bash
# Every fuzz target replays its committed seeds and corpus under ASan and UBSan (no recovery): a
# regression on an input a fuzzer once found, or a seed written for a fixed defect, fails here.
set -u
cd "${ODSIM_ROOT:-.}"
fail=0 n=0
for bin in build/san/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  t=$(basename "$bin")
  n=$((n + 1))
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" "tests/fuzz/seeds/$t" "tests/fuzz/corpus/$t" > /dev/null || { echo "FAIL: $t on its corpus"; fail=1; }
done
[ $n -gt 0 ] || { echo "FAIL: no fuzz replay binaries (build/san/fuzz)"; exit 1; }
echo "fuzz corpora: $n targets replayed their seeds and corpora"
exit $fail
