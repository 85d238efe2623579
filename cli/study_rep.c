/* One replication of a sweep point: machine, calibration, workload and providers, then the run. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study_class.h"
#include "cli/study_int.h"
#include "models/hwinst.h"
#include "models/opkind.h"
#include "models/platform.h"
#include "models/provider.h"
#include "validation/protocol.h"
#include "common/atomicio.h"
#include <jansson.h>
#include "traces/import.h"
#include "traces/trace_io.h"
#include "traces/tracegen.h"

#define CTX_SAMPLES 4096
#define UTIL_INTERVALS 200
#define UTIL_AUTO_FINER 64      /* duration auto: first sampling intervals, this much finer than the cap's */

/* SplitMix64: independent, reproducible seeds from (root seed, replication, stream). */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t study_seed(const study_point_t *pt, uint32_t k, int stream)
{
    /* 31 bits: every consumer (GSL's mt19937 seeding, YAML seeds) accepts them. */
    return mix64(mix64((uint64_t)pt->run.seed ^ ((uint64_t)stream << 56)) + k) & 0x7fffffffu;
}

/* ---- calibration: loaded, seeded from the presets, and sampled per replication -------------- */

/* Copies the resolved hardware value of every key of the map `keys` into the profile: what a
 * scenario changes on purpose (hardware.set) wins over what was fitted on another machine. */
static int calib_take(calib_t *cal, const hw_t *hw, const cfg_node_t *keys, err_t *e)
{
    for (size_t i = 0; i < cfg_size(keys); i++) {
        const char *key = cfg_key_at(keys, i);
        const hw_param_t *hp = hw_param(hw, key);
        if (!hp || hwcat_param_is_text(key)) continue;
        calib_param_t p = {.name = key, .value = hp->value, .stderr_v = hp->stderr_v, .lo = hp->lo, .hi = hp->hi,
                           .unit = hwcat_param_unit(key), .origin = hp->origin};
        int rc = calib_set(cal, &p, e);
        if (rc) return rc;
    }
    return ERR_OK;
}

int study_calib_load(study_t *s, const study_point_t *pt, calib_t **out, err_t *e)
{
    *out = NULL;
    int rc = pt->calib_path ? calib_load(pt->calib_path, out, e) : calib_new(out, e);
    /* the profile carried to the study's box, GPU and link by the platform rules */
    if (!rc) rc = platform_apply(*out, s->hwcat, &pt->hw, e);
    const cfg_node_t *set = cfg_get(pt->top.hardware, "set");
    if (!rc && set && cfg_kind(set) == CFG_MAP) rc = calib_take(*out, &pt->hw, set, e);
    if (!rc) rc = calib_seed(*out, &pt->hw, e);
    if (rc) {
        calib_free(*out);
        *out = NULL;
        return rc;
    }
    s->calib_hash = calib_hash(*out);
    return ERR_OK;
}

static int calib_prepare(study_t *s, const study_point_t *pt, uint32_t k, uint32_t reps, calib_t **out, err_t *e)
{
    int rc = study_calib_load(s, pt, out, e);
    if (rc) return rc;
    if (reps < 2 || !pt->run.sample_calibration) return ERR_OK;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng) return err_set(e, ERR_NOMEM, "out of memory");
    gsl_rng_set(rng, (unsigned long)study_seed(pt, k, STUDY_STREAM_CALIB));
    for (size_t i = 0; !rc && i < calib_count(*out); i++) {
        calib_param_t p = *calib_at(*out, i);
        if (!(p.stderr_v > 0)) continue;
        double v = p.value + gsl_ran_gaussian(rng, p.stderr_v);
        if (v <= 0 && p.value > 0) v = p.value * 1e-3; /* a draw far in the tail: keep it positive */
        p.value = v;
        rc = calib_set(*out, &p, e);
    }
    gsl_rng_free(rng);
    return rc;
}

/* ---- plot samples --------------------------------------------------------------------------- */

static void on_plan(void *arg, uint64_t session, plan_phase_t phase, uint64_t ctx, double latency_s)
{
    (void)session;
    study_rep_t *rep = arg;
    if (phase != PLAN_DECODE || !rep->ctx_tokens) return;
    uint64_t stride = 1;
    while (rep->ctx_seen >= stride * CTX_SAMPLES) stride *= 2;
    if (rep->ctx_seen++ % stride) return;
    if (rep->n_ctx == CTX_SAMPLES) { /* halve, keeping every other sample */
        for (size_t i = 0; i < CTX_SAMPLES / 2; i++) {
            rep->ctx_tokens[i] = rep->ctx_tokens[2 * i];
            rep->ctx_step_s[i] = rep->ctx_step_s[2 * i];
        }
        rep->n_ctx = CTX_SAMPLES / 2;
    }
    rep->ctx_tokens[rep->n_ctx] = (double)ctx;
    rep->ctx_step_s[rep->n_ctx++] = latency_s;
}

/* s seconds as engine time, rounded down as the study always rounded its own times; SIM_TIME_NEVER
 * when the clock cannot hold it. */
static sim_ps_t down_ps(double s)
{
    sim_ps_t t;
    return sim_ps_of_s(s, SIM_ROUND_DOWN, &t) ? t : SIM_TIME_NEVER;
}

