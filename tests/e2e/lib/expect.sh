# expect EXIT_CODE PATTERN -- command...: runs the command; unless it exits EXIT_CODE and its output
# (stdout and stderr) holds PATTERN (a fixed string), says why and sets fail=1. Sourced by the
# tests of tests/e2e/ (run_all.sh runs only tests/e2e/*.sh, not this folder).
fail=0
expect() {
  local want_rc=$1 pat=$2; shift 3
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want_rc" ]; then echo "FAIL ($rc, wanted $want_rc): $*"; echo "$out"; fail=1; return; fi
  if ! grep -qF -- "$pat" <<<"$out"; then echo "FAIL (message lacks '$pat'): $*"; echo "$out"; fail=1; fi
}
