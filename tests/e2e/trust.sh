#!/usr/bin/env bash
# validation/trust.yaml (which held-out group covers an answer's regime, and its error) against
# what `odsim validate` reports now (each group's `command` rerun with --json: cases, median and max
# |error| equal to 2 decimals), then the first lines of odsim run and capacity: a point in
# whole_dev's regime names whole_dev with the committed figures; a point at 1M tokens is beyond
# whole_dev's context and names the context group; a what-if on the link or another box is outside
# the measured platform.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
odsim=./build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# the committed groups as JSON (the file's own simple layout: "  - name: X" then "    key: value")
python3 - validation/trust.yaml > "$tmp/trust.json" <<'PY'
import json, sys
groups = []
for line in open(sys.argv[1]):
    if line.startswith("  - name: "): groups.append({"name": line[10:].strip()})
    elif line.startswith("    ") and groups and ":" in line:
        k, v = line.strip().split(":", 1); groups[-1][k] = v.strip()
print(json.dumps(groups))
PY
python3 -c "import json; [print(g['command']) for g in json.load(open('$tmp/trust.json'))]" | sort -u > "$tmp/cmds"
[ "$(wc -l < "$tmp/cmds")" -ge 8 ] || { echo "trust: fewer groups than expected"; exit 1; }
i=0
while read -r cmd; do
  # shellcheck disable=SC2086
  $odsim $cmd --json > "$tmp/v$i.json" 2> /dev/null
  echo "$cmd	$tmp/v$i.json" >> "$tmp/runs"; i=$((i + 1))
done < "$tmp/cmds"
python3 - "$tmp/trust.json" "$tmp/runs" <<'PY'
import json, sys
groups = json.load(open(sys.argv[1]))
runs = dict(l.rstrip("\n").split("\t") for l in open(sys.argv[2]))
bad = []
for g in groups:
    s = json.load(open(runs[g["command"]]))["summary"].get(g["name"])
    if s is None: bad.append(f"{g['name']} ({g['command']}): no such group in the report"); continue
    for key, got in (("median_pct", s["median_abs_err_pct"]), ("max_pct", s["max_abs_err_pct"]), ("cases", s["n"])):
        if abs(float(g[key]) - round(got, 2)) > 1e-9:
            bad.append(f"{g['name']} ({g['command']}): {key} {g[key]} committed, odsim validate gives {round(got, 2)}")
if bad: sys.exit("validation/trust.yaml is stale:\n  " + "\n  ".join(bad))
print(f"trust: {len(groups)} groups' figures as odsim validate gives them")
PY
short=(--replications 1 --set run.duration_s=2s --set run.warmup_s=0 --set run.ci_target=0)
# whole_dev's regime: streams, 4 sessions on one H200, contexts 96Ki-512Ki, the validated profile
$odsim run scenarios/default.yaml --point 3 "${short[@]}" --set workload.generator.initial_context_median=96Ki \
  --set workload.generator.max_context_tokens=512Ki --set workload.generator.shared_prefix_tokens=512Ki > "$tmp/in.txt"
line=$(python3 -c "
import json; g = next(g for g in json.load(open('$tmp/trust.json')) if g['name'] == 'whole_dev')
print(f\"validation, point 3 ({'method=fathom,budget=136,k=512'}): in the regime of whole_dev ({g['about']}): {float(g['median_pct']):.2f}% median, {float(g['max_pct']):.2f}% max |error| over {g['cases']} cases\")")
head -1 "$tmp/in.txt" | grep -qF "$line" || { echo "trust: expected first line '$line'"; head -3 "$tmp/in.txt"; exit 1; }
$odsim run scenarios/default.yaml --point 3 "${short[@]}" --set workload.generator.initial_context_median=96Ki \
  --set workload.generator.max_context_tokens=512Ki --set workload.generator.shared_prefix_tokens=512Ki --json > "$tmp/in.json"
python3 - "$tmp/in.json" "$tmp/trust.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))[0]["validation"]
g = next(g for g in json.load(open(sys.argv[2])) if g["name"] == "whole_dev")
c = v["covered_by"]
assert c and c["group"] == "whole_dev" and c["median_abs_err_pct"] == float(g["median_pct"]) and c["max_abs_err_pct"] == float(g["max_pct"]), v
assert v["regime"] == {"measures": "decode_step", "serving_mode": "streams", "sessions_per_gpu": 4, "context_tokens": [98304, 524288],
                       "model": "qwen3-8b", "box": "h200-1", "calibration": "models/calib/h200.yaml", "what_if": None}, v["regime"]
assert v["outside"] == [], v
PY
echo "trust: a point in whole_dev's regime names whole_dev with its committed figures (text and JSON)"
# the default study at 768Ki-1Mi tokens: beyond whole_dev's context; the context group named
$odsim run scenarios/default.yaml --point 3 "${short[@]}" > "$tmp/ctx.txt"
head -1 "$tmp/ctx.txt" | grep -q "^validation, point 3 (.*): outside every validated regime: context 768Ki-1Mi tokens beyond whole_dev's 32Ki-512Ki$" ||
  { echo "trust: 1Mi tokens should be beyond whole_dev's context"; head -3 "$tmp/ctx.txt"; exit 1; }
sed -n 2,6p "$tmp/ctx.txt" | grep -q "^  context 768Ki-1Mi tokens: context (single kernels and transfers beyond the fitted 256Ki tokens): 1.74% median" ||
  { echo "trust: the context group should be named"; head -6 "$tmp/ctx.txt"; exit 1; }
echo "trust: a point at 1Mi tokens is beyond whole_dev's context and names the context group"
# what-ifs: a faster link on the measured box, and another box
$odsim run scenarios/default.yaml --point 3 "${short[@]}" --set hardware.link=pcie6 > "$tmp/link.txt"
head -1 "$tmp/link.txt" | grep -q "outside every validated regime: hardware.link: a what-if outside whole_dev's measured platform (h200-1 as it is)" ||
  { echo "trust: a link what-if should be outside the measured platform"; head -2 "$tmp/link.txt"; exit 1; }
$odsim capacity --box hgx-b200-8 --model qwen3-8b --method fathom --context 128Ki --set run.duration_s=2s \
  --set run.replications=1 --max 4 --json > "$tmp/b200.json"
python3 - "$tmp/b200.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))[0]["validation"]
assert v["covered_by"] is None and v["outside"][0] == "box hgx-b200-8 is not whole_dev's measured h200-1", v
PY
echo "trust: what-ifs on the link and on another box are outside the measured platform"