static void util_tick(sim_t *sim, void *arg)
{
    study_rep_t *rep = arg;
    double t = (double)sim_now(sim) / (double)SIM_PS_PER_S;
    if (rep->n_util < rep->cap_util) {
        double *row = rep->util + rep->n_util * rep->n_res;
        for (size_t r = 0; r < rep->n_res; r++) {
            double w = sim_res_work(sim, (sim_res_t)r);
            row[r] = (w - rep->last_work[r]) / (sim_res_capacity(sim, (sim_res_t)r) * rep->util_dt_s);
            rep->last_work[r] = w;
        }
        rep->util_t_s[rep->n_util++] = t;
    }
    if (rep->n_util == rep->cap_util && rep->run && rep->run->duration_auto) {
        /* a run of unknown length: every two intervals become one twice as long, so the samples
         * always cover the run so far */
        for (size_t i = 0; i < rep->cap_util / 2; i++) {
            for (size_t r = 0; r < rep->n_res; r++)
                rep->util[i * rep->n_res + r] = (rep->util[2 * i * rep->n_res + r] + rep->util[(2 * i + 1) * rep->n_res + r]) / 2;
            rep->util_t_s[i] = rep->util_t_s[2 * i + 1];
        }
        rep->n_util = rep->cap_util / 2;
        rep->util_dt_s *= 2;
    }
    err_t e;
    if (rep->n_util < rep->cap_util) sim_at(sim, sim_ps_add(sim_now(sim), down_ps(rep->util_dt_s)), util_tick, rep, &e);
}

typedef struct progress {
    double duration_s;
    struct timespec t0;
    uint32_t k, reps;
    bool shown;
} progress_t;

/* Redraws the bar once the run has taken over a second of wall time. */
static void progress_tick(sim_t *sim, void *arg)
{
    progress_t *p = arg;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double wall = (double)(now.tv_sec - p->t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - p->t0.tv_nsec);
    double t = (double)sim_now(sim) / (double)SIM_PS_PER_S, frac = t / p->duration_s;
    if (wall > 1.0) {
        int w = (int)(frac * 40);
        fprintf(stderr, "\r  replication %u/%u [%-40.*s] %3.0f%% (%.1f s simulated, %.1f s wall)", p->k + 1, p->reps, w,
                "########################################", 100 * frac, t, wall);
        p->shown = true;
    }
    err_t e;
    if (frac < 0.995) sim_at(sim, sim_ps_add(sim_now(sim), down_ps(p->duration_s / 100)), progress_tick, p, &e);
}

void study_rep_window_start(study_rep_t *rep)
{
    const exec_stats_t *st = exec_stats(rep->x);
    rep->tokens_at_warmup = st->decode_tokens;
    rep->turns_at_warmup = st->turns_all;
    if (rep->classes) study_classes_warmup(rep->classes, rep->x);
    exec_stats_window_start(rep->x);   /* every statistic, not only throughput, excludes the warm-up */
    rep->warmed = true;
}

static void warmup_tick(sim_t *sim, void *arg)
{
    (void)sim;
    study_rep_window_start(arg);
}

static int samplers_start(study_rep_t *rep, double duration_s, err_t *e)
{
    rep->n_res = sim_res_count(rep->sim);
    rep->cap_util = UTIL_INTERVALS;
    /* auto: the run may stop far below its cap; the samples start fine and coarsen as it goes */
    rep->util_dt_s = duration_s / UTIL_INTERVALS / (rep->run->duration_auto ? UTIL_AUTO_FINER : 1);
    rep->ctx_tokens = malloc(CTX_SAMPLES * sizeof *rep->ctx_tokens);
    rep->ctx_step_s = malloc(CTX_SAMPLES * sizeof *rep->ctx_step_s);
    rep->util_t_s = malloc(UTIL_INTERVALS * sizeof *rep->util_t_s);
    rep->util = calloc(UTIL_INTERVALS * (rep->n_res ? rep->n_res : 1), sizeof *rep->util);
    rep->last_work = calloc(rep->n_res ? rep->n_res : 1, sizeof *rep->last_work);
    if (!rep->ctx_tokens || !rep->ctx_step_s || !rep->util_t_s || !rep->util || !rep->last_work)
        return err_set(e, ERR_NOMEM, "out of memory");
    int rc = sim_at(rep->sim, down_ps(rep->util_dt_s), util_tick, rep, e);
    if (!rc && rep->warmup_s > 0) rc = sim_at(rep->sim, down_ps(rep->warmup_s), warmup_tick, rep, e);
    return rc;
}

/* ---- the machine ------------------------------------------------------------------------------ */

/* Weights are resident in every GPU's HBM before any session: a model that does not fit is an
 * infeasible configuration, reported with its numbers. */
static int weights_place(const study_point_t *pt, sim_t *sim, err_t *e)
{
    llm_dtype_t wt = (llm_dtype_t)pt->mcfg.weight_dtype;
    double w = llm_weight_bytes(&pt->llm, wt);
    for (int g = 0; g < pt->hw.gpus; g++) {
        char name[64];
        snprintf(name, sizeof name, "gpu%d.hbm_mem", g);
        sim_pool_t p = sim_pool_find(sim, name);
        if (p < 0) continue;
        if (sim_pool_alloc(sim, p, w, e) == ERR_CAPACITY)
            return err_set(e, ERR_INFEASIBLE, "%s weights (%s) take %.2f GB; GPU %d (%s) has %.2f GB of HBM for data",
                           pt->llm.name, llm_dtype_names[wt], w / 1e9, g, pt->hw.gpu,
                           sim_pool_capacity(sim, p) / 1e9);
    }
    return ERR_OK;
}

