#!/usr/bin/env bash
# A sweep spread over a Slurm allocation: every rank takes the next sweep point when it is free
# (cli/par.h) and rank 0 writes the results, byte-identical to a serial `odsim run`. Submit with
#   sbatch scenarios/slurm_sweep.sh [SCENARIO] [odsim options...]
# odsim must be built with MPI (the default where mpicc is found; `make deps` installs Open MPI) and
# its data root reachable from every node (ODSIM_ROOT or an installed odsim, docs/data-root.md).
#SBATCH --job-name=odsim-sweep
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=16
#SBATCH --cpus-per-task=1
#SBATCH --time=02:00:00
#SBATCH --output=odsim-sweep-%j.log
set -euo pipefail
scenario=${1:-scenarios/default.yaml}
shift || true
out=results-${SLURM_JOB_ID:-local}
# One rank per task; a sweep point (or capacity search) is one unit, so ranks beyond the number of
# points wait idle: size --ntasks to the sweep. srun --mpi=pmix works as well where Slurm has PMIx.
mpirun odsim run "$scenario" --out "$out" "$@"
mpirun odsim capacity "$scenario" --out "$out/capacity" "$@"
