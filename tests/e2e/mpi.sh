#!/usr/bin/env bash
# A sweep spread over MPI ranks (cli/par.h) writes what the plain binary writes: `mpirun -np 1, 2, 3`
# of a six-point sweep with replications give byte-identical JSON, text and --out sets, for run and
# for capacity (each point's search a unit, its results at and beyond capacity gathered); a point that
# fails under mpirun is named and exits non-zero with nothing written. Skipped when mpirun is absent
# or odsim was built with MPI=0. Run as CI runs it: as root allowed, oversubscribed, shared memory.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
if ! command -v mpirun >/dev/null; then echo "skipped: no mpirun"; exit 0; fi
if ! ldd "$odsim" | grep -q libmpi; then echo "skipped: $odsim built without MPI (make MPI=0)"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { local np=$1; shift; timeout 120 mpirun --oversubscribe --mca btl self,vader -np "$np" "$odsim" "$@"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
{ cat tests/data/small.yaml; printf 'sweep:\n  method.budget: [40, 56, 80]\n  hardware.link: [pcie4, pcie5]\n'; } > "$tmp/sweep.yaml"
"$odsim" run "$tmp/sweep.yaml" --json > "$tmp/serial.json"
[ "$(grep -c '"point":' "$tmp/serial.json")" = 6 ] || { echo "the sweep does not have six points"; exit 1; }
for np in 1 2 3; do
  mpi "$np" run "$tmp/sweep.yaml" --json > "$tmp/np$np.json"
  cmp "$tmp/serial.json" "$tmp/np$np.json" || { echo "run --json with -np $np differs from the serial run"; diff "$tmp/serial.json" "$tmp/np$np.json" | head; exit 1; }
done
"$odsim" run "$tmp/sweep.yaml" --out "$tmp/serial" > "$tmp/serial.txt"
mpi 2 run "$tmp/sweep.yaml" --out "$tmp/np2" > "$tmp/np2.txt"
cmp "$tmp/serial.txt" "$tmp/np2.txt" || { echo "run's text with -np 2 differs"; exit 1; }
diff -r "$tmp/serial" "$tmp/np2" || { echo "run --out with -np 2 differs"; exit 1; }
"$odsim" capacity "$tmp/sweep.yaml" --max 8 --json > "$tmp/cap.json"
grep -q '"at_capacity"' "$tmp/cap.json" || { echo "capacity found no population to compare"; exit 1; }
for np in 2 3; do
  mpi "$np" capacity "$tmp/sweep.yaml" --max 8 --json > "$tmp/cap$np.json"
  cmp "$tmp/cap.json" "$tmp/cap$np.json" || { echo "capacity --json with -np $np differs from the serial run"; diff "$tmp/cap.json" "$tmp/cap$np.json" | head; exit 1; }
done
"$odsim" capacity "$tmp/sweep.yaml" --max 8 --out "$tmp/cap" > "$tmp/cap.txt"
mpi 2 capacity "$tmp/sweep.yaml" --max 8 --out "$tmp/cap2" > "$tmp/cap2.txt"
cmp "$tmp/cap.txt" "$tmp/cap2.txt" && diff -r "$tmp/cap" "$tmp/cap2" || { echo "capacity's text or --out with -np 2 differs"; exit 1; }
# run.duration_s auto and run.ci_target: each point's replications run in one rank, so the counts
# the stopping rule reaches and every figure are the same whatever the ranks
{ cat tests/data/small.yaml; printf 'sweep:\n  method.budget: [40, 56, 80]\n'; } > "$tmp/ci.yaml"
ci=(--set run.duration_s=auto --set run.steady_turns=5 --set run.max_duration_s=10min --set run.ci_target=0.5 --set run.max_replications=8)
"$odsim" run "$tmp/ci.yaml" "${ci[@]}" --json > "$tmp/ci1.json"
mpi 3 run "$tmp/ci.yaml" "${ci[@]}" --json > "$tmp/ci3.json"
cmp "$tmp/ci1.json" "$tmp/ci3.json" || { echo "run with ci_target under -np 3 differs from the serial run"; exit 1; }
# point 4 (warmup 2 s in a 1 s run) cannot run
{ cat tests/data/small.yaml; printf 'sweep:\n  run.warmup_s: [0, 2s]\n  run.duration_s: [3s, 1s, 3s]\n'; } > "$tmp/bad.yaml"
if mpi 2 run "$tmp/bad.yaml" --out "$tmp/bad" > "$tmp/bad.out" 2> "$tmp/bad.err"; then echo "a failing point exited 0 under mpirun"; exit 1; fi
grep -q '^odsim run: point 4 (run.warmup_s=2s run.duration_s=1s): ' "$tmp/bad.err" || { echo "the failing point is not named:"; cat "$tmp/bad.err"; exit 1; }
[ "$(grep -c '^odsim run:' "$tmp/bad.err")" = 1 ] || { echo "the ranks repeat the error"; exit 1; }
[ ! -s "$tmp/bad.out" ] && [ ! -e "$tmp/bad/MANIFEST" ] || { echo "a failed sweep wrote results"; exit 1; }
echo "mpirun -np 1, 2, 3: run and capacity outputs (also with auto durations and ci_target) identical to the serial run"