/* Notes the engine's own calibration parameters that shape this run's predictions: the jitter, and
 * the time slicing of several processes (a probe knows how many contexts share the GPU; the fit
 * measured 2 and 3). */
static void note_engine_params(const study_point_t *pt, study_rep_t *rep)
{
    if (pt->run.jitter) {
        calib_note(rep->cal, "jitter_us", NAN);
        calib_note(rep->cal, "jitter_rel", NAN);
        calib_note(rep->cal, "jitter_copy_us", NAN);
        calib_note(rep->cal, "jitter_copy_rel", NAN);
        calib_note(rep->cal, "jitter_gather_us", NAN);
        calib_note(rep->cal, "jitter_gather_rel", NAN);
        calib_note(rep->cal, "ce_handoff_spread_us", NAN);
    }
    double contexts = pt->wl.kind == SCN_WL_PROBE ? (double)pt->probe.sessions : NAN;
    if (pt->serving.mode == EXEC_PROCESSES && !(contexts < 2)) {
        calib_note(rep->cal, "timeslice_us", contexts);
        calib_note(rep->cal, "ctx_switch_us", contexts);
        calib_note(rep->cal, "ctx_switch_idle_us", NAN);
    }
}

static int exec_make(const study_point_t *pt, uint32_t k, study_rep_t *rep, sim_pool_t *hbm_pools, uint32_t timeline_plans,
                     err_t *e)
{
    for (int g = 0; g < pt->hw.gpus; g++) {
        char name[64];
        snprintf(name, sizeof name, "gpu%d.hbm_mem", g);
        hbm_pools[g] = sim_pool_find(rep->sim, name);
    }
    exec_config_t cfg = {
        .mode = (exec_mode_t)pt->serving.mode, .cuda_graphs = pt->serving.cuda_graphs, .coarse = pt->serving.coarse,
        .coarse_reuse = pt->serving.coarse_reuse,
        .admission = (exec_admit_t)pt->serving.admission, .n_gpus = pt->hw.gpus,
        .max_batch = (uint32_t)pt->serving.max_batch, .prefill_chunk = (uint32_t)pt->serving.prefill_chunk,
        .graph_launch_ps = down_ps(rep->cost.graph_launch_s),
        .hw_queues = (uint32_t)pt->serving.hw_queues, .one_stream = pt->serving.session_streams == SCN_STREAMS_ONE,
        .gathers_exclusive = pt->serving.gathers_exclusive,
        .latency_from_queue = pt->serving.latency_from == SCN_LATENCY_DEVICE,
        .timeslice_ps = down_ps(rep->cost.timeslice_s),
        .ctx_switch_ps = down_ps(rep->cost.ctx_switch_s),
        .ctx_switch_idle_ps = down_ps(rep->cost.ctx_switch_idle_s),
        .copy_handoff_ps = cost_ps(rep->cost.ce_handoff_s),
        .copy_handoff_spread_ps = pt->run.jitter ? cost_ps(rep->cost.ce_handoff_spread_s) : 0,
        .jitter_abs_s = pt->run.jitter ? rep->cost.jitter_s : 0, .jitter_rel = pt->run.jitter ? rep->cost.jitter_rel : 0,
        .jitter_copy_abs_s = pt->run.jitter ? rep->cost.jitter_copy_s : 0,
        .jitter_copy_rel = pt->run.jitter ? rep->cost.jitter_copy_rel : 0,
        .jitter_gather_abs_s = pt->run.jitter ? rep->cost.jitter_gather_s : 0,
        .jitter_gather_rel = pt->run.jitter ? rep->cost.jitter_gather_rel : 0,
        .jitter_seed = study_seed(pt, k, STUDY_STREAM_JITTER),
        .hbm_pool = hbm_pools,
        /* host-side data: on the tier when the method puts it there, else in DRAM spilling into the
         * box's tier (its reads still cross host.dram: the path follows method.tier) */
        .host_pool = sim_pool_find(rep->sim, pt->mcfg.tier == TIER_CXL ? "cxl.mem" : "host.dram_mem"),
        .host_spill = pt->mcfg.tier != TIER_CXL && pt->hw.tier, .host_spill_pool = sim_pool_find(rep->sim, "cxl.mem"),
        .slo_ttft_s = pt->slo.ttft_s, .slo_turn_tps = pt->slo.tokens_per_s, .on_plan = on_plan, .on_plan_arg = rep,
        .timeline_plans = timeline_plans, .n_groups = (uint32_t)pt->n_classes};
    return exec_new(rep->sim, &cfg, &rep->x, e);
}

/* ---- sessions -------------------------------------------------------------------------------- */

typedef struct feed {
    study_t *s;
    const study_point_t *pt;
    study_rep_t *rep;
    uint32_t k;
    uint64_t next_id;
    const study_opts_t *opts;
} feed_t;

/* Session index's GPU: spread_uplinks takes the switch uplinks in turn (GPU j of each uplink on
 * the j-th round), so four sessions on an 8-GPU box with two GPUs per uplink use all four uplinks;
 * pack fills GPUs in order; round_robin goes GPU by GPU. */
