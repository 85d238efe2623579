#!/usr/bin/env bash
# What-ifs answer through one assembly (issue 30):
# - plan without --calib is plan with the study's default profile, found under the data root;
# - the link a user names is the link simulated: dense at 1M, step x the path's bandwidth is constant
#   over pcie3..c2c on h200-1 and every box with its own link, and the step falls with each faster link;
# - every method's transfers follow the link where a link ceiling binds (rate / h2d constant) and
#   otherwise sit under the link's share, bound by a named non-link limit (row rate, SM side, DRAM);
# - an unmeasured link's peaks are raw_GBps (links.yaml) x one efficiency;
# - plan --link L and run with hardware.link: L agree within 1% for one session alone;
# - the profile on its own platform gives what it gives without its platform section, assumes
#   nothing that moves a result; on another GPU it lists what it assumed;
# - sessions spread over a box's switch uplinks by default, and the run says how;
# - a memory tier's capacity is charged (DRAM first, then the tier), a session beyond both refused.
set -euo pipefail
cd "${ODSIM_ROOT:-.}"
root=$(pwd)
odsim=$root/build/rel/odsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
methods="dense fathom sparq pertoken hashattn landmark"
# probe_yaml FILE HARDWARE METHOD TOKENS SESSIONS STEPS: sessions stepping at a fixed context
probe_yaml() {
  printf '%s\n' "hardware: $2" "model: {name: qwen3-8b}" "method: $3" "serving: {mode: streams}" \
    "workload: {kind: probe, probe: {what: session_step, n_tokens: $4, sessions: $5, steps: $6}}" \
    "run: {duration_s: 100s, replications: 1, seed: 1}" > "$tmp/$1"
}
links="pcie3 pcie4 pcie5 pcie6 c2c"
for m in $methods; do
  $odsim plan --model qwen3-8b --method $m --context 1Mi --json > "$tmp/default.json"
  $odsim plan --model qwen3-8b --method $m --context 1Mi --calib models/calib/h200.yaml --json > "$tmp/h200.json"
  cmp -s "$tmp/default.json" "$tmp/h200.json" || { echo "plan $m: default calibration is not models/calib/h200.yaml"; exit 1; }
  (cd "$tmp" && ODSIM_ROOT=$root $odsim plan --model qwen3-8b --method $m --context 1Mi --json > "$tmp/elsewhere.json")
  cmp -s "$tmp/default.json" "$tmp/elsewhere.json" || { echo "plan $m: another directory finds other data"; exit 1; }
  cp "$tmp/default.json" "$tmp/own-$m.json"
  for l in $links; do $odsim plan --model qwen3-8b --method $m --context 1Mi --link $l --json > "$tmp/$m-$l.json"; done
done
echo "plan: the default calibration is models/calib/h200.yaml, from any directory"

# The profile without its platform section: the same numbers on its own platform.
grep -v -e '^platform:' -e '^  gpu: ' -e '^  link: ' -e '^  host: ' -e '^  virtualisation: ' models/calib/h200.yaml > "$tmp/noplat.yaml"
grep -q '^platform:' models/calib/h200.yaml || { echo "models/calib/h200.yaml declares no platform"; exit 1; }
for m in $methods; do
  $odsim plan --model qwen3-8b --method $m --context 1Mi --calib "$tmp/noplat.yaml" --json > "$tmp/noplat-$m.json"
done
for b in hgx-h200-8 hgx-h100-8 dgx-a100-8 l40s-4 gh200-1 hgx-b200-8; do
  $odsim plan --model qwen3-8b --method dense --context 1Mi --hw $b --json > "$tmp/box-$b.json"
done
$odsim plan --model qwen3-8b --method fathom --context 1Mi --hw hgx-b200-8 --json > "$tmp/b200-fathom.json"

# plan --link L against a run of one session alone with hardware.link: L
for l in $links; do
  for m in dense fathom; do
    probe_yaml alone.yaml "{box: h200-1, link: $l}" "{method: $m}" 1048576 1 3
    (cd "$tmp" && ODSIM_ROOT=$root $odsim run alone.yaml --json > "$tmp/run-$m-$l.json")
  done
