#!/usr/bin/env bash
# run_replay.sh: kbench replay over the committed workload sets on the GPU host.
#
#   kernels/kbench/run_replay.sh OUTDIR SET[:FIRST-LAST]... [--limit SECONDS]
#
# SET is a folder of validation/workloads (random_dev, random, sharing) or `repeat` (the run-to-run
# repeat set of validation/workloads/README.md: rdev-0000..0023); FIRST-LAST keeps the workloads of
# that index range (e.g. random_dev:9-119). Each set runs as one `kbench replay` invocation into
# OUTDIR/replay_<set>.csv (stderr in OUTDIR/replay_<set>.log) under the time limit (default 540 s):
# kbench flushes each workload's rows as it finishes, so a set cut short keeps what it measured and
# the log names the last workload started. Builds kbench first unless kernels/build/kbench exists.
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?usage: run_replay.sh OUTDIR SET[:FIRST-LAST]... [--limit SECONDS]}
shift
LIMIT=540
SETS=()
while [ $# -gt 0 ]; do
    case $1 in
        --limit) LIMIT=${2:?--limit needs seconds}; shift 2 ;;
        *) SETS+=("$1"); shift ;;
    esac
done
[ ${#SETS[@]} -gt 0 ] || { echo "run_replay.sh: no set given" >&2; exit 2; }
mkdir -p "$OUT"
[ -x kernels/build/kbench ] || make -C kernels -j"$(nproc)" >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 2; }
status=0
for spec in "${SETS[@]}"; do
    set_name=${spec%%:*}; range=""
    [ "$spec" != "$set_name" ] && range=${spec#*:}
    dir=validation/workloads/$set_name
    [ "$set_name" = repeat ] && { dir=validation/workloads/random_dev; range=${range:-0-23}; }
    [ -d "$dir" ] || { echo "run_replay.sh: no workload set $dir" >&2; exit 2; }
    files=()
    for f in "$dir"/*.replay; do
        if [ -n "$range" ]; then
            i=$(basename "$f" .replay); i=${i##*-}
            case $i in *[!0-9]*|"") continue ;; esac
            i=$((10#$i)); lo=${range%-*}; hi=${range#*-}
            [ "$i" -ge "$lo" ] && [ "$i" -le "$hi" ] || continue
        fi
        files+=("$f")
    done
    t0=$(date +%s)
    timeout -s INT "$LIMIT" kernels/build/kbench replay -o "$OUT/replay_$set_name.csv" "${files[@]}" 2>"$OUT/replay_$set_name.log"
    rc=$?
    echo "$spec: ${#files[@]} workloads, rc=$rc in $(( $(date +%s) - t0 )) s, $(grep -vc '^#' "$OUT/replay_$set_name.csv" 2>/dev/null) lines; last started: $(grep '^replay:' "$OUT/replay_$set_name.log" | tail -1 | cut -d' ' -f2)"
    grep -i 'failed\|killed' "$OUT/replay_$set_name.log" | head -5
    [ $rc -ne 0 ] && status=1
done
exit $status