static int gpu_of(const feed_t *f, uint64_t index, uint64_t total)
{
    int gpus = f->pt->hw.gpus, per = f->pt->hw.gpus_per_switch > 1 ? f->pt->hw.gpus_per_switch : 1;
    if (f->pt->serving.placement == SCN_PLACE_PACK && total > 0) {
        uint64_t per_gpu = (total + (uint64_t)gpus - 1) / (uint64_t)gpus;
        return (int)(index / per_gpu);
    }
    if (f->pt->serving.placement == SCN_PLACE_SPREAD_UPLINKS && per > 1) {
        uint64_t uplinks = (uint64_t)(gpus + per - 1) / (uint64_t)per;
        uint64_t g = (index % uplinks) * (uint64_t)per + (index / uplinks) % (uint64_t)per;
        if (g < (uint64_t)gpus) return (int)g;
    }
    return (int)(index % (uint64_t)gpus);
}

/* Method mt's provider, or a probe's: one op per plan, or layer steps without the LM head
 * (session steps are whole decode steps). */
static int make_provider(feed_t *f, const method_t *mt, plan_provider_t *out, err_t *e)
{
    const study_point_t *pt = f->pt;
    if (pt->wl.kind == SCN_WL_PROBE && pt->probe.what == SCN_PROBE_OP)
        return study_probe_provider(pt, mt, f->rep->cal, out, e);
    if (pt->wl.kind == SCN_WL_PROBE && pt->probe.what == SCN_PROBE_LAYER_STEP) {
        /* kbench's layer step: the layers alone */
        protocol_t how = {.layers_only = true, .first_launch_hidden = pt->probe.launch_hidden};
        protocol_prov_t *pp;
        int rc = protocol_new(mt, &pt->hw, f->rep->cal, &how, &pp, e);
        if (!rc) *out = protocol_wrap(pp);
        return rc;
    }
    const uplan_t *u = mt == f->rep->method ? pt->uplan : NULL;   /* a class's own method has none */
    if (u && u->whole) return uplan_provider(u, uplan_layers(u, pt->llm.layers), &pt->hw, &f->rep->cost, (plan_provider_t){0}, out, e);
    provider_t *p;
    int rc = provider_new_costed(mt, &pt->hw, &f->rep->cost, &p, e);
    if (rc) return rc;
    *out = provider_wrap(p);
    if (!u) return ERR_OK;
    rc = uplan_provider(u, pt->llm.layers, &pt->hw, &f->rep->cost, *out, out, e);
    if (rc) out->ops->destroy(out->self, NULL);
    return rc;
}

/* A user plan's edits each match an op of the method's plan at the plan's context. */
static int check_edits(const study_point_t *pt, study_rep_t *rep, err_t *e)
{
    if (!pt->uplan || pt->uplan->whole) return ERR_OK;
    provider_t *p;
    int rc = provider_new_costed(rep->method, &pt->hw, &rep->cost, &p, e);
    if (!rc) rc = uplan_check_edits(pt->uplan, p, rep->sim, &pt->hw, e);
    provider_free(p);
    return rc;
}

/* Adds the session at placement index `index` (its class's, with classes) on GPU gpu. */
static int add_session(feed_t *f, uint64_t index, int gpu, double arrival_s, uint64_t ctx0, uint64_t final_tokens,
                       bool open_loop, const exec_turn_t *turns, size_t n_turns, err_t *e)
{
    uint64_t id = f->next_id++;
    uint32_t cls = 0;
    int rc = f->rep->classes ? study_classes_of(f->rep->classes, index, &cls, e) : ERR_OK;
    const method_t *mt = f->rep->classes ? study_classes_method(f->rep->classes, cls) : f->rep->method;
    plan_provider_t prov;
    if (!rc) rc = make_provider(f, mt, &prov, e);
    if (rc) return rc;
    exec_session_spec_t spec = {.id = id, .gpu = gpu, .arrival_s = arrival_s, .context_tokens = ctx0,
                                .final_tokens = final_tokens, .open_loop = open_loop, .turns = turns,
                                .n_turns = n_turns, .provider = prov, .group = cls};
    if (f->rep->classes) study_classes_count(f->rep->classes, cls);
    f->rep->sessions++;
    f->rep->gpu_sessions[gpu]++;
    return exec_add_session(f->rep->x, &spec, e);
}

/* Appends a trace session's turns to *turns; returns its starting context and final size. */
static int turns_of(const trace_session_t *ts, bool restart, exec_turn_t **turns, size_t *n, size_t *cap,
                    uint64_t *ctx0, uint64_t *final_tokens, err_t *e)
{
    if (*n + ts->n_turns > *cap) {
        size_t nc = (*n + ts->n_turns) * 2;
        exec_turn_t *nt = realloc(*turns, nc * sizeof *nt);
        if (!nt) return err_set(e, ERR_NOMEM, "out of memory");
        *turns = nt;
        *cap = nc;
    }
    *ctx0 = ts->turns[0].input_tokens - ts->turns[0].prefill_tokens;
    for (size_t i = 0; i < ts->n_turns; i++) {
        const trace_turn_t *t = &ts->turns[i];
        exec_turn_t *x = &(*turns)[(*n)++];
        *x = (exec_turn_t){.restart = restart && i == 0, .context_tokens = *ctx0,
                           .think_s = t->think_ns > 0 ? (double)t->think_ns * 1e-9 : 0,
                           .arrival_s = t->arrival_ns >= 0 ? (double)t->arrival_ns * 1e-9 : -1,
                           .prefill_tokens = (uint32_t)t->prefill_tokens,
                           .decode_tokens = t->decode_tokens ? (uint32_t)t->decode_tokens : 1};
        if (t->input_tokens + t->decode_tokens > *final_tokens) *final_tokens = t->input_tokens + t->decode_tokens;
    }
    return ERR_OK;
}