done

# placement across a box's switch uplinks: four sessions on hgx-h200-8 (two GPUs per uplink)
probe_yaml place.yaml "{box: hgx-h200-8}" "{method: fathom, budget: 56, k: 2048}" 262144 4 3
for p in spread_uplinks round_robin; do
  (cd "$tmp" && ODSIM_ROOT=$root $odsim run place.yaml --set serving.placement=$p --json > "$tmp/place-$p.json")
done
(cd "$tmp" && ODSIM_ROOT=$root $odsim run place.yaml --set workload.probe.sessions=1 --json > "$tmp/place-one.json")
(cd "$tmp" && ODSIM_ROOT=$root $odsim run place.yaml) | grep -q "placement      spread_uplinks: sessions per GPU 1 0 1 0 1 0 1 0; 4 of 4" ||
  { echo "run does not print the default placement (spread_uplinks) with its result"; exit 1; }

# a CXL tier's capacity is charged: host data beyond DRAM spills into it; a session beyond both is refused
probe_yaml cxl.yaml "{box: hgx-h200-8-cxl, set: {host_dram_bytes: 300GB}}" "{method: fathom, budget: 56, k: 2048}" 1048576 4 2
(cd "$tmp" && ODSIM_ROOT=$root $odsim run cxl.yaml --json > "$tmp/cxl.json")
(cd "$tmp" && ODSIM_ROOT=$root $odsim run cxl.yaml --set hardware.set.cxl_bytes=20GB --json > "$tmp/cxl-small.json")
$odsim plan --model qwen3-8b --method fathom --budget 56 --context 1048577 --hw hgx-h200-8-cxl --json > "$tmp/cxl-plan.json"
if (cd "$tmp" && ODSIM_ROOT=$root $odsim run cxl.yaml --set hardware.set.host_dram_bytes=100GB --set hardware.set.cxl_bytes=20GB > "$tmp/refused.txt" 2>&1); then
  echo "a session beyond DRAM + CXL should be refused"; exit 1
fi
grep -q "needs .* GB of host memory .* host.dram_mem 100.0 GB + cxl.mem 20.0 GB" "$tmp/refused.txt" || { echo "refusal without its numbers:"; cat "$tmp/refused.txt"; exit 1; }

python3 - "$tmp" "$methods" "$links" <<'PY'
import json, re, sys
tmp, methods, links = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(name): return json.load(open(f"{tmp}/{name}.json"))
def fail(msg): print(msg); sys.exit(1)
def caps(d): return {r["name"]: r["capacity"] for r in d["resources"]}
def h2d_ops(d): return [o for o in d["ops"] if "bound" in o and o["path"] != "ce-d2h"]
def path_bw(d):
    """The bandwidth of GPU 0's host-to-device path: the slowest of link, uplink and host DRAM."""
    c = caps(d)
    return min(v for k, v in c.items() if k in ("gpu0.h2d", "switch0.up_h2d", "host.dram"))
raw = {}
for m in re.finditer(r"^(\w+):\n  raw_GBps:\s*\{value: ([0-9.]+)", open("models/catalog/links.yaml").read(), re.M):
    raw[m.group(1)] = float(m.group(2))
# one rule for unmeasured links: peak / raw is the same efficiency for each of them
eff = {l: caps(load(f"dense-{l}"))["gpu0.h2d"] / (raw[l] * 1e9) for l in links}
base = eff["pcie3"]
for l in links:
    if abs(eff[l] / base - 1) > 0.01: fail(f"link {l}: h2d / raw = {eff[l]:.4f}, pcie3's {base:.4f}: not one rule")
# dense at 1M: step x path bandwidth constant, and every faster link faster
prod = {}
for l in links: prod[l] = load(f"dense-{l}")["total"]["step_time_us"] * path_bw(load(f"dense-{l}"))
for b in ("hgx-h200-8", "hgx-h100-8", "dgx-a100-8", "l40s-4", "gh200-1", "hgx-b200-8"):
    d = load(f"box-{b}"); prod[b] = d["total"]["step_time_us"] * path_bw(d)
