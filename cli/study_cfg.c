#include "cli/study_cfg.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "models/method.h"
#include "sim/exec.h"

#define P(k, t, st, f, d, lo, hi, doc) {k, t, offsetof(st, f), d, lo, hi, NULL, doc}
#define PA(k, t, st, f, d, lo, hi, doc) {k, t, offsetof(st, f), d, lo, hi, auto_word, doc} /* or `auto` */
#define E(k, st, f, d, ch, doc) {k, CFG_T_ENUM, offsetof(st, f), d, 1, 0, ch, doc}
#define N(k, st, f, doc) {k, CFG_T_NODE, offsetof(st, f), NULL, 1, 0, NULL, doc}
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* The longest run.duration_s and warmup_s: below the SIM_MAX_S (106.7 days) the engine's picosecond
 * clock holds, with room for what is scheduled past the end. */
#define RUN_MAX_S 9e6

static const cfg_param_t top_params[] = {
    P("name", CFG_T_STRING, scn_top_t, name, "unnamed", 1, 0, "scenario name, in every output"),
    P("description", CFG_T_STRING, scn_top_t, description, "", 1, 0, "what the study asks"),
    P("calibration", CFG_T_STRING, scn_top_t, calibration, "models/calib/h200.yaml", 1, 0,
      "calibration profile (relative to odsim's data root), or 'none' for the presets alone"),
    P("catalog", CFG_T_STRING, scn_top_t, catalog, "models/catalog", 1, 0,
      "catalog directory: gpus, links, tiers, boxes, llms, quality (relative to odsim's data root)"),
    N("hardware", scn_top_t, hardware, "box, gpu, link (what-if), tier, gpus, set: parameter overrides (models/hwcat.h)"),
    N("model", scn_top_t, model, "LLM shape and dtypes (section model)"),
    N("method", scn_top_t, method, "attention method and its parameters (odsim plan --help)"),
    N("serving", scn_top_t, serving, "how sessions reach the GPU (section serving)"),
    N("workload", scn_top_t, workload, "sessions: generator, trace replay or a measured probe (section workload)"),
    N("slo", scn_top_t, slo, "service-level objectives (section slo)"),
    N("run", scn_top_t, run, "duration, seeds, replications (section run)"),
    N("sweep", scn_top_t, sweep, "sweep axes: any key with a list of values; points are their cross product"),
    N("classes", scn_top_t, classes,
      "session classes sharing the box, each with its own method and workload (section classes; none: "
      "every session runs the scenario's)"),
};

static const cfg_param_t model_params[] = {
    P("name", CFG_T_STRING, scn_model_t, name, "qwen3-8b", 1, 0, "LLM shape preset (models/catalog/llms.yaml)"),
    N("set", scn_model_t, set, "shape overrides (e.g. layers: 1)"),
};

static const char *const admit_names[] = {"reserve", "grow_preempt", "grow_evict", NULL};
static const char *const place_names[] = {"spread_uplinks", "pack", "round_robin", NULL};
static const char *const sess_stream_names[] = {"many", "one", NULL};
static const char *const latency_names[] = {"begin", "device", NULL};

static const cfg_param_t serving_params[] = {
    E("mode", scn_serving_t, mode, "streams", exec_mode_names,
      "streams of one process | separate processes (time-sliced kernels) | mps | lockstep or continuous batching"),
    P("cuda_graphs", CFG_T_BOOL, scn_serving_t, cuda_graphs, "false", 1, 0, "one launch per graph segment instead of one per op"),
    P("coarse", CFG_T_BOOL, scn_serving_t, coarse, "false", 1, 0,
      "simulate each step as one op per resource (fast; order within a step lost; not with batching)"),
    P("coarse_reuse", CFG_T_DOUBLE, scn_serving_t, coarse_reuse, "0.01", 0, 1,
      "coarse: reuse a session's step plan while its context stays within this fraction of the one it was built at"),
    P("max_batch", CFG_T_INT, scn_serving_t, max_batch, "0", 0, 1e6, "batching: most sessions per iteration (0: no limit)"),
    P("prefill_chunk", CFG_T_INT, scn_serving_t, prefill_chunk, "2048", 1, 1e8, "tokens per prefill chunk"),
    E("admission", scn_serving_t, admission, "reserve", admit_names,
      "reserve a session's final footprint at admission, or grow and preempt (wait) / evict when memory is full"),
    E("placement", scn_serving_t, placement, "spread_uplinks", place_names,
      "sessions on the GPUs of the box: spread_uplinks (each to the least-used switch uplink in turn), pack (fill GPU 0 first), round_robin (GPU by GPU)"),
    P("hw_queues", CFG_T_INT, scn_serving_t, hw_queues, "8", 0, 32,
      "hardware work queues per CUDA context (CUDA_DEVICE_MAX_CONNECTIONS; 8 is the CUDA driver's default): "
      "streams beyond them share one, whose ops start in launch order (0: one per stream; not with batching)"),
    P("gathers_exclusive", CFG_T_BOOL, scn_serving_t, gathers_exclusive, "true", 1, 0,
      "GPU ops whose SMs read host memory (SM gathers, zero-copy kernels) and the other kernels take the "
      "GPU in turns, never at once, whatever their streams (kbench pairs: an SM gather with another "
      "stream's kernel takes their two times less 2-13 us; run h200-1020-pairs (git history, before e518637))"),
    E("session_streams", scn_serving_t, session_streams, "many", sess_stream_names,
      "a session's copies and kernels on streams of their own (overlapping), or all on one stream"),
    E("latency_from", scn_serving_t, latency_from, "begin", latency_names,
      "a step's latency from when the session begins it, or from when an event recorded in its stream "
      "would fire (later when its first op waits behind its hardware queue; what CUDA events measure)"),
};