static double session_arrival_s(const trace_session_t *ts)
{
    if (ts->arrival_ns >= 0) return (double)ts->arrival_ns * 1e-9;
    if (ts->turns[0].arrival_ns >= 0) return (double)ts->turns[0].arrival_ns * 1e-9;
    if (ts->start_think_ns > 0) return (double)ts->start_think_ns * 1e-9;
    return 0;
}

/* Each session of t becomes one simulated session (open arrivals, traces). */
static int feed_sessions(feed_t *f, trace_t *t, bool open_loop, err_t *e)
{
    exec_turn_t *turns = NULL;
    size_t cap = 0;
    int rc = ERR_OK;
    uint64_t total = t->n_sessions;
    for (size_t i = 0; !rc && i < t->n_sessions; i++) {
        const trace_session_t *ts = &t->sessions[i];
        double at = session_arrival_s(ts);
        if (at > f->pt->run.duration_s || !ts->n_turns) continue;
        size_t n = 0;
        uint64_t ctx0 = 0, fin = 0;
        rc = turns_of(ts, false, &turns, &n, &cap, &ctx0, &fin, e);
        if (!rc) rc = add_session(f, i, gpu_of(f, i, total), at, ctx0, fin, open_loop, turns, n, e);
    }
    free(turns);
    return rc;
}

/* A closed population: each user's sessions run back to back as one simulated session whose
 * context restarts at each new session. */
static int feed_users(feed_t *f, trace_t *t, uint32_t population, err_t *e)
{
    int rc = ERR_OK;
    for (uint32_t u = 0; !rc && u < population; u++) {
        exec_turn_t *turns = NULL;
        size_t n = 0, cap = 0;
        uint64_t ctx_first = 0, fin = 0;
        double at = -1;
        for (size_t i = 0; !rc && i < t->n_sessions; i++) {
            const trace_session_t *ts = &t->sessions[i];
            if (ts->user != (int64_t)u || !ts->n_turns) continue;
            uint64_t ctx0 = 0;
            rc = turns_of(ts, n > 0, &turns, &n, &cap, &ctx0, &fin, e);
            if (at < 0) { /* every user is busy from the start */
                at = ts->arrival_ns >= 0 ? (double)ts->arrival_ns * 1e-9 : 0;
                ctx_first = ctx0;
            } else if (!rc) {
                turns[n - ts->n_turns].think_s = ts->start_think_ns > 0 ? (double)ts->start_think_ns * 1e-9 : 0;
            }
        }
        if (!rc && n) rc = add_session(f, u, gpu_of(f, u, population), at, ctx_first, fin, false, turns, n, e);
        free(turns);
    }
    return rc;
}

static int load_trace(feed_t *f, trace_t *t, err_t *e)
{
    const scn_workload_t *wl = &f->pt->wl;
    int rc;
    if (*wl->import_file) {
        trace_format_t fmt;
        trace_import_opts_t o;
        trace_import_opts_default(&o);
        char *path = study_path(f->s, wl->import_file);
        rc = path ? trace_format_parse(wl->import_format, &fmt, e) : err_set(e, ERR_NOMEM, "out of memory");
        if (!rc) rc = trace_import_file(fmt, path, &o, t, e);
        free(path);
    } else {
        char *path = study_path(f->s, wl->trace);
        trace_reader_t *r = NULL;
        rc = path ? trace_reader_open(path, &r, e) : err_set(e, ERR_NOMEM, "out of memory");
        free(path);
        if (!rc) {
            const trace_header_t *h = trace_reader_header(r);
            rc = trace_header_init(&t->hdr, h->source, h->made_by, e);
            t->hdr.open_loop = h->open_loop;
            t->hdr.closed_loop = h->closed_loop;
            t->hdr.session_arrivals = h->session_arrivals;
            t->hdr.population = h->population;
        }
        while (!rc) {
            trace_session_t *ts;
            if ((rc = trace_add_session(t, &ts, e))) break;
            int got = trace_reader_next_session(r, ts, e);
            if (got <= 0) {
                t->n_sessions--;
                trace_session_free(&t->sessions[t->n_sessions]);
                rc = got;
                break;
            }
            if (wl->max_sessions && t->n_sessions >= (size_t)wl->max_sessions) break;
        }
        trace_reader_close(r);
    }
    if (!rc && (wl->scale > 1 || wl->scale_to > 0)) rc = trace_scale(t, wl->scale, (uint64_t)wl->scale_to, e);
    return rc;
}

/* A trace file whose sessions arrive in order, replayed as it is read: each session is read when the
 * one before it arrives, so the run holds the sessions it has admitted, never the whole file. A
 * corrupt frame is an error when the run reaches it; what follows the run's last arrival is not read. */
struct study_stream {
    feed_t f;
    trace_reader_t *r;
    trace_session_t ts;      /* the next session to arrive */
    uint64_t index;          /* its position in the file */
    exec_turn_t *turns;
    size_t cap;
};

