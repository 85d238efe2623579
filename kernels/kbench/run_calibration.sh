#!/usr/bin/env bash
# run_calibration.sh: build kbench and run the calibration suites on the GPU host.
#
#   kernels/kbench/run_calibration.sh OUTDIR [full|quick|probe] [SUITE...]
#
# Writes OUTDIR/SUITE.csv for each suite (default: link kernels step
# concurrency, each in its own invocation), OUTDIR/run.log (build, stderr of
# every suite) and OUTDIR/probe.txt (GPU, host memory, huge pages). Each suite
# runs under a time limit (12 minutes in all; where one command may run 10 at
# most, run link and kernels in one, step and concurrency in another).
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?usage: run_calibration.sh OUTDIR [full|quick|probe] [SUITE...]}
MODE=${2:-full}
shift $(( $# >= 2 ? 2 : $# ))
SUITES=${*:-link kernels step concurrency}
mkdir -p "$OUT"
LOG="$OUT/run.log"

probe() {
    { date -u; uname -a; nvidia-smi; nvidia-smi -q -d CLOCK,PCI 2>/dev/null | head -60
      echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
      grep -E 'MemTotal|MemAvailable|Huge' /proc/meminfo; nproc; ls /sys/class/iommu 2>/dev/null
      cat /proc/cmdline; } >"$OUT/probe.txt" 2>&1
}

probe
echo "== build $(date -u +%T)" >"$LOG"
make -C kernels -j"$(nproc)" >>"$LOG" 2>&1 || { tail -40 "$LOG"; exit 2; }
[ "$MODE" = probe ] && exit 0

Q=""; [ "$MODE" = quick ] && Q=--quick
declare -A LIMIT=([link]=260 [kernels]=200 [step]=170 [concurrency]=95 [whole]=420 [prefill]=420)
status=0
for s in $SUITES; do
    lim=${LIMIT[$s]:-120}; [ "$MODE" = quick ] && lim=90
    # let the host settle after the suite before (it frees tens of GiB of pinned memory): a
    # suite's first rows otherwise catch the reclaim in their tails
    [ "$s" != "${SUITES%% *}" ] && { sync; sleep 10; }
    t0=$(date +%s)
    echo "== $s $(date -u +%T)" >>"$LOG"
    timeout -k 5 "$lim" kernels/build/kbench "$s" $Q -o "$OUT/$s.csv" 2>>"$LOG"
    rc=$?
    echo "$s: rc=$rc in $(( $(date +%s) - t0 )) s, $(grep -vc '^#' "$OUT/$s.csv" 2>/dev/null) lines"
    [ $rc -ne 0 ] && status=1
done
grep -E '^check .*FAILED|fatal|ceilings' "$LOG" | head -20
exit $status