ref = prod["pcie5"]
for k, v in prod.items():
    if abs(v / ref - 1) > 0.05: fail(f"dense 1M on {k}: step x bandwidth {v:.4g} against pcie5's {ref:.4g}")
steps = [load(f"dense-{l}")["total"]["step_time_us"] for l in links]
if any(a <= b for a, b in zip(steps, steps[1:])): fail(f"dense 1M steps do not fall with faster links: {steps}")
# every method: transfers follow the link where a link ceiling binds
# (a batched copy's "link+pieces" is not one: its per-piece time is fixed, so its share of a faster
# link falls, as a contiguous plane fetch's 23K pieces do)
linkish = ("gpu0.h2d", "gpu0.duplex", "switch0.up_h2d", "gather_peak")
checked = {}
for m in methods:
    plans = {l: load(f"{m}-{l}") for l in links}
    share = [o["rate_GBps"] * 1e9 / caps(plans["pcie3"])["gpu0.h2d"] for o in h2d_ops(plans["pcie3"])]
    bound3 = [o["bound"] for o in h2d_ops(plans["pcie3"])]
    for l in links:
        h2d = caps(plans[l])["gpu0.h2d"]
        for i, o in enumerate(h2d_ops(plans[l])):
            r = o["rate_GBps"] * 1e9 / h2d
            if o["bound"] != bound3[i]:   # another path or limit than on pcie3 (index_fetch auto): within the link
                if r > 1.05: fail(f"{m} on {l}: {o['op']} bound by {o['bound']} runs at {r:.3f} of the link")
            elif o["bound"] in linkish:
                if abs(r / share[i] - 1) > 0.05:
                    fail(f"{m} on {l}: {o['op']} bound by {o['bound']} at {r:.3f} of h2d, {share[i]:.3f} on pcie3")
            elif r > share[i] * 1.05:
                fail(f"{m} on {l}: {o['op']} bound by {o['bound']} runs above the link's share")
    tr = [sum(o["time_us"] for o in h2d_ops(plans[l])) for l in links]
    if any(a < b for a, b in zip(tr, tr[1:])): fail(f"{m}: transfers slower on a faster link: {tr}")
    # where the link binds every transfer, the transfer part x bandwidth is constant
    bound = [l for l in links if all(o["bound"] in linkish + ("link+pieces",) for o in h2d_ops(plans[l]))]
    prods = [sum(o["time_us"] for o in h2d_ops(plans[l])) * caps(plans[l])["gpu0.h2d"] for l in bound]
    # a batched copy's fixed per-piece time weighs more on a faster link: 10% there, else 5%
    pieces = any(o["bound"] == "link+pieces" for l in bound for o in h2d_ops(plans[l]))
    if prods and max(prods) > (1.10 if pieces else 1.05) * min(prods): fail(f"{m}: transfer part x bandwidth over {bound}: {prods}")
    checked[m] = len(bound)
# with the contiguous plane layout the default, Fathom at 1M gains from Gen6 over Gen5
f5, f6 = (load(f"fathom-{l}")["total"]["step_time_us"] for l in ("pcie5", "pcie6"))
if not f6 < f5: fail(f"fathom 1M: {f6:.0f} us on pcie6, not below {f5:.0f} us on pcie5")
# plan and run agree for one session alone
for m in ("dense", "fathom"):
    for l in links:
        p = load(f"{m}-{l}")["total"]["step_time_us"] * 1e-6
        r = load(f"run-{m}-{l}")[0]["step_mean_s"]["mean"]
        if abs(r / p - 1) > 0.01: fail(f"{m} on {l}: run's step {r:.6g} s against plan's {p:.6g} s")
# own platform: today's numbers, nothing assumed that moves them; another GPU lists its assumptions
for m in methods:
    own, nop = load(f"own-{m}"), load(f"noplat-{m}")
    if own["total"]["step_time_us"] != nop["total"]["step_time_us"]: fail(f"{m}: the platform section changes the numbers on its own platform")
    if own["assumptions"]: fail(f"{m} on its own platform assumes {[a['name'] for a in own['assumptions']]}")
    if own["total"]["step_time_us"] != load(f"{m}-pcie5")["total"]["step_time_us"]: fail(f"{m}: --link pcie5 is not the profile's own link")