void study_stream_free(study_stream_t *st)
{
    if (!st) return;
    trace_reader_close(st->r);
    trace_session_free(&st->ts);
    free(st->turns);
    free(st);
}

static void stream_arrive(sim_t *sim, void *arg);

/* Reads the next session to arrive within the run and schedules its arrival; at the file's end, or
 * past the run or max_sessions, closes the reader. */
static int stream_next(study_stream_t *st, err_t *e)
{
    const scn_workload_t *wl = &st->f.pt->wl;
    int got = wl->max_sessions && st->index >= (uint64_t)wl->max_sessions ? 0 : trace_reader_next_session(st->r, &st->ts, e);
    sim_ps_t at = got == 1 ? sim_ps_or_never(session_arrival_s(&st->ts)) : SIM_TIME_NEVER;
    if (got == 1 && session_arrival_s(&st->ts) <= st->f.pt->run.duration_s && at != SIM_TIME_NEVER)
        return sim_at(st->f.rep->sim, at, stream_arrive, st, e);
    trace_reader_close(st->r);
    st->r = NULL;
    return got < 0 ? got : ERR_OK;
}

static void stream_arrive(sim_t *sim, void *arg)
{
    study_stream_t *st = arg;
    err_t e;
    size_t n = 0;
    uint64_t ctx0 = 0, fin = 0;
    int rc = ERR_OK;
    if (st->ts.n_turns) {
        rc = turns_of(&st->ts, false, &st->turns, &n, &st->cap, &ctx0, &fin, &e);
        if (!rc) rc = add_session(&st->f, st->index, gpu_of(&st->f, st->index, 0), session_arrival_s(&st->ts), ctx0, fin,
                                  st->f.pt->wl.replay == SCN_REPLAY_OPEN, st->turns, n, &e);
    }
    st->index++;
    if (!rc) rc = stream_next(st, &e);
    if (rc) sim_fail(sim, &e);
}

/* Streams the file when nothing needs it whole: sessions in arrival order (open arrivals), no
 * context scaling (its factor needs the largest context) and no packed placement (its split needs
 * the count). 0: not streamed (*done false); else the stream lives in f->rep. */
