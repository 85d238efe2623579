#!/usr/bin/env bash
# The sharing rules against their own measurements (validation/data/h100/replay_sharing.csv, kbench
# replay of validation/workloads/sharing/ on the H100 of box h100-1): the catalog's
# ctx_switch_idle_us is share-ts-idle-2's step p50 less share-ts-alone's, as its origin says; and
# `odsim replay` predicts the workloads each rule was declared from within 10% of their measured p50:
# small copies of 1-8 streams taking turns on the copy engine (share-small-*), contexts passing the
# GPU when one idles
# (share-ts-idle-2, share-ts-sync-2) and copies of two processes not time-sliced (share-ts-copy-2).
# Not asserted: share-ce-queue (a stream's 256 queued copies beside another's 64 MiB copy), where the
# engine's processor sharing predicts 1287 us against 2256 measured: the engine serves the big copy
# whole, which the fluid share does not model (DESIGN.md "Copy engines").
set -u
cd "${ODSIM_ROOT:-.}"
odsim=${ODSIM:-./build/rel/odsim}
csv=validation/data/h100/replay_sharing.csv
python3 - "$odsim" "$csv" <<'PY'
import subprocess, sys
odsim, csv = sys.argv[1], sys.argv[2]
rows = [l.split(',') for l in open(csv) if not l.startswith('#')]
hdr, rows = rows[0], rows[1:]
c = {k: i for i, k in enumerate(hdr)}
p50 = {r[c['variant']]: float(r[c['t_med_us']]) for r in rows if r[c['concurrent_id']] == ''}
bad = []
want = p50['share-ts-idle-2'] - p50['share-ts-alone']
cat = [l for l in open('models/catalog/gpus.yaml') if 'ctx_switch_idle_us:' in l][0]
have = float(cat.split('value:')[1].split(',')[0])
if abs(have - want) > 0.05:
    bad.append(f'catalog ctx_switch_idle_us {have} is not share-ts-idle-2 less share-ts-alone: {want:.3f}')
for w in ('share-small-1', 'share-small-2', 'share-small-4', 'share-small-8',
          'share-ts-idle-2', 'share-ts-sync-2', 'share-ts-copy-2'):
    out = subprocess.run([odsim, 'replay', f'validation/workloads/sharing/{w}.replay', '--box', 'h100-1'],
                         capture_output=True, text=True)
    line = [l.split() for l in out.stdout.splitlines() if l.startswith('all ')]
    if out.returncode or not line:
        bad.append(f'{w}: odsim replay failed: {out.stderr.strip()}')
        continue
    pred = float(line[0][3])
    if abs(pred / p50[w] - 1) > 0.10:
        bad.append(f'{w}: predicted {pred:.1f} us against {p50[w]:.1f} measured')
# single ops on the same machine (replay_ops.csv): a chain and a gather as predicted; a batched copy's
# per-piece cost is this host's own, about 2 us where the H200's host fitted 0.45 (a host-class
# parameter, labelled assumed on box h100-1), so its time stays 3-5x the prediction
ops = [l.split(',') for l in open('validation/data/h100/replay_ops.csv') if not l.startswith('#')][1:]
opm = {r[c['variant']]: float(r[c['t_med_us']]) for r in ops if r[c['concurrent_id']] == ''}
for w, lo, hi in (('op-chain-256', 0.9, 1.1), ('op-gather-16k', 0.9, 1.1), ('op-batch-8k', 3, 5), ('op-batch-32k', 3, 5)):
    out = subprocess.run([odsim, 'replay', f'validation/workloads/ops/{w}.replay', '--box', 'h100-1'],
                         capture_output=True, text=True)
    line = [l.split() for l in out.stdout.splitlines() if l.startswith('all ')]
    r = opm[w] / float(line[0][3]) if line else 0
    if not lo <= r <= hi:
        bad.append(f'{w}: measured / predicted {r:.2f}, outside [{lo}, {hi}]')
    if w.startswith('op-batch') and 'cebatch_piece_us' not in out.stdout + out.stderr:
        bad.append(f'{w}: the batched copy\'s per-piece cost is not named as assumed on box h100-1')
# the repeat run (validation/data/h100-replay-repeat/) measured every sharing workload within 6.5%
rep = [l.split(',') for l in open('validation/data/h100-replay-repeat/replay_sharing.csv') if not l.startswith('#')][1:]
for r in rep:
    w = r[c['variant']]
    if r[c['concurrent_id']] == '' and abs(float(r[c['t_med_us']]) / p50[w] - 1) > 0.065:
        bad.append(f'{w}: the repeat run differs by more than 6.5% from the primary')
for b in bad: print('FAIL:', b)
sys.exit(1 if bad else 0)
PY
rc=$?
[ $rc -eq 0 ] || exit $rc
# the H100 run-to-run floor of random_dev (data README: median 3.8% over the 634 rows both runs have)
odsim=${ODSIM:-./build/rel/odsim}
"$odsim" validate validation/data/h100 --repeat validation/data/h100-replay-repeat --group random_dev --json 2>/dev/null |
  python3 -c "import json,sys; s=json.load(sys.stdin)['summary']['random_dev']; sys.exit(0 if s['n'] - s['failed'] == 634 and abs(s['median_abs_err_pct'] - 3.79) < 0.01 else 1)" ||
  { echo "FAIL: the H100 repeat of random_dev no longer gives the data README's floor"; exit 1; }
echo "sharing: each rule's own workloads within 10% of their H100 measurements; the repeat run within its floor"