# spread_uplinks: one session per uplink runs as one alone; round_robin shares two uplinks
spread, rr, one = (load(f"place-{p}")[0]["step_mean_s"]["mean"] for p in ("spread_uplinks", "round_robin", "one"))
if abs(spread / one - 1) > 0.01: fail(f"spread_uplinks: {spread:.4g} s a step against {one:.4g} s alone")
if not rr > spread * 1.05: fail(f"round_robin ({rr:.4g} s) should share uplinks and be slower than spread ({spread:.4g} s)")
if "4 of 4 switch uplinks" not in load("place-spread_uplinks")[0]["placement"]: fail("placement not reported in --json")
# CXL: DRAM full, the rest of four sessions' host bytes in the tier, nobody waiting
c, each = load("cxl")[0], load("cxl-plan")["footprint"]["host_bytes"]
if c["waiting_for_memory"] != 0: fail(f"cxl: {c['waiting_for_memory']} sessions wait though DRAM + CXL hold them")
if abs(c["host_peak_bytes"] - 300e9) > 1e6: fail(f"cxl: DRAM peak {c['host_peak_bytes']:.4g}, not its 300 GB")
if abs(c["cxl_peak_bytes"] / (4 * each - 300e9) - 1) > 0.01: fail(f"cxl: tier peak {c['cxl_peak_bytes']:.4g} for 4 x {each:.4g} - 300e9")
# one session at a time fits: those waiting on other GPUs get the memory a finished one frees
small = load("cxl-small")[0]
if small["waiting_for_memory"] != 0 or small["turns"] != 4: fail(f"cxl 20 GB: {small['turns']} turns done, {small['waiting_for_memory']} waiting")
b = load("b200-fathom")
gpu_assumed = [f["name"] for f in b["assumed_or_out_of_range"] if f["assumed"] and "applied to b200" in f["origin"]]
if not gpu_assumed or not b["assumptions"]: fail("fathom on hgx-b200-8 lists no parameter assumed from the H200")
for a in b["assumptions"]:
    if not (abs(a["time_change_at_0.9x"]) > 0.005 or abs(a["time_change_at_1.1x"]) > 0.005): fail(f"assumption {a['name']} moves nothing")
print(f"links: one rule (h2d/raw {base:.4f}); dense 1M step x bandwidth within 5% on {len(prod)} links and boxes; "
      f"transfers follow the link or a named limit for {len(methods)} methods (transfer x bandwidth constant on the "
      f"links binding all of them: {checked}); plan = run within 1%; "
      f"own platform assumes nothing; b200 assumes {len(gpu_assumed)} H200 parameters; "
      f"spread_uplinks {spread*1e3:.1f} ms = alone {one*1e3:.1f} ms < round_robin {rr*1e3:.1f} ms")
PY
# One size rule on the command line and in YAML (the scenario reader's): 128k is 128000 for --context
# as for --window, 1Mi is 2^20; an upper-case K is no suffix there, so not here either.
read -r c w < <($odsim plan --model qwen3-8b --method fathom --context 128k --window 128k --json |
  python3 -c "import json,sys; s=json.load(sys.stdin)['settings']; print(s['context_tokens'], s['window_tokens'])")
[ "$c" = 128000 ] && [ "$w" = 128000 ] || { echo "FAIL: --context 128k --window 128k gave $c and $w"; exit 1; }
c=$($odsim plan --model qwen3-8b --method fathom --context 1Mi --json | python3 -c "import json,sys; print(json.load(sys.stdin)['settings']['context_tokens'])")
[ "$c" = 1048576 ] || { echo "FAIL: --context 1Mi gave $c"; exit 1; }
if $odsim plan --model qwen3-8b --method fathom --context 32K > /dev/null 2>&1; then echo "FAIL: --context 32K accepted"; exit 1; fi
echo "sizes: --context and --window read 128k as 128000 and 1Mi as 2^20, as the scenarios do"
