#!/usr/bin/env bash
# Bad scenarios and arguments: a clear message naming file, line and key; a non-zero exit; nothing
# half-written.
set -uo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect EXIT_CODE PATTERN -- command...
  local want_rc=$1 pat=$2; shift 3
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want_rc" ]; then echo "FAIL ($rc, wanted $want_rc): $*"; echo "$out"; fail=1; return; fi
  if ! grep -qF -- "$pat" <<<"$out"; then echo "FAIL (message lacks '$pat'): $*"; echo "$out"; fail=1; fi
}
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
expect 1 "dup.yaml:5:3: duplicate key 'seed'" -- $odsim run "$tmp/dup.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom, k: many}\n' > "$tmp/type.yaml"
expect 1 "key 'method.k'" -- $odsim run "$tmp/type.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nrun: {replications: 0}\n' > "$tmp/range.yaml"
expect 1 "key 'run.replications': 0 is outside [1, 1000]" -- $odsim run "$tmp/range.yaml"
printf 'hardware: {box: h200-1}\nmethod: {method: fathom}\nrun: [1, 2\n' > "$tmp/syntax.yaml"
expect 1 "syntax.yaml:" -- $odsim run "$tmp/syntax.yaml"
expect 1 "cannot open" -- $odsim run "$tmp/missing.yaml"
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
expect 1 "needs page-granular selection" -- $odsim plan --model qwen3-8b --context 32K --method pertoken --layout page
expect 1 "a plane-scan kernel of Fathom's, not sparq's" -- $odsim plan --model qwen3-8b --context 32K --method sparq --plane-scan token_per_thread
expect 2 "use --plane-scan" -- $odsim plan --model qwen3-8b --context 32K --method fathom --scan-kernel v1
printf 'hardware: {box: h200-1}\nmethod: {method: fathom, keys: kbench}\n' > "$tmp/keys.yaml"
expect 1 "key 'method.keys': removed: use key_variances" -- $odsim run "$tmp/keys.yaml"
[ $fail -eq 0 ] || exit 1
echo "bad input: every case failed cleanly with its message"