static const char *const wl_kinds[] = {"generator", "trace", "probe", NULL};
static const char *const replays[] = {"closed", "open", NULL};

static const cfg_param_t workload_params[] = {
    E("kind", scn_workload_t, kind, "generator", wl_kinds, "generator | trace replay | probe (a measured case)"),
    E("replay", scn_workload_t, replay, "closed", replays, "closed loop (think times) or open loop (recorded arrivals)"),
    P("trace", CFG_T_STRING, scn_workload_t, trace, "", 1, 0, "trace: an odsim trace file (odsim trace gen/import)"),
    P("import_format", CFG_T_STRING, scn_workload_t, import_format, "", 1, 0, "trace: or import this format on the fly (mooncake, azure, tracelab)"),
    P("import_file", CFG_T_STRING, scn_workload_t, import_file, "", 1, 0, "trace: the raw public trace to import"),
    P("scale", CFG_T_DOUBLE, scn_workload_t, scale, "1", 1, 1e6, "trace: stretch contexts ×scale"),
    P("scale_to", CFG_T_INT, scn_workload_t, scale_to, "0", 0, 1e9, "trace: stretch contexts to this maximum (0: off)"),
    P("max_sessions", CFG_T_INT, scn_workload_t, max_sessions, "0", 0, 1e9, "replay at most this many sessions (0: all)"),
    P("sessions_per_user", CFG_T_INT, scn_workload_t, sessions_per_user, "4", 1, 1e6,
      "closed-population generator: sessions drawn per user (each starts when the previous ends)"),
    N("generator", scn_workload_t, generator, "generator parameters (odsim trace gen --params)"),
    N("probe", scn_workload_t, probe, "probe: one measured case (section probe)"),
};

static const cfg_param_t slo_params[] = {
    P("ttft_s", CFG_T_SECONDS, scn_slo_t, ttft_s, "10s", 0, 1e7, "time to first token per turn (0: none)"),
    P("tokens_per_s", CFG_T_DOUBLE, scn_slo_t, tokens_per_s, "10", 0, 1e7, "decode tokens/s per session within a turn (0: none)"),
    P("step_p99_s", CFG_T_SECONDS, scn_slo_t, step_p99_s, "0", 0, 1e7, "p99 decode step latency of the box (0: none)"),
    P("attainment", CFG_T_DOUBLE, scn_slo_t, attainment, "0.95", 0, 1, "share of turns that must meet ttft and tokens/s"),
};

static const char *const auto_word[] = {"auto", NULL};