static int feed_stream(feed_t *f, bool *done, err_t *e)
{
    const scn_workload_t *wl = &f->pt->wl;
    *done = false;
    if (*wl->import_file || wl->scale > 1 || wl->scale_to > 0 || f->pt->serving.placement == SCN_PLACE_PACK) return ERR_OK;
    char *path = study_path(f->s, wl->trace);
    trace_reader_t *r = NULL;
    int rc = path ? trace_reader_open(path, &r, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(path);
    if (rc) return rc;
    const trace_header_t *h = trace_reader_header(r);
    bool open = wl->replay == SCN_REPLAY_OPEN;
    if (h->session_arrivals != TRACE_ARRIVALS_OPEN || (open && !h->open_loop) || (!open && !h->closed_loop)) {
        trace_reader_close(r); /* the whole-file path takes it, or says why it cannot */
        return ERR_OK;
    }
    study_stream_t *st = calloc(1, sizeof *st);
    if (!st) {
        trace_reader_close(r);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    *st = (study_stream_t){.f = *f, .r = r};
    trace_session_init(&st->ts);
    f->rep->stream = st;
    *done = true;
    return stream_next(st, e);
}

static int feed_trace(feed_t *f, err_t *e)
{
    bool streamed;
    int rc0 = feed_stream(f, &streamed, e);
    if (rc0 || streamed) return rc0;
    trace_t t;
    trace_init(&t);
    int rc = load_trace(f, &t, e);
    bool open = f->pt->wl.replay == SCN_REPLAY_OPEN;
    if (!rc && open && !t.hdr.open_loop) rc = err_set(e, ERR_INVAL, "workload.replay: open, but the trace (%s) records no arrival times: replay it closed", t.hdr.source ? t.hdr.source : "?");
    if (!rc && !open && !t.hdr.closed_loop) rc = err_set(e, ERR_INVAL, "workload.replay: closed, but the trace (%s) records no think times: replay it open", t.hdr.source ? t.hdr.source : "?");
    if (!rc && f->pt->wl.max_sessions && t.n_sessions > (size_t)f->pt->wl.max_sessions) t.n_sessions = (size_t)f->pt->wl.max_sessions;
    if (!rc) rc = feed_sessions(f, &t, open, e);
    trace_free(&t);
    return rc;
}

static int feed_generator(feed_t *f, err_t *e)
{
    tracegen_t *g;
    uint64_t seed = study_seed(f->pt, f->k, STUDY_STREAM_WORKLOAD);
    int rc = tracegen_new(f->pt->wl.generator, &seed, &g, e);
    if (rc) return rc;
    const trace_header_t *h = tracegen_header(g);
    bool closed = h->session_arrivals == TRACE_ARRIVALS_CLOSED;
    uint32_t pop = f->opts && f->opts->sessions ? f->opts->sessions : h->population;
    uint64_t want = closed ? (uint64_t)pop * (uint64_t)f->pt->wl.sessions_per_user : UINT64_MAX;
    uint64_t cap = tracegen_sessions_max(g);
    if (closed && cap && want > cap) { /* the cap once silently ran fewer users than the population */
        const cfg_node_t *gen = f->pt->wl.generator, *at = gen ? cfg_get(gen, "sessions") : NULL;
        if (gen && !at) at = cfg_get(gen, "population");
        char msg[256];
        snprintf(msg, sizeof msg, "population %u%s x workload.sessions_per_user %llu need %llu sessions, but "
                 "workload.generator.sessions draws at most %llu: raise it (0: unbounded)", pop,
                 f->opts && f->opts->sessions ? " (the capacity search's)" : "",
                 (unsigned long long)f->pt->wl.sessions_per_user, (unsigned long long)want, (unsigned long long)cap);
        rc = at || gen ? cfg_error(e, ERR_INVAL, at ? at : gen, "%s", msg) : err_set(e, ERR_INVAL, "%s", msg);
        tracegen_free(g);
        return rc;
    }
    trace_t t;
    trace_init(&t);
    while (!rc && t.n_sessions < want) {
        trace_session_t *ts;
        if ((rc = trace_add_session(&t, &ts, e))) break;
        int got = tracegen_next_session(g, ts, e);
        if (got <= 0 || (!closed && session_arrival_s(ts) > f->pt->run.duration_s)) {
            t.n_sessions--;
            trace_session_free(&t.sessions[t.n_sessions]);
            rc = got < 0 ? got : ERR_OK;
            break;
        }
        if (closed) ts->user = (int64_t)((t.n_sessions - 1) % pop);
        /* a class's own session shape, in the scenario's session's place (placed by user or by order) */
        if (f->rep->classes)
            rc = study_classes_reshape(f->rep->classes, closed ? (uint64_t)ts->user : t.n_sessions - 1, ts, e);
        if (f->pt->wl.max_sessions && t.n_sessions >= (size_t)f->pt->wl.max_sessions) break;
    }
    if (!rc) rc = closed ? feed_users(f, &t, pop, e) : feed_sessions(f, &t, false, e);
    trace_free(&t);
    tracegen_free(g);
    return rc;
}

/* A measured case: N sessions each decoding `steps` tokens at a fixed context; a prefill_chunk probe's
 * first session instead prefills `batch` tokens after its context (one chunk, its first token) beside
 * the others' steps. */
static int feed_probe(feed_t *f, err_t *e)
{
    const scn_probe_t *p = &f->pt->probe;
    exec_turn_t turn = {.arrival_s = -1, .decode_tokens = (uint32_t)p->steps};
    exec_turn_t chunk = {.arrival_s = -1, .prefill_tokens = (uint32_t)p->batch, .decode_tokens = 1};
    int rc = ERR_OK;
    for (int64_t i = 0; !rc && i < p->sessions; i++) {
        bool pf = i == 0 && p->what == SCN_PROBE_PREFILL_CHUNK;
        rc = add_session(f, (uint64_t)i, gpu_of(f, (uint64_t)i, (uint64_t)p->sessions), 0, (uint64_t)p->n_tokens,
                         (uint64_t)p->n_tokens + (pf ? (uint64_t)p->batch + 1 : (uint64_t)p->steps), false, pf ? &chunk : &turn,
                         1, e);
    }
    return rc;
}

/* ---- timeline ----------------------------------------------------------------------------------- */

/* Chrome trace-event JSON (Perfetto opens it): a process per session, a thread per resource track,
 * every op a complete ("X") slice. */
static int write_timeline(const study_rep_t *rep, const char *path, err_t *e)
{
    size_t n;
    const exec_trace_op_t *ops = exec_timeline(rep->x, &n);
    json_t *ev = json_array();
    size_t nres = sim_res_count(rep->sim);
    uint8_t *named = calloc((nres + 1) * 4096, 1); /* (session < 4096, track) pairs already named */
    for (size_t i = 0; ev && named && i < n; i++) {
        const exec_trace_op_t *o = &ops[i];
        json_int_t pid = (json_int_t)o->session + 1, tid = o->track + 2;
        size_t key = (size_t)(o->session % 4096) * (nres + 1) + (size_t)(o->track + 1);
        if (!named[key]) {
            named[key] = 1;
            const char *track = o->track >= 0 ? sim_res_name(rep->sim, o->track) : "delay";
            json_array_append_new(ev, json_pack("{s:s,s:s,s:I,s:I,s:{s:s}}", "name", "thread_name", "ph", "M", "pid", pid,
                                                "tid", tid, "args", "name", track));
            char pname[64];
            snprintf(pname, sizeof pname, "session %llu (GPU %d)", (unsigned long long)o->session, o->gpu);
            json_array_append_new(ev, json_pack("{s:s,s:s,s:I,s:{s:s}}", "name", "process_name", "ph", "M", "pid", pid,
                                                "args", "name", pname));
        }
        json_array_append_new(ev, json_pack("{s:s,s:s,s:s,s:f,s:f,s:I,s:I,s:{s:i,s:i,s:I,s:f}}", "name",
                                            opkind_name(o->kind), "cat", o->exec == PLAN_EXEC_GPU ? "kernel" : "copy", "ph",
                                            "X", "ts", (double)o->t_start_ps / SIM_PS_PER_US, "dur",
                                            (double)(o->t_end_ps - o->t_start_ps) / SIM_PS_PER_US, "pid", pid, "tid", tid,
                                            "args", "layer", o->layer == PLAN_NO_LAYER ? -1 : (int)o->layer, "batch",
                                            (int)o->batch, "plan", (json_int_t)o->plan, "launch_us",
                                            (double)o->t_launch_ps / SIM_PS_PER_US));
    }
    free(named);
    json_t *root = ev ? json_pack("{s:o,s:s}", "traceEvents", ev, "displayTimeUnit", "ns") : NULL;
    char *txt = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    int rc = txt ? atomicio_write(path, txt, strlen(txt), e) : err_set(e, ERR_NOMEM, "out of memory");
    free(txt);
    return rc;
}

/* ---- the replication ---------------------------------------------------------------------- */

int study_rep_run(study_t *s, const study_point_t *pt, uint32_t k, uint32_t reps, const study_opts_t *opts,
                  study_rep_t *rep, err_t *e)
{
    memset(rep, 0, sizeof *rep);
    sim_pool_t *pools = calloc((size_t)pt->hw.gpus, sizeof *pools);
    rep->gpu_sessions = calloc((size_t)pt->hw.gpus, sizeof *rep->gpu_sessions);
    int rc = pools && rep->gpu_sessions ? sim_new(&rep->sim, e) : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) rc = calib_prepare(s, pt, k, reps, &rep->cal, e);
    if (!rc && opts && opts->clamp) rc = calib_clamp(rep->cal, opts->clamp, e);
    if (!rc) rc = hwinst_build(&pt->hw, rep->cal, rep->sim, e);
    if (!rc) rc = cost_init(&rep->cost, rep->cal, e);
    if (!rc) rc = weights_place(pt, rep->sim, e);
    const char *timeline = k == 0 && opts ? opts->timeline_path : NULL;
    if (!rc) rc = exec_make(pt, k, rep, pools, timeline ? opts->timeline_plans : 0, e);
    free(pools);
    rep->warmup_s = pt->run.warmup_s; /* below duration_s (scn_bind_run) */
    rep->run = &pt->run;
    rep->warmed = !(rep->warmup_s > 0) && !pt->run.warmup_auto;
    if (!rc && pt->wl.kind != SCN_WL_PROBE) rc = samplers_start(rep, pt->run.duration_s, e);
    /* One method for every session of the replication; its planner draws from the plans stream,
     * common to every point of a sweep. */
    method_cfg_t mcfg = pt->mcfg;
    mcfg.seed = (int64_t)study_seed(pt, k, STUDY_STREAM_PLANS);
    if (!rc) rc = method_new(&mcfg, &pt->llm, &rep->method, e);
    if (!rc && pt->n_classes) rc = study_classes_new(pt, k, mcfg.seed, rep->method, &rep->classes, e);
    if (!rc) rc = check_edits(pt, rep, e);
    feed_t f = {s, pt, rep, k, 0, opts};
    if (!rc) {
        if (pt->wl.kind == SCN_WL_GENERATOR) rc = feed_generator(&f, e);
        else if (pt->wl.kind == SCN_WL_TRACE) rc = feed_trace(&f, e);
        else rc = feed_probe(&f, e);
    }
    if (!rc) {
        calib_notes_reset(rep->cal); /* notes from here on are the run's */
        note_engine_params(pt, rep);
    }
    progress_t prog = {.duration_s = pt->run.duration_s, .k = k, .reps = reps};
    clock_gettime(CLOCK_MONOTONIC, &prog.t0);
    if (!rc && opts && opts->progress && pt->wl.kind != SCN_WL_PROBE) rc = sim_at(rep->sim, 0, progress_tick, &prog, e);
    if (!rc && pt->run.duration_auto && pt->wl.kind != SCN_WL_PROBE) rc = study_steady_start(rep, e);
    sim_ps_t until = SIM_TIME_NEVER;
    if (!rc && pt->wl.kind != SCN_WL_PROBE && !sim_ps_of_s(pt->run.duration_s, SIM_ROUND_DOWN, &until))
        rc = err_set(e, ERR_RANGE, "key 'run.duration_s': %g s is beyond the %.4g s the engine's clock holds",
                     pt->run.duration_s, SIM_MAX_S);
    if (!rc) rc = sim_run(rep->sim, until, e);
    if (prog.shown) fputc('\n', stderr);
    if (rc) {
        study_rep_free(rep);
        return rc;
    }
    double end_s = (double)sim_now(rep->sim) / (double)SIM_PS_PER_S;
    if (!rep->warmed) {  /* an auto warm-up that never ended: nothing was measured */
        study_rep_window_start(rep);
        rep->warmup_s = end_s;
    }
    rep->stats = exec_stats(rep->x);
    if (timeline && (rc = write_timeline(rep, timeline, e))) {
        study_rep_free(rep);
        return rc;
    }
    rep->measured_s = end_s - rep->warmup_s;
    rep->measured_tokens = rep->stats->decode_tokens - rep->tokens_at_warmup;
    rep->mean_turn_s = study_mean_turn_s(rep);
    rep->window_turns = rep->mean_turn_s > 0 ? rep->measured_s / rep->mean_turn_s : 0;
    return ERR_OK;
}

void study_rep_free(study_rep_t *rep)
{
    study_stream_free(rep->stream);
    exec_free(rep->x);
    study_classes_free(rep->classes);
    method_free(rep->method);
    sim_free(rep->sim);
    calib_free(rep->cal);
    free(rep->ctx_tokens);
    free(rep->ctx_step_s);
    free(rep->util_t_s);
    free(rep->util);
    free(rep->last_work);
    free(rep->gpu_sessions);
    memset(rep, 0, sizeof *rep);
}
