#!/usr/bin/env bash
# odsim replay and the replay rows of odsim validate, on a hand-written workload and a hand-made CSV
# (fixtures, not measurements): `odsim replay --json` predicts each session; `odsim validate` finds
# the workload named by each row's variant in a set's folder under --workloads, checks the row's
# workload_fnv (FNV-1a 64 of the file's bytes with the project's offset basis, computed
# here independently), puts the rdev- rows in
# the random_dev group with its strata, and compares each session's row and the aggregate with
# `odsim replay`'s figures; a wrong hash is an error naming the CSV's file and line. The exclusion
# rule: a session row with fewer steps than min_steps is excluded and named; a workload of the set
# without rows is named in a note (not measured yet, or kbench failed on it), never a case.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/wl/random_dev" "$tmp/data/h200"
wl="$tmp/wl/random_dev/rdev-9000.replay"
cat > "$wl" <<'EOF'
# a test fixture: two sessions as streams of one process
odsim-replay 1
workload rdev-9000
mode streams
window_ms 20
session
region 268435456
op 0 h2d pieces=2 piece_bytes=1048576 span=16777216
op 1 hbm bytes=268435456 stream=1
op 2 sync
session
region 268435456
idle_us 100
op 0 gather pieces=1024 piece_bytes=4096 span=268435456
end
EOF
fnv=$(python3 - "$wl" <<'PY'
import sys
h = 1469598103934665603   # the project's offset basis (common/str.c, kernels/replay_fmt.c), not FNV's 14695981039346656037
for b in open(sys.argv[1], "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%016x" % h)
PY
)
$odsim replay "$wl" --json > "$tmp/pred.json" || { echo "FAIL: odsim replay"; exit 1; }
$odsim replay "$wl" | head -2 | grep -q "calibration profile: h200-pcie5-vm" || { echo "FAIL: no profile in the first lines"; exit 1; }
csv() {   # $1: the hash written in every row, $2: session 1's measured steps
  cat <<EOF
# suite: replay
# device: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, L2 60 MiB)
# fixture: hand-made rows for odsim's tests, not a measurement
suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,allocator,streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,t_p90_us,t_p99_us,per_s,gbps,concurrent_id,workload_fnv
replay,session_step,rdev-9000,,,,,,,,,,hostalloc,2,1,streams:2,,,,150,180,90,185,190,7400,,0,$1
replay,session_step,rdev-9000,,,,,,,,,,hostalloc,2,1,streams:2,,,,${2:-75},160,158,170,175,3900,,1,$1
replay,session_step,rdev-9000,,,,,,,,,,hostalloc,2,1,streams:2,,,,225,165,90,180,190,11300,,,$1
EOF
}
csv "$fnv" > "$tmp/data/h200/replay.csv"
$odsim validate "$tmp/data/h200" --workloads "$tmp/wl" --json > "$tmp/val.json" || { echo "FAIL: validate"; exit 1; }
$odsim validate "$tmp/data/h200" --workloads "$tmp/wl" > "$tmp/val.txt" || { echo "FAIL: validate (text)"; exit 1; }
grep -q "^random_dev *streams, sessions 2-4 *3 " "$tmp/val.txt" || { echo "FAIL: no stratum line"; cat "$tmp/val.txt"; exit 1; }
python3 - "$tmp" "$fnv" <<'PY' || exit 1
import json, sys
t, fnv = sys.argv[1], sys.argv[2]
pred, val = json.load(open(t + "/pred.json")), json.load(open(t + "/val.json"))
assert pred["workload_fnv"] == fnv, (pred["workload_fnv"], fnv)
g = val["summary"]["random_dev"]
assert g["n"] == 3 and g["failed"] == 0, g
assert g["strata"]["streams"]["cases"] == 3 and g["strata"]["procs"]["cases"] == 0, g["strata"]
want = [pred["sessions"][0], pred["sessions"][1], pred["all"]]
for c, p in zip(val["cases"], want):
    got = c["predicted"]
    for k, m in (("p50_us", "p50_us"), ("p99_us", "p99_us"), ("throughput_per_s", "steps_per_s")):
        assert abs(got[k] - p[m]) <= 1e-6 * abs(p[m]), (k, got[k], p[m])
print("replay: random_dev p50 %.1f/%.1f/%.1f us predicted" % tuple(c["predicted"]["p50_us"] for c in val["cases"]))
PY
csv 0123456789abcdef > "$tmp/data/h200/replay.csv"
out=$($odsim validate "$tmp/data/h200" --workloads "$tmp/wl" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -qF "replay.csv:5: workload_fnv 0123456789abcdef, but $wl hashes to $fnv" <<<"$out" \
  || { echo "FAIL: a wrong hash ($rc): $out"; exit 1; }
echo "replay: a wrong workload_fnv names replay.csv:5"
csv "$fnv" 7 > "$tmp/data/h200/replay.csv"
sed 's/rdev-9000/rdev-9001/' "$wl" > "$tmp/wl/random_dev/rdev-9001.replay"
out=$($odsim validate "$tmp/data/h200" --workloads "$tmp/wl" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qF "replay.csv:6: excluded as unstable: rdev-9000 session 1 measured 7 steps, fewer than its min_steps 10" <<<"$out" \
  && ! grep -q "^random_dev .*rdev-9001" <<<"$out" \
  && grep -qF "note: random_dev: 1 workload(s) have no measured row (not measured yet, or kbench replay failed on them: its log says which), e.g. rdev-9001" <<<"$out" \
  && grep -q "^random_dev  *2  *0 " <<<"$out" || { echo "FAIL: the exclusion rule ($rc): $out"; exit 1; }
echo "replay: an unstable session row excluded, a workload without rows named as unmeasured"