static const cfg_param_t run_params[] = {
    PA("duration_s", CFG_T_SECONDS, scn_run_t, duration_s, "120s", 1e-6, RUN_MAX_S,
       "simulated time per replication; auto: until the measured window (after the warm-up) spans "
       "run.steady_turns mean turn durations, at most run.max_duration_s (a point whose window falls short is "
       "reported transient and never meets the SLO). A turn lasts from when it is ready (a session's arrival "
       "for its first) to its last token; the mean is over the turns done so far, those in progress counting "
       "their time so far"),
    PA("warmup_s", CFG_T_SECONDS, scn_run_t, warmup_s, "0s", 0, RUN_MAX_S,
       "simulated time excluded from every statistic (latencies, TTFT, turns, throughput); auto: with "
       "duration_s auto, until one mean turn duration has passed and a turn is done (every session's first "
       "turn, joining included, is over on average); with a fixed duration_s, none (the run is measured whole)"),
    P("steady_turns", CFG_T_DOUBLE, scn_run_t, steady_turns, "10", 1, 1e6,
      "duration_s auto: mean turn durations the measured window must span"),
    P("max_duration_s", CFG_T_SECONDS, scn_run_t, max_duration_s, "1h", 1e-6, RUN_MAX_S,
      "duration_s auto: the longest replication (simulated time)"),
    P("seed", CFG_T_INT, scn_run_t, seed, "1", 0, 9e18, "root seed: workload, plan and calibration streams derive from it"),
    P("replications", CFG_T_INT, scn_run_t, replications, "3", 1, 1000,
      "independent replications (intervals are over them); with ci_target, the fewest"),
    P("ci_target", CFG_T_DOUBLE, scn_run_t, ci_target, "0", 0, 1,
      "replicate until the 95% interval of each headline figure (step p50 and p99, TTFT p50 and p99, tokens/s "
      "per session) is within +-ci_target of it (relative; 0: off): replications run in order, the first count "
      ">= max(replications, 2) that reaches it stops them, at most max_replications"),
    P("max_replications", CFG_T_INT, scn_run_t, max_replications, "20", 1, 1000,
      "ci_target: the most replications"),
    P("sample_calibration", CFG_T_BOOL, scn_run_t, sample_calibration, "true", 1, 0,
      "with several replications, draw fitted parameters from N(value, stderr) per replication"),
    P("jitter", CFG_T_BOOL, scn_run_t, jitter, "false", 1, 0,
      "each op's time varies as kbench measured: median its time alone t, p99 jitter_us + jitter_rel*t above (an exponential tail; jitter_copy_* for copies over the host link, jitter_gather_* for kernels reading host memory)"),
};

static const char *const probe_whats[] = {"op", "layer_step", "session_step", "prefill_chunk", NULL};

static const cfg_param_t probe_params[] = {
    E("what", scn_probe_t, what, "op", probe_whats, "a single op, one layer's step, sessions looping steps, or one session's prefill chunk (n_tokens of context, batch tokens) beside sessions - 1 looping steps"),
    P("op", CFG_T_STRING, scn_probe_t, op, "", 1, 0, "op kind (models/opkind.h)"),
    P("variant", CFG_T_STRING, scn_probe_t, variant, "", 1, 0, "kbench variant (path, method or mix)"),
    P("n_tokens", CFG_T_INT, scn_probe_t, n_tokens, "0", 0, (double)METHOD_MAX_CONTEXT_TOKENS, "context tokens"),
    P("heads", CFG_T_INT, scn_probe_t, heads, "0", 0, 1e6, "KV heads"),
    P("bits", CFG_T_INT, scn_probe_t, bits, "0", 0, 1e6, "index bits per token per KV head"),
    P("k", CFG_T_INT, scn_probe_t, k, "0", 0, 1e9, "selected tokens"),
    P("batch", CFG_T_INT, scn_probe_t, batch, "1", 1, 1e6, "batch size"),
    P("piece_bytes", CFG_T_BYTES, scn_probe_t, piece_bytes, "0", 0, 1e15, "bytes per piece of a transfer"),
    P("region_bytes", CFG_T_BYTES, scn_probe_t, region_bytes, "0", 0, 1e15, "host region a gather spreads over"),
    P("bytes", CFG_T_BYTES, scn_probe_t, bytes, "0", 0, 1e15,
      "op probes: HBM bytes of a kernel the method's plan has no op for (run alone through the cost forms)"),
    P("pieces", CFG_T_INT, scn_probe_t, pieces, "0", 0, 1e12, "pieces of a transfer"),
    P("blocks", CFG_T_INT, scn_probe_t, blocks, "0", 0, 1e9, "blocks in flight of a gather"),
    P("placement", CFG_T_STRING, scn_probe_t, placement, "host", 1, 0, "index and K/V placement"),
    P("layout", CFG_T_STRING, scn_probe_t, layout, "", 1, 0, "host layout"),
    P("sessions", CFG_T_INT, scn_probe_t, sessions, "1", 1, 1e6, "concurrent sessions"),
    P("steps", CFG_T_INT, scn_probe_t, steps, "20", 1, 1e9, "plans per session"),
    P("streams", CFG_T_INT, scn_probe_t, streams, "1", 1, 256, "streams"),
    P("zero_copy", CFG_T_BOOL, scn_probe_t, zero_copy, "false", 1, 0,
      "op probes: the kernel reads its bytes straight from pinned host memory (an SM zero-copy stream); "
      "on a step's attn_tail stage, the attention before it did, so its partials are still in L2"),
    P("stage", CFG_T_BOOL, scn_probe_t, stage, "false", 1, 0,
      "op probes: a stage timed inside a step, whose attn_tail holds the split-K combine after it"),
    P("launch_hidden", CFG_T_BOOL, scn_probe_t, launch_hidden, "false", 1, 0,
      "op probes: the host launched the ops before the timed window opened (GPU busy before it); "
      "layer_step probes: the step's first op"),
};

