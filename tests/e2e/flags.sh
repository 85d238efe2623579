#!/usr/bin/env bash
# odsim validate flags a case only if clamping the calibration parameters its prediction used
# outside their fitted range moves it by more than 1% (docs/calibration.md): two hand-written
# replay workloads (fixtures, not measurements), each a chain of host-to-device copies issued back
# to back, ce_b2b_gap_us fitted on chains of 2..16 copies. 200 copies of 64 B: the gaps are nearly
# all of the step, clamped to 16 copies the step shrinks many times over: flagged, by
# ce_b2b_gap_us. 17 copies of 1 MiB beside a long HBM stream: one gap too many, far under 1%: not
# flagged, though the parameter is still listed as used outside its range.
set -u
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/wl/random_dev" "$tmp/data/h200"
workload() {   # $1 name, $2 the session's ops
  printf '# a test fixture\nodsim-replay 1\nworkload %s\nmode streams\nwindow_ms 20\nsession\nregion 268435456\n%s\nend\n' "$1" "$2" \
    > "$tmp/wl/random_dev/$1.replay"
}
workload rdev-9100 "op 0 h2d pieces=200 piece_bytes=64 span=12800
op 1 sync"
workload rdev-9101 "op 0 h2d pieces=17 piece_bytes=1048576 span=17825792
op 1 hbm bytes=4294967296 stream=1
op 2 sync"
fnv() {
python3 - "$1" <<'PY'
import sys
h = 1469598103934665603   # the project's offset basis (common/str.c)
for b in open(sys.argv[1], "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%016x" % h)
PY
}
f0=$(fnv "$tmp/wl/random_dev/rdev-9100.replay"); f1=$(fnv "$tmp/wl/random_dev/rdev-9101.replay")
cat > "$tmp/data/h200/replay.csv" <<EOF
# suite: replay
# device: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, L2 60 MiB)
# fixture: hand-made rows for odsim's tests, not a measurement
suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,allocator,streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,t_p90_us,t_p99_us,per_s,gbps,concurrent_id,workload_fnv
replay,session_step,rdev-9100,,,,,,,,,,hostalloc,1,1,streams:1,,,,150,600,590,610,620,1600,,0,$f0
replay,session_step,rdev-9101,,,,,,,,,,hostalloc,1,1,streams:1,,,,150,1400,1390,1410,1420,700,,0,$f1
EOF
$odsim validate "$tmp/data/h200" --workloads "$tmp/wl" --json > "$tmp/val.json" || { echo "FAIL: validate"; exit 1; }
$odsim validate "$tmp/data/h200" --workloads "$tmp/wl" --out "$tmp/out" > "$tmp/val.txt" || { echo "FAIL: validate (text)"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import json, sys
t = sys.argv[1]
val = json.load(open(t + "/val.json"))
big, small = val["cases"]
assert "ce_b2b_gap_us" in big["flags"] and "ce_b2b_gap_us" in small["flags"], (big["flags"], small["flags"])
assert big["flagged"] and big["clamped"]["flagged_by"] == "ce_b2b_gap_us", big
assert big["clamped"]["shift_pct"] > 50, big["clamped"]
assert not small["flagged"] and small["clamped"]["params"] == "ce_b2b_gap_us", small
assert 0 < small["clamped"]["shift_pct"] < 1, small["clamped"]
assert val["summary"]["random_dev"]["flagged"] == 1, val["summary"]
row = [r for r in val["flags"]["outside"] if r["name"] == "ce_b2b_gap_us"][0]
assert row == {"name": "ce_b2b_gap_us", "clamps": True, "cases": 2, "flagged": 1}, row
assert val["flags"]["flagged"] == 1 and val["flags"]["of"] == 2, val["flags"]
csv = open(t + "/out/validate.csv").read().splitlines()
hdr = [l for l in csv if l.startswith("group,")][0].split(",")
rows = [dict(zip(hdr, l.split(","))) for l in csv if l.startswith("random_dev,")]
assert [r["flagged"] for r in rows] == ["1", "0"], rows
print("flags: 200 back-to-back copies move %.0f%% clamped (flagged), 17 move %.2f%% (not)"
      % (big["clamped"]["shift_pct"], small["clamped"]["shift_pct"]))
PY
grep -q "^\[flagged\]: 1 of 2 predicted cases" "$tmp/val.txt" && grep -q "^  ce_b2b_gap_us  *clamps  *2  *1$" "$tmp/val.txt" \
  && [ "$(grep -c '\[flagged\]$' "$tmp/val.txt")" = 1 ] || { echo "FAIL: text flag summary"; cat "$tmp/val.txt"; exit 1; }
echo "flags: the text report flags one case and names ce_b2b_gap_us"
