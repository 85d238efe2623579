#!/usr/bin/env bash
# Session classes (scenario key `classes`): sessions of one study running different methods and
# workloads at once. Checks that classes change nothing they should not (the overall figures of
# classes without overrides, one class of share 1), that per-class figures add up and follow the
# assignment rule, that a decode class is slower beside prefilling neighbours than beside decoders, and
# that bad class lists fail naming file, line and key.
set -uo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=${KEEP_TMP:-$(mktemp -d)}; [ -n "${KEEP_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT
. tests/e2e/lib/expect.sh

# scenarios/mixed.yaml without its classes and shorter: the reference study
python3 - "$tmp" <<'PY'
import sys
d = sys.argv[1]
s = open('scenarios/mixed.yaml').read()
base = s[:s.index('classes:')] + s[s.index('slo:'):]
short = lambda t: t.replace('duration_s: 240s', 'duration_s: 20s').replace('warmup_s: 30s', 'warmup_s: 0s').replace('replications: 4', 'replications: 2')
base = short(base)
assert 'classes' not in base.split('description')[-1].split('slo:')[0]
def cls(text): return base.replace('slo:', 'classes:\n' + text + 'slo:')
open(d + '/base.yaml', 'w').write(base)
open(d + '/two.yaml', 'w').write(cls('  - {name: a, share: 0.5}\n  - {name: b, share: 0.5}\n'))
# the same method map given to one class: its own method instance, built from the same plans seed
open(d + '/twom.yaml', 'w').write(cls('  - {name: a, share: 0.5, method: {method: fathom, budget: 56, k: 512}}\n'
                                      '  - {name: b, share: 0.5}\n'))
open(d + '/one.yaml', 'w').write(cls('  - {name: all, share: 1}\n'))
open(d + '/three.yaml', 'w').write(cls('  - {name: x, share: 0.5}\n  - {name: y, share: 0.3, method: {method: dense}}\n'
                                       '  - {name: z, share: 0.2}\n').replace('population: 8', 'population: 10'))
# mixed.yaml's decoders beside decoders: its tool_prefill class without its workload override
s2 = short(s)
open(d + '/mixed.yaml', 'w').write(s2)
open(d + '/decoders.yaml', 'w').write(s2[:s2.index('    workload:\n      generator: {tool_output_median')] + s2[s2.index('slo:'):])
PY
for f in base two twom one three mixed decoders; do
  $odsim run "$tmp/$f.yaml" --json > "$tmp/$f.json" 2>"$tmp/$f.err" || { echo "FAIL: run $f"; fail=1; }
done
# a trace workload: classes by session index, one class on dense
sed -e 's/^slo:/classes:\n  - {name: sparse, share: 0.5}\n  - {name: dense, share: 0.5, method: {method: dense}}\nslo:/' \
  scenarios/replay_mooncake_conversation.yaml > "$tmp/trace.yaml"
$odsim run "$tmp/trace.yaml" --set run.duration_s=5 --set run.replications=1 --json > "$tmp/trace.json" || { echo "FAIL: run trace"; fail=1; }
$odsim run scenarios/mixed.yaml --set run.duration_s=60s --set run.warmup_s=0s --set run.replications=2 > "$tmp/mixed.txt" || { echo "FAIL: run scenarios/mixed.yaml"; fail=1; }

python3 - "$tmp" <<'PY' || fail=1
import json, sys
d = sys.argv[1]
def load(n): return json.load(open(f'{d}/{n}.json'))[0]
bad = []
def check(ok, what):
    if not ok: bad.append(what)
base = load('base')
def same_overall(name):
    r = load(name)
    cls = r.pop('classes')
    a = {k: v for k, v in base.items() if k != 'scenario'}
    b = {k: v for k, v in r.items() if k != 'scenario'}
    # slo_met with classes: the whole's and every class's; the rest is the study without classes
    check(b.pop('slo_met') == (a.pop('slo_met') and all(c['slo_met'] for c in cls)), f'{name}: slo_met')
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    check(not diff, f'{name}: overall differs from the study without classes in {diff}')
    return cls
for n in ('two', 'twom', 'one'): same_overall(n)
one = load('one')['classes'][0]
for k in ('sessions', 'turns', 'decode_tokens', 'prefill_tokens', 'step_p50_s', 'step_p99_s', 'ttft_p50_s',
          'tokens_per_s_total', 'tokens_per_s_per_session', 'slo_attainment', 'slo_met'):
    check(one[k] == base[k], f'one class of share 1: {k} {one[k]} != {base[k]}')
# per-class figures add up; sessions follow the rule (8 users at 1/2: 4 + 4; 10 at .5/.3/.2: 5, 3, 2;
# mixed.yaml's 8 at 3/4: 6 + 2)
for n, want in (('two', [4, 4]), ('three', [5, 3, 2]), ('mixed', [6, 2]), ('trace', None)):
    r = load(n)
    cls = r['classes']
    if want: check([c['sessions'] for c in cls] == want, f'{n}: sessions per class {[c["sessions"] for c in cls]} != {want}')
    for k in ('sessions', 'turns', 'decode_tokens', 'prefill_tokens'):
        check(sum(c[k] for c in cls) == r[k], f'{n}: classes\' {k} sum to {sum(c[k] for c in cls)}, not {r[k]}')
    tps = sum(c['tokens_per_s_total']['mean'] for c in cls)
    check(abs(tps - r['tokens_per_s_total']['mean']) <= 1e-9 * tps, f'{n}: classes\' tokens/s sum to {tps}')
three = load('three')['classes']
check([c['method'] for c in three] == ['fathom', 'dense', 'fathom'], f'three: methods {[c["method"] for c in three]}')
trace = load('trace')['classes']
check(trace[0]['sessions'] - trace[1]['sessions'] in (0, 1), f'trace: sessions {[c["sessions"] for c in trace]} by index')
# dense reads every offloaded K/V row across the host link at each step: far slower than Fathom beside it
check(three[1]['step_p50_s']['mean'] > 5 * three[0]['step_p50_s']['mean'], 'three: dense steps not slower than fathom')
# decoders beside prefilling neighbours are slower than beside decoders (the same decode sessions:
# arrivals and the decode class's sessions are common to both)
mixed, dec = load('mixed')['classes'], load('decoders')['classes']
check(mixed[0]['decode_tokens'] > 0 and mixed[1]['prefill_tokens'] > 10 * dec[1]['prefill_tokens'],
      f'mixed: the prefill class prefilled {mixed[1]["prefill_tokens"]} vs {dec[1]["prefill_tokens"]}')
check(mixed[0]['step_mean_s']['mean'] > 1.1 * dec[0]['step_mean_s']['mean'],
      f'decode steps beside prefills {mixed[0]["step_mean_s"]["mean"]} not above beside decoders {dec[0]["step_mean_s"]["mean"]}')
for b in bad: print('FAIL:', b)
sys.exit(1 if bad else 0)
PY
grep -q "class tool_prefill (share 0.25, method fathom): sessions 2" "$tmp/mixed.txt" || { echo "FAIL: mixed.yaml's text report lacks its class"; fail=1; }
# capacity searches with every class's SLO; a population too small to give each class a user still
# counts (its empty class meets it): mixed.yaml serves a few users, not 0
cap=$($odsim capacity scenarios/mixed.yaml --set run.duration_s=20s --set run.warmup_s=0s --set run.replications=2 | awk '$1 == "base" {print $2}')
[ -n "$cap" ] && [ "$cap" -ge 2 ] && [ "$cap" -lt 8 ] || { echo "FAIL: mixed.yaml's capacity '$cap' (wanted 2..7 users)"; fail=1; }

# bad class lists: file, line and key
b='hardware: {box: h200-1}\nmethod: {method: fathom}\n'
printf "${b}classes:\n  - {name: a, share: 0.5}\n  - {name: b, share: 0.4}\n" > "$tmp/sum.yaml"
expect 1 "sum.yaml:4:3: key 'classes': the classes' shares sum to 0.9, not 1" -- $odsim run "$tmp/sum.yaml"
printf "${b}classes:\n  - {name: a, share: 1, methd: {method: dense}}\n" > "$tmp/key.yaml"
expect 1 "key.yaml:4:32: key 'classes[0].methd': unknown key 'methd'" -- $odsim run "$tmp/key.yaml"
printf "${b}classes:\n  - {name: a, share: 0.5}\n  - {name: a, share: 0.5}\n" > "$tmp/dupname.yaml"
expect 1 "dupname.yaml:5:12: key 'classes[1].name': duplicate class name 'a'" -- $odsim run "$tmp/dupname.yaml"
printf "${b}classes: []\n" > "$tmp/empty.yaml"
expect 1 "empty.yaml:3:10: key 'classes': expected a list of one or more classes" -- $odsim run "$tmp/empty.yaml"
printf "${b}classes:\n  - {name: a, share: 0}\n  - {name: b, share: 1}\n" > "$tmp/zero.yaml"
expect 1 "zero.yaml:4:22: key 'classes[0].share': a class's share must be above 0" -- $odsim run "$tmp/zero.yaml"
printf "${b}classes:\n  - {name: a, share: 1, workload: {generator: {rate_per_s: 2}}}\n" > "$tmp/arr.yaml"
expect 1 "arr.yaml:4:60: key 'classes[0].workload.generator.rate_per_s': sets the study's arrivals" -- $odsim run "$tmp/arr.yaml"
printf "${b}classes:\n  - {name: a, share: 1, workload: {generator: {tool_output_mediam: 2}}}\n" > "$tmp/gkey.yaml"
expect 1 "unknown key 'tool_output_mediam'" -- $odsim run "$tmp/gkey.yaml"
printf "${b}classes:\n  - {name: a, share: 1, method: {method: fathom, tier: cxl}}\n" > "$tmp/tier.yaml"
expect 1 "tier.yaml:4:33: key 'classes[0].method': a class's tier must be the scenario method's" -- $odsim run "$tmp/tier.yaml"
printf "${b}classes:\n  - {share: 1}\n" > "$tmp/noname.yaml"
expect 1 "noname.yaml:4" -- $odsim run "$tmp/noname.yaml"
[ "$fail" -eq 0 ] && echo "classes: overall unchanged without overrides, figures add up, mixed direction, bad lists rejected"
exit "$fail"