static const cfg_param_t class_params[] = {
    P("name", CFG_T_STRING, scn_class_t, name, NULL, 1, 0, "class name, unique: reports name each class's figures by it"),
    P("share", CFG_T_DOUBLE, scn_class_t, share, NULL, 0, 1,
      "fraction of the study's sessions (closed population: of its users), > 0; the classes' shares sum to 1. "
      "Session (or user) i joins the class furthest below its share: the largest share x (i + 1) less the "
      "sessions it has, ties to the class listed first"),
    N("method", scn_class_t, method,
      "the class's method map, replacing the scenario's (same keys; its tier and weights_dtype must equal the "
      "scenario's); absent: the scenario's method, swept as it is (a sweep of method keys leaves a class's own alone)"),
    N("workload", scn_class_t, workload, "the class's workload: only 'generator' (section classes.workload)"),
};

static const cfg_param_t class_workload_params[] = {
    N("generator", scn_class_t, generator,
      "generator workloads: keys laid over workload.generator for the class's sessions (their shape: contexts, "
      "turns, tool outputs, decodes); not the arrival keys (seed, sessions, arrival, rate_per_s, population, "
      "session_gap_s), which stay the scenario's: a class's session arrives where the scenario's would"),
};

/* The generator keys that place sessions in time: the scenario's alone, so classes split one arrival stream. */
static const char *const arrival_keys[] = {"seed", "sessions", "arrival", "rate_per_s", "population", "session_gap_s"};

static int bind_class(const cfg_node_t *n, const scn_workload_t *wl, scn_class_t *c, err_t *e)
{
    int rc = cfg_bind(n, class_params, COUNT(class_params), c, e);
    if (!rc && !(c->share > 0)) rc = cfg_error(e, ERR_INVAL, cfg_get(n, "share"), "a class's share must be above 0");
    if (!rc && c->workload) rc = cfg_bind(c->workload, class_workload_params, COUNT(class_workload_params), c, e);
    if (rc || !c->generator) return rc;
    if (wl->kind != SCN_WL_GENERATOR)
        return cfg_error(e, ERR_INVAL, c->generator, "generator overrides need a generator workload (workload.kind: generator)");
    if (cfg_kind(c->generator) != CFG_MAP) return cfg_error(e, ERR_INVAL, c->generator, "expected a map of generator keys");
    for (size_t k = 0; k < COUNT(arrival_keys); k++) {
        const cfg_node_t *at = cfg_get(c->generator, arrival_keys[k]);
        if (at) return cfg_error(e, ERR_INVAL, at, "sets the study's arrivals: give it in workload.generator, which every class shares");
    }
    return ERR_OK;
}

int scn_bind_classes(const cfg_node_t *n, const scn_workload_t *wl, scn_class_t **out, size_t *n_out, err_t *e)
{
    *out = NULL;
    *n_out = 0;
    if (!n) return ERR_OK;
    if (cfg_kind(n) != CFG_SEQ || !cfg_size(n)) return cfg_error(e, ERR_INVAL, n, "expected a list of one or more classes");
    if (wl->kind == SCN_WL_PROBE) return cfg_error(e, ERR_INVAL, n, "classes need a generator or trace workload, not a probe");
    if (cfg_size(n) > SCN_MAX_CLASSES) return cfg_error(e, ERR_INVAL, n, "%zu classes: at most %d", cfg_size(n), SCN_MAX_CLASSES);
    scn_class_t *cs = calloc(cfg_size(n), sizeof *cs);
    if (!cs) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = ERR_OK;
    double sum = 0;
    for (size_t i = 0; !rc && i < cfg_size(n); i++) {
        rc = bind_class(cfg_at(n, i), wl, &cs[i], e);
        for (size_t j = 0; !rc && j < i; j++)
            if (!strcmp(cs[j].name, cs[i].name))
                rc = cfg_error(e, ERR_INVAL, cfg_get(cfg_at(n, i), "name"), "duplicate class name '%s'", cs[i].name);
        sum += cs[i].share;
    }
    if (!rc && fabs(sum - 1) > 1e-9) rc = cfg_error(e, ERR_INVAL, n, "the classes' shares sum to %.9g, not 1", sum);
    if (rc) {
        free(cs);
        return rc;
    }
    *out = cs;
    *n_out = cfg_size(n);
    return ERR_OK;
}

