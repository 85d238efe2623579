#!/usr/bin/env bash
# Bad scenarios and arguments: a clear message naming file, line and key; a non-zero exit; nothing
# half-written. Legal but odd input runs with an honest note (exit 0).
set -uo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. tests/e2e/lib/expect.sh
cat > "$tmp/typo.yaml" <<'Y'
hardware: {box: h200-1}
method: {method: fathom}
serving:
  mode: streams
  prefil_chunk: 64
Y
expect 1 "typo.yaml:5:17: key 'serving.prefil_chunk': unknown key 'prefil_chunk' (did you mean 'prefill_chunk'?)" -- $odsim run "$tmp/typo.yaml" --out "$tmp/out1"
[ -e "$tmp/out1" ] && { echo "FAIL: output written for a bad scenario"; fail=1; }
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nrun:\n  seed: 1\n  seed: 2\n' > "$tmp/dup.yaml"
expect 1 "dup.yaml:5:3: duplicate key 'seed' (first at line 4)" -- $odsim run "$tmp/dup.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom, k: many}\n' > "$tmp/type.yaml"
expect 1 "key 'method.k'" -- $odsim run "$tmp/type.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nrun: {replications: 0}\n' > "$tmp/range.yaml"
expect 1 "key 'run.replications': 0 is outside [1, 1000]" -- $odsim run "$tmp/range.yaml"
# the documented maximum once overflowed the picosecond clock and simulated 0 s
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nrun: {duration_s: 1e7}\n' > "$tmp/long.yaml"
expect 1 "long.yaml:3:19: key 'run.duration_s': 1e7 is outside [1e-06, 9e+06]" -- $odsim run "$tmp/long.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nrun: {duration_s: 10, warmup_s: 10}\n' > "$tmp/warm.yaml"
expect 1 "warm.yaml:3:33: key 'run.warmup_s': warmup_s 10 s is not below run.duration_s 10 s" -- $odsim run "$tmp/warm.yaml"
# a population the generator's session cap cannot fill once ran fewer users silently
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nworkload:\n  kind: generator\n  generator: {arrival: closed, population: 300}\n' > "$tmp/pop.yaml"
expect 1 "pop.yaml:5:44: key 'workload.generator.population': population 300 x workload.sessions_per_user 4 need 1200 sessions, but workload.generator.sessions draws at most 1000" -- $odsim run "$tmp/pop.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nrun: [1, 2\n' > "$tmp/syntax.yaml"
expect 1 "syntax.yaml:" -- $odsim run "$tmp/syntax.yaml"
expect 1 "cannot open" -- $odsim run "$tmp/missing.yaml"
# a profile or scenario on an endless file: an error at the size limit (it once read without end)
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\ncalibration: /dev/zero\n' > "$tmp/zero.yaml"
expect 1 "/dev/zero: larger than 67108864 bytes" -- timeout 60 $odsim run "$tmp/zero.yaml"
expect 1 "/dev/zero: larger than 67108864 bytes" -- timeout 60 $odsim run /dev/zero
# a NUL byte once ended the scenario or profile there, silently (the run key after it was dropped)
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\x00\nrun: {replications: 0}\n' > "$tmp/nul.yaml"
expect 1 "nul.yaml:2: a NUL byte: YAML is text" -- $odsim run "$tmp/nul.yaml"
{ printf '\x00'; cat models/calib/h200.yaml; } > "$tmp/nulcal.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\ncalibration: %s\n' "$tmp/nulcal.yaml" > "$tmp/nulcal_run.yaml"
expect 1 "nulcal.yaml:1: a NUL byte" -- $odsim run "$tmp/nulcal_run.yaml"
expect 1 "--set" -- $odsim run tests/data/small.yaml --set run.duration_s=fast
expect 2 "unknown option" -- $odsim run tests/data/small.yaml --bogus
expect 2 "no scenario given" -- $odsim run
expect 2 "--replications: expected 1..1000" -- $odsim run tests/data/small.yaml --replications -3
expect 2 "unknown command 'rnu'" -- $odsim rnu
# validate: another run that is not there, or of another device; groups that match nothing
expect 1 "cannot open directory" -- $odsim validate validation/data/h200 --repeat "$tmp/no-such-run"
mkdir -p "$tmp/h100"
sed 's/^# device: NVIDIA H200/# device: NVIDIA H100/' validation/data/h200/link.csv > "$tmp/h100/link.csv"
expect 1 "is not this directory's device 'h200'" -- $odsim validate validation/data/h200 --repeat "$tmp/h100"
expect 1 "no held-out cases in the groups 'nosuch'" -- $odsim validate validation/data/h200 --group nosuch
# held-out data from another host runtime than the fit set's is refused, case by case (issue 31)
mkdir -p "$tmp/gv/h200"
cp validation/data/h200/link.csv "$tmp/gv/h200/"
sed 's/^# runtime: firecracker/# runtime: gvisor/' validation/data/h200/whole.csv > "$tmp/gv/h200/whole.csv"
expect 1 "measured under gvisor, the fit set under firecracker" -- $odsim validate "$tmp/gv/h200" --group whole_dev
expect 2 "--repeat needs a value" -- $odsim validate validation/data/h200 --repeat
# a method the model cannot resolve: its message, not a crash (the provider once freed an unset pointer)
expect 1 "needs page-granular selection" -- $odsim plan --model qwen3-8b --context 32Ki --method pertoken --layout page
expect 1 "a plane-scan kernel of Fathom's, not sparq's" -- $odsim plan --model qwen3-8b --context 32Ki --method sparq --plane-scan token_per_thread
expect 2 "use --plane-scan" -- $odsim plan --model qwen3-8b --context 32Ki --method fathom --scan-kernel v1
# k above the offloaded context: the plan fetches every token and says so
expect 0 "note: k 4096 selects all 2048 offloaded tokens" -- $odsim plan --model qwen3-8b --context 3000 --k 4096 --method fathom
expect 0 "note: k 4096 selects all 3000 offloaded tokens" -- $odsim plan --model qwen3-8b --context 4000 --window 1000 --k 4096 --method sparq
# a context past what a plan's counts hold once overflowed them and printed nonsense
expect 2 "--context 1e15: expected a token count of at most 4294967296 (4Gi)" -- $odsim plan --model qwen3-8b --context 1e15 --method fathom
expect 2 "--context 4097Mi: expected a token count" -- $odsim plan --model qwen3-8b --context 4097Mi --method fathom
printf 'hardware: {box: h200-1}\nmethod: {method: fathom, keys: kbench}\n' > "$tmp/keys.yaml"
expect 1 "key 'method.keys': removed: use key_variances" -- $odsim run "$tmp/keys.yaml"
# outputs refused before any work: fit's profile and validate's --out
expect 1 "/dev/null: is a character device, not replaced" -- $odsim fit validation/data/h200 -o /dev/null
expect 1 "/dev/null: is not a directory" -- $odsim validate validation/data/h200 --out /dev/null
# odsim workload: gen's output and range, check's file:line (tests/e2e/workloads.sh has the sets)
echo keep > "$tmp/file"
expect 1 "exists and is not a directory" -- $odsim workload gen --set random_dev -o "$tmp/file"
[ "$(cat "$tmp/file")" = keep ] || { echo "FAIL: gen touched a file given as -o"; fail=1; }
expect 2 "unknown set 'random_sealed'" -- $odsim workload gen --set random_sealed -o "$tmp/x"
expect 2 "has 120 workloads" -- $odsim workload gen --set random_dev --first 100 --count 21 -o "$tmp/x"
expect 2 "--set and -o DIR are required" -- $odsim workload gen --set random_dev
[ -e "$tmp/x" ] && { echo "FAIL: a refused gen created its directory"; fail=1; }
sed 's/^op 3 /op 4 /' validation/workloads/random_dev/rdev-0000.replay > "$tmp/bad.replay"
expect 1 "$tmp/bad.replay:15: op id 4: expected 3" -- $odsim workload check validation/workloads/random_dev/rdev-0001.replay "$tmp/bad.replay"
head -n 12 validation/workloads/random_dev/rdev-0000.replay > "$tmp/cut.replay"
expect 1 "$tmp/cut.replay: no 'end' line" -- $odsim workload check "$tmp/cut.replay"
expect 1 "$tmp/none.replay: No such file" -- $odsim workload check "$tmp/none.replay"
[ $fail -eq 0 ] || exit 1
echo "bad input: every case failed cleanly with its message"