/* Scenario keys that were renamed: using one is an error that names the replacement. */
static const struct {
    const char *path, *instead;
} removed_keys[] = {
    {"method.scan_kernel", "plane_scan (v3 = coalesced, v1 = token_per_thread, v2 = two_per_thread)"},
    {"method.keys", "key_variances (a list of head_dim per-channel variances; kbench writes its keys' as the CSV header's key_sigma2)"},
};

int scn_bind_top(const cfg_node_t *root, scn_top_t *out, err_t *e)
{
    for (size_t i = 0; root && i < COUNT(removed_keys); i++) {
        const cfg_node_t *old = cfg_path(root, removed_keys[i].path);
        if (old) return cfg_error(e, ERR_INVAL, old, "removed: use %s", removed_keys[i].instead);
    }
    return cfg_bind(root, top_params, COUNT(top_params), out, e);
}
int scn_bind_model(const cfg_node_t *n, scn_model_t *out, err_t *e)
{
    return cfg_bind(n, model_params, COUNT(model_params), out, e);
}
int scn_bind_serving(const cfg_node_t *n, scn_serving_t *out, err_t *e)
{
    return cfg_bind(n, serving_params, COUNT(serving_params), out, e);
}
int scn_bind_workload(const cfg_node_t *n, scn_workload_t *out, err_t *e)
{
    int rc = cfg_bind(n, workload_params, COUNT(workload_params), out, e);
    if (rc) return rc;
    if (out->kind == SCN_WL_TRACE && !*out->trace && !*out->import_file)
        return n ? cfg_error(e, ERR_INVAL, n, "a trace workload needs 'trace' or 'import_file'")
                 : err_set(e, ERR_INVAL, "workload: a trace workload needs 'trace' or 'import_file'");
    if (out->kind == SCN_WL_PROBE && !out->probe)
        return cfg_error(e, ERR_INVAL, n, "a probe workload needs a 'probe' section");
    return ERR_OK;
}
int scn_bind_slo(const cfg_node_t *n, scn_slo_t *out, err_t *e)
{
    return cfg_bind(n, slo_params, COUNT(slo_params), out, e);
}
int scn_bind_run(const cfg_node_t *n, scn_run_t *out, err_t *e)
{
    int rc = cfg_bind(n, run_params, COUNT(run_params), out, e);
    if (rc) return rc;
    /* auto: the run may last up to its cap, which every use of the duration (arrivals kept, samplers)
     * then takes as the run's length */
    out->duration_auto = isnan(out->duration_s);
    out->warmup_auto = isnan(out->warmup_s);
    if (out->duration_auto) out->duration_s = out->max_duration_s;
    /* a fixed duration opts out of the steady-state rule, whose part the auto warm-up is */
    if (out->warmup_auto) out->warmup_s = 0;
    out->warmup_auto = out->warmup_auto && out->duration_auto;
    /* a warm-up as long as the run leaves nothing to measure (it once became 0 silently) */
    if (out->warmup_s > 0 && out->warmup_s >= out->duration_s)
        return cfg_error(e, ERR_INVAL, cfg_get(n, "warmup_s"), "warmup_s %g s is not below run.%s %g s",
                         out->warmup_s, out->duration_auto ? "max_duration_s" : "duration_s", out->duration_s);
    if (out->ci_target > 0 && out->max_replications < out->replications)
        return cfg_error(e, ERR_INVAL, cfg_get(n, "max_replications"), "max_replications %lld is below run.replications %lld",
                         (long long)out->max_replications, (long long)out->replications);
    return ERR_OK;
}
int scn_bind_probe(const cfg_node_t *n, scn_probe_t *out, err_t *e)
{
    return cfg_bind(n, probe_params, COUNT(probe_params), out, e);
}

void scn_describe(FILE *fp)
{
    cfg_params_describe(fp, "scenario (top level)", top_params, COUNT(top_params));
    cfg_params_describe(fp, "model", model_params, COUNT(model_params));
    cfg_params_describe(fp, "serving", serving_params, COUNT(serving_params));
    cfg_params_describe(fp, "workload", workload_params, COUNT(workload_params));
    cfg_params_describe(fp, "workload.probe", probe_params, COUNT(probe_params));
    cfg_params_describe(fp, "slo", slo_params, COUNT(slo_params));
    cfg_params_describe(fp, "run", run_params, COUNT(run_params));
    cfg_params_describe(fp, "classes (each entry)", class_params, COUNT(class_params));
    cfg_params_describe(fp, "classes.workload", class_workload_params, COUNT(class_workload_params));
}
