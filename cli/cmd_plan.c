/* odsim plan — the plan of one decode step (or prefill chunk) of one session alone on an idle machine:
 * bytes per tier and path per layer and in total, pieces and their sizes, standalone time per op and
 * for the step, the memory footprint, and which assumed or out-of-range parameters the numbers use. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/plan_replay.h"
#include "cli/plan_yaml.h"
#include "cli/study_alone.h"
#include "cli/study_assume.h"
#include "common/cfg.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/footprint.h"
#include "models/hwcat.h"
#include "models/hwinst.h"
#include "models/llm.h"
#include "models/method.h"
#include "models/opkind.h"
#include "models/provider.h"
#include "models/quality.h"
#include "models/uplan.h"
#include "sim/plan.h"
#include "sim/sim.h"

extern const cmd_t cmd_plan;

typedef struct plan_args {
    const char *model, *method, *hw, *link, *calib, *catalog;
    const char *budget, *k, *page, *chunk, *window, *placement, *layout, *select, *union_f, *kv_dtype,
        *weight_dtype, *fetch, *index_fetch, *prefill_mode, *store, *k_from_planes, *prefetch, *plane_scan, *winners,
        *plane_bits, *key_variances, *index_layout, *max_context, *emit_replay, *plan_file;
    uint64_t context;
    uint32_t prefill;
    int sessions;
    bool json, have_context, show_yaml;
} plan_args_t;

/* Every value option: its flag, the method key it sets (NULL: not a method key), and its slot. */
typedef struct opt {
    const char *flag, *key;
    size_t off;
} opt_t;

#define O(flag, key, field) {flag, key, offsetof(plan_args_t, field)}
static const opt_t opts[] = {
    O("--model", NULL, model), O("--method", "method", method), O("--hw", NULL, hw), O("--link", NULL, link),
    O("--calib", NULL, calib), O("--catalog", NULL, catalog), O("--budget", "budget", budget), O("--k", "k", k),
    O("--page", "page", page), O("--chunk", "chunk", chunk), O("--window", "window", window),
    O("--placement", "placement", placement), O("--layout", "layout", layout), O("--select", "select", select),
    O("--union", "union", union_f), O("--kv-dtype", "kv_dtype", kv_dtype), O("--weight-dtype", "weight_dtype", weight_dtype),
    O("--fetch", "fetch", fetch), O("--index-fetch", "index_fetch", index_fetch),
    O("--prefill-mode", "prefill", prefill_mode), O("--store", "store", store),
    O("--k-from-planes", "k_from_planes", k_from_planes), O("--prefetch", "prefetch", prefetch),
    O("--plane-scan", "plane_scan", plane_scan), O("--winners", "winners", winners),
    O("--plane-bits", "plane_bits", plane_bits), O("--key-variances", "key_variances", key_variances),
    O("--index-layout", "index_layout", index_layout), O("--max-context", "max_context", max_context),
};
#undef O
#define N_OPTS (sizeof opts / sizeof opts[0])

/* A count by the scenarios' rule (cmd_parse_count: 1M = 10^6, 1Mi = 2^20), at most max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    long long v;
    if (cmd_parse_count(s, 0, (long long)max, &v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, plan_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->hw = "h200-1";
    a->sessions = 1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--json") || !strcmp(f, "--show-yaml")) {
            *(f[2] == 'j' ? &a->json : &a->show_yaml) = true;
            continue;
        }
        if (i + 1 >= argc) return cmd_usage_error(&cmd_plan, "%s needs a value", f);
        const char *v = argv[++i];
        if (!strcmp(f, "--context")) {
            if (parse_u64(v, METHOD_MAX_CONTEXT_TOKENS, &a->context))
                return cmd_usage_error(&cmd_plan, "--context %s: expected a token count of at most %llu (4Gi)", v,
                                       METHOD_MAX_CONTEXT_TOKENS);
            a->have_context = true;
            continue;
        }
        if (!strcmp(f, "--emit-replay") || !strcmp(f, "--plan")) {
            *(f[2] == 'e' ? &a->emit_replay : &a->plan_file) = v;
            continue;
        }
        if (!strcmp(f, "--prefill")) {
            uint64_t t;
            if (parse_u64(v, 1u << 24, &t) || t < 1) return cmd_usage_error(&cmd_plan, "--prefill %s: expected tokens", v);
            a->prefill = (uint32_t)t;
            continue;
        }
        if (!strcmp(f, "--sessions")) {
            uint64_t s;
            if (parse_u64(v, 1000000, &s) || s < 1) return cmd_usage_error(&cmd_plan, "--sessions %s", v);
            a->sessions = (int)s;
            continue;
        }
        static const char *const removed[][2] = {
            {"--scan-kernel", "--plane-scan coalesced | two_per_thread | token_per_thread (v3, v2, v1)"},
            {"--keys", "--key-variances '[v0, v1, ...]' (head_dim per-channel variances)"}};
        for (size_t r = 0; r < sizeof removed / sizeof removed[0]; r++)
            if (!strcmp(f, removed[r][0])) return cmd_usage_error(&cmd_plan, "%s was removed: use %s", f, removed[r][1]);
        size_t o = 0;
        while (o < N_OPTS && strcmp(opts[o].flag, f)) o++;
        if (o == N_OPTS) return cmd_usage_error(&cmd_plan, "unknown option '%s'", f);
        *(const char **)((char *)a + opts[o].off) = v;
    }
    if (!a->model || (!a->method && !a->plan_file) || !a->have_context)
        return cmd_usage_error(&cmd_plan, "--model, --method (or --plan) and --context are required");
    if (a->show_yaml && (a->json || a->emit_replay || a->prefill))
        return cmd_usage_error(&cmd_plan, "--show-yaml prints a decode step's plan alone (no --json, --emit-replay or --prefill)");
    return 0;
}

/* The plan's point as a scenario: each flag is an assignment on an empty document, as `odsim run
 * --set` makes them, so the study assembly resolves it exactly as it resolves a run's point. */
static int plan_doc(const plan_args_t *a, cfg_doc_t **out, err_t *e)
{
    int rc = cfg_parse_string("odsim plan", "{}", 2, out, e);
    char set[4096];
    const struct {
        const char *key, *value, *flag;
    } top[] = {{"hardware.box", a->hw, "--hw"},     {"hardware.link", a->link, "--link"},
               {"calibration", a->calib, "--calib"}, {"catalog", a->catalog, "--catalog"},
               {"model.name", a->model, "--model"}};
    for (size_t i = 0; !rc && i < sizeof top / sizeof top[0]; i++) {
        if (!top[i].value) continue;
        snprintf(set, sizeof set, "%s=%s", top[i].key, top[i].value);
        rc = cfg_set(*out, set, top[i].flag, e);
    }
    for (size_t o = 0; !rc && o < N_OPTS; o++) {
        const char *v = *(const char *const *)((const char *)a + opts[o].off);
        if (!opts[o].key || !v) continue;
        snprintf(set, sizeof set, "method.%s=%s", opts[o].key, v);
        rc = cfg_set(*out, set, opts[o].flag, e);
    }
    return rc;
}

typedef struct ctx {
    plan_args_t a;
    study_t *study;
    study_alone_t *alone_pt;
    const hw_t *hw;
    calib_t *cal;
    sim_t *sim;
    quality_t *quality;
    provider_t *prov;
    uplan_t *uplan;               /* --plan: a whole plan, or edits of the method's */
    plan_t plan;
    sim_ps_t *finish, *alone;
    study_assumptions_t assumed;  /* assumed parameters that move the step's time */
} ctx_t;

static void ctx_free(ctx_t *c)
{
    study_assumptions_free(&c->assumed);
    free(c->finish);
    free(c->alone);
    plan_free(&c->plan);
    provider_free(c->prov);
    uplan_free(c->uplan);
    quality_free(c->quality);
    study_alone_free(c->alone_pt);
    study_free(c->study);
}

/* The copy engine's hand-off to a kernel waiting on a copy (seeded from the presets: always there). */
static sim_ps_t handoff_ps(const calib_t *cal)
{
    double us = 0;
    err_t e;
    return calib_get(cal, "ce_handoff_us", &us, &e) ? 0 : cost_ps(us * 1e-6);
}

/* The plan of req: the method's, the user plan's (whole) or the method's edited. */
static int plan_at(const ctx_t *c, const plan_request_t *req, plan_t *out, err_t *e)
{
    const uplan_t *u = c->uplan;
    if (u && u->whole) {
        plan_reset(out, req->phase, req->new_tokens);
        int L = uplan_layers(u, method_llm(provider_method(c->prov))->layers);
        return uplan_build_whole(u, req->context_tokens, L, c->hw, provider_cost(c->prov), c->sim, 0, out, e);
    }
    int rc = provider_build(c->prov, c->sim, 0, req, out, e);
    if (rc || !u) return rc;
    plan_t edited;
    cost_paths_t paths;
    plan_init(&edited);
    rc = cost_paths_resolve(provider_cost(c->prov), c->hw, c->sim, 0, HWINST_DRAM, &paths, e);
    if (!rc) rc = uplan_apply_edits(u, out, req->context_tokens, provider_cost(c->prov), &paths, &edited, NULL, e);
    if (!rc) {
        plan_t t = *out;
        *out = edited;
        edited = t;
    }
    plan_free(&edited);
    return rc;
}

static int setup(ctx_t *c, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = plan_doc(&c->a, &doc, e);
    if (rc) {
        cfg_free(doc);
        return rc;
    }
    rc = study_open_doc(doc, "odsim plan", &c->study, e);
    if (!rc) rc = study_alone_open(c->study, 0, &c->alone_pt, e);
    if (rc) return rc;
    c->hw = study_alone_hw(c->alone_pt);
    c->cal = study_alone_calib(c->alone_pt);
    c->sim = study_alone_sim(c->alone_pt);
    char *qpath = study_catalog_file(c->study, "quality.yaml");
    rc = qpath ? quality_load(qpath, &c->quality, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(qpath);
    if (!rc) rc = provider_new_shared(study_alone_method(c->alone_pt), c->hw, c->cal, &c->prov, e);
    /* edits that match nothing at the plan file's context are an error before anything is shown */
    if (!rc && c->uplan && !c->uplan->whole) rc = uplan_check_edits(c->uplan, c->prov, c->sim, c->hw, e);
    if (rc) return rc;
    plan_init(&c->plan);
    plan_request_t req = {c->a.prefill ? PLAN_PREFILL : PLAN_DECODE, c->a.context, c->a.prefill ? c->a.prefill : 1, 0};
    rc = study_assumptions_of(c->study, 0, &req, &c->assumed, e);
    if (rc) return rc;
    calib_notes_reset(c->cal);
    rc = plan_at(c, &req, &c->plan, e);
    if (rc) return rc;
    /* finish times on the critical path, as plan_standalone_ps counts them */
    uint32_t n = c->plan.n_ops;
    c->finish = calloc(n + 1, sizeof *c->finish);
    c->alone = calloc(n + 1, sizeof *c->alone);
    if (!c->finish || !c->alone) return err_set(e, ERR_NOMEM, "out of memory");
    return plan_finish_ps(&c->plan, c->sim, handoff_ps(c->cal), c->finish, c->alone, e);
}

static const char *op_path(const plan_op_t *o)
{
    switch (o->kind) {
    case OPKIND_INDEX_FETCH:
        return o->exec == PLAN_EXEC_GPU ? "sm-gather" : o->host_sync && o->pieces > 1 ? "ce-copies" : o->pieces > 1 ? "ce-2d" : "ce";
    case OPKIND_WINNER_FETCH: return o->exec == PLAN_EXEC_GPU ? "sm-gather" : "ce-batch";
    case OPKIND_H2D_COPY: return "ce";
    case OPKIND_FLUSH: return "ce-d2h";
    default: return "kernel";
    }
}

static bool is_transfer(const plan_op_t *o)
{
    return o->kind == OPKIND_INDEX_FETCH || o->kind == OPKIND_WINNER_FETCH || o->kind == OPKIND_H2D_COPY ||
           o->kind == OPKIND_FLUSH;
}

/* What sets a transfer's standalone rate: the slowest of its path's resources (a link direction,
 * duplex, host DRAM, the GPU's row rate, ...) or its own cap, named by the ceiling it comes from:
 * the SM path's share of the link (gather_peak), the SM-side limit (sm_side), or a copy's link peak
 * with its per-piece time (link+pieces). The SMs a gather holds follow these ceilings, so they are
 * never named. Rate in B/s. */
static const char *op_bound(const ctx_t *c, const plan_op_t *o, double *rate)
{
    const char *name = "none";
    *rate = INFINITY;
    for (int u = 0; u < o->n_uses; u++) {
        const char *rn = sim_res_name(c->sim, o->uses[u].res);
        size_t len = strlen(rn);
        if (len > 3 && !strcmp(rn + len - 3, ".sm")) continue;
        double r = sim_res_capacity(c->sim, o->uses[u].res) / o->uses[u].coef;
        if (r < *rate) *rate = r, name = rn;
    }
    if (o->cost.cap_rate > 0 && o->cost.cap_rate < *rate) {
        *rate = o->cost.cap_rate;
        if (o->exec != PLAN_EXEC_GPU) return "link+pieces";
        const calib_param_t *peak = calib_find(c->cal, "gather_peak_GBps"), *blocks = calib_find(c->cal, "gather_blocks"),
                            *block = calib_find(c->cal, "gather_block_GBps");
        bool sm_side = peak && blocks && block && blocks->value * block->value < peak->value;
        return sm_side ? "sm_side" : "gather_peak";
    }
    return name;
}

typedef struct layer_sum {
    double index_host, winner_host, kv_host, flush, hbm, flops, index_pieces, winner_pieces;
    sim_ps_t t_ps;
} layer_sum_t;

/* Layers the plan has ops in: the model's, or a whole user plan's own. */
static int plan_layer_count(const ctx_t *c)
{
    int L = method_llm(provider_method(c->prov))->layers;
    if (c->uplan && c->uplan->whole) L = uplan_layers(c->uplan, L);
    for (uint32_t i = 0; i < c->plan.n_ops; i++)
        if (c->plan.ops[i].layer != PLAN_NO_LAYER && c->plan.ops[i].layer + 1 > L) L = c->plan.ops[i].layer + 1;
    return L;
}

static void sum_layers(const ctx_t *c, layer_sum_t *ls, int L, layer_sum_t *step)
{
    memset(ls, 0, (size_t)L * sizeof *ls);
    memset(step, 0, sizeof *step);
    sim_ps_t prev_end = 0;
    for (uint32_t i = 0; i < c->plan.n_ops; i++) {
        const plan_op_t *o = &c->plan.ops[i];
        layer_sum_t *s = o->layer == PLAN_NO_LAYER ? step : &ls[o->layer];
        if (o->kind == OPKIND_INDEX_FETCH) s->index_host += o->bytes_host, s->index_pieces += o->pieces;
        if (o->kind == OPKIND_WINNER_FETCH) s->winner_host += o->bytes_host, s->winner_pieces += o->pieces;
        if (o->kind == OPKIND_H2D_COPY) s->kv_host += o->bytes_host;
        if (o->kind == OPKIND_FLUSH) s->flush += o->bytes_host;
        if (!is_transfer(o)) s->hbm += o->bytes_hbm;
        s->flops += o->flops;
        /* a layer ends with its last op (the MLP): its time is its end minus the previous layer's */
        if (o->layer != PLAN_NO_LAYER && o->kind == OPKIND_GEMM && (i + 1 == c->plan.n_ops || c->plan.ops[i + 1].layer != o->layer)) {
            s->t_ps = c->finish[i] - prev_end;
            prev_end = c->finish[i];
        }
    }
}

static bool same_layer(const layer_sum_t *a, const layer_sum_t *b)
{
    return a->index_host == b->index_host && a->winner_host == b->winner_host && a->kv_host == b->kv_host &&
           a->flush == b->flush && a->hbm == b->hbm && llabs(a->t_ps - b->t_ps) <= 1000;
}

static double us(sim_ps_t t) { return (double)t / 1e6; }

/* The offloaded tokens (context beyond the window) when the method's selection (k, widened by the
 * union of its heads) takes every one of them, the plan fetching them all; 0 otherwise. */
static double k_clamped_to(const ctx_t *c)
{
    const method_t *mt = provider_method(c->prov);
    method_layer_t o;
    method_layer(mt, 0, c->a.context, c->a.prefill ? c->a.prefill : 1, c->a.prefill > PROVIDER_DECODE_MAX_TOKENS, &o);
    return o.winner_rows > 0 && o.winner_rows >= o.n_off * method_llm(mt)->kv_heads ? o.n_off : 0;
}

#define sel_names method_select_names
static const char *const lay_names[] = {"split", "interleaved", "token", "page"};
static const char *const fetch_names[] = {"sm", "ce", "auto"};

/* Winner rows a KV head fetches in layer 0 of the plan (a page counts P rows). */
static double rows_per_kv_head(const ctx_t *c)
{
    const method_t *mt = provider_method(c->prov);
    method_layer_t ly;
    method_layer(mt, 0, c->a.context, c->a.prefill ? c->a.prefill : 1, c->a.prefill > PROVIDER_DECODE_MAX_TOKENS, &ly);
    return ly.winner_rows / method_llm(mt)->kv_heads;
}

/* The path of the plan's first index fetch from the host ("none" without one). */
static const char *index_path(const ctx_t *c)
{
    for (uint32_t i = 0; i < c->plan.n_ops; i++)
        if (c->plan.ops[i].kind == OPKIND_INDEX_FETCH) return op_path(&c->plan.ops[i]);
    return "none";
}

static void print_text(const ctx_t *c, sim_ps_t step_ps, const footprint_t *f, const footprint_total_t *ft,
                       int feas_rc, const char *feas_msg)
{
    const method_t *mt = provider_method(c->prov);
    const method_cfg_t *cfg = method_cfg(mt);
    const llm_t *m = method_llm(mt);
    int L = plan_layer_count(c);
    study_assumptions_print(stdout, &c->assumed);
    printf("odsim plan: %s, %s, %s of %u token(s) at context %llu (window %lld), on %s (%s x%d, %s)\n", m->name,
           method_name(mt), c->a.prefill ? "prefill chunk" : "decode step", c->a.prefill ? c->a.prefill : 1,
           (unsigned long long)c->a.context, (long long)cfg->window, c->hw->box, c->hw->gpu, c->hw->gpus, c->hw->link);
    if (c->uplan)
        printf("  user plan %s (%s, stated at context %llu): %s\n", c->uplan->name, c->uplan->file,
               (unsigned long long)c->uplan->context,
               c->uplan->whole ? "a whole plan, run as method dense (its settings below are dense's, not the plan's)"
                               : "edits of the method's plan");
    if (c->a.prefill)
        printf("  prefill chunk: %u tokens (%s)\n", c->a.prefill,
               c->a.prefill <= PROVIDER_DECODE_MAX_TOKENS ? "a few tokens: planned as a decode step"
               : cfg->prefill == PREFILL_EXACT            ? "exact"
                                                          : "sparse");
    printf("  budget %.2f index bits read per token per KV head (stored %.2f); k %lld; select %s (union %.2f, %.0f rows per KV head);\n"
           "  layout %s; index layout %s; placement %s; K/V %s; weights %s; chunk %lld; winner fetch %s; index fetch %s (%s)\n",
           method_budget_bits(mt), method_stored_bits(mt), (long long)cfg->k, sel_names[method_select(mt)], method_union(mt),
           rows_per_kv_head(c), lay_names[method_layout(mt)], method_index_layout_names[cfg->index_layout], cfg->placement,
           llm_dtype_names[cfg->kv_dtype], llm_dtype_names[cfg->weight_dtype], (long long)cfg->chunk,
           cfg->fetch == FETCH_SM ? "sm" : "ce", fetch_names[cfg->index_fetch], index_path(c));
    double clamped = k_clamped_to(c);
    if (clamped > 0)
        printf("  note: k %lld selects all %.0f offloaded tokens (context beyond the window): the plan fetches every one\n",
               (long long)cfg->k, clamped);
    const fathom_stats_t *fs = method_fathom(mt);
    if (fs)
        printf("  fathom: plane-bit budget %d, %.1f active channels (sd %.1f, %d..%d), relative residual score error %.4f\n",
               fs->plane_bits, fs->mean_active, fs->sd_active, fs->min_active, fs->max_active, fs->mean_rel_residual);

    layer_sum_t *ls = calloc((size_t)L, sizeof *ls), step;
    if (!ls) return;
    sum_layers(c, ls, L, &step);
    printf("\nper layer (host bytes read per path, HBM bytes of kernels, time of the layer on the critical path):\n");
    printf("  %-9s %13s %7s %13s %8s %13s %12s %13s %10s\n", "layers", "index_B", "pieces", "winners_B", "pieces",
           "kv_B", "flush_B", "hbm_B", "time_us");
    for (int l = 0; l < L;) {
        int j = l;
        while (j + 1 < L && same_layer(&ls[l], &ls[j + 1])) j++;
        char r[32];
        snprintf(r, sizeof r, j > l ? "%d-%d" : "%d", l, j);
        printf("  %-9s %13.0f %7.0f %13.0f %8.0f %13.0f %12.0f %13.0f %10.2f\n", r, ls[l].index_host, ls[l].index_pieces,
               ls[l].winner_host, ls[l].winner_pieces, ls[l].kv_host, ls[l].flush, ls[l].hbm, us(ls[l].t_ps));
        l = j + 1;
    }
    printf("\nops of layer 0 and of the step (alone on an idle machine):\n");
    printf("  %-13s %-5s %-10s %6s %13s %13s %13s %9s %11s %10s\n", "op", "layer", "path", "stream", "host_B", "hbm_B",
           "flops", "pieces", "piece_B", "time_us");
    for (uint32_t i = 0; i < c->plan.n_ops; i++) {
        const plan_op_t *o = &c->plan.ops[i];
        if (o->layer != 0 && o->layer != PLAN_NO_LAYER) continue;
        char lay_s[8];
        snprintf(lay_s, sizeof lay_s, o->layer == PLAN_NO_LAYER ? "step" : "%u", o->layer);
        printf("  %-13s %-5s %-10s %6u %13.0f %13.0f %13.4g %9u %11.0f %10.2f\n", opkind_name(o->kind), lay_s, op_path(o),
               o->stream, is_transfer(o) ? o->bytes_host : 0.0, o->bytes_hbm, o->flops, o->pieces,
               o->pieces ? o->bytes_host / o->pieces : 0.0, us(c->alone[i]));
    }
    layer_sum_t tot = step;
    for (int l = 0; l < L; l++) {
        tot.index_host += ls[l].index_host, tot.winner_host += ls[l].winner_host, tot.kv_host += ls[l].kv_host;
        tot.flush += ls[l].flush, tot.hbm += ls[l].hbm, tot.flops += ls[l].flops;
        tot.index_pieces += ls[l].index_pieces, tot.winner_pieces += ls[l].winner_pieces;
    }
    printf("\ntotal per %s:\n", c->a.prefill ? "chunk" : "step");
    printf("  host->device  index %.4g GB in %.0f pieces (%.0f B each), winners %.4g GB in %.0f pieces (%.0f B each), K/V %.4g GB\n",
           tot.index_host / 1e9, tot.index_pieces, tot.index_pieces ? tot.index_host / tot.index_pieces : 0,
           tot.winner_host / 1e9, tot.winner_pieces, tot.winner_pieces ? tot.winner_host / tot.winner_pieces : 0,
           tot.kv_host / 1e9);
    printf("  device->host  flush %.4g GB\n", tot.flush / 1e9);
    printf("  HBM           %.4g GB read/written by kernels; %.4g TFLOP\n", tot.hbm / 1e9, tot.flops / 1e12);
    printf("  time          %.1f us alone on an idle machine (%.2f %s/s)\n", us(step_ps),
           step_ps > 0 ? (c->a.prefill ? c->a.prefill : 1) / ((double)step_ps / 1e12) : 0.0, "tokens");
    printf("\nfootprint per session at %llu tokens:\n", (unsigned long long)c->a.context);
    printf("  host (%s): K/V %.2f GiB + index %.2f GiB = %.2f GiB\n", cfg->tier == TIER_CXL ? "CXL tier" : "DRAM",
           f->host_kv_bytes / 1073741824.0, f->host_index_bytes / 1073741824.0, f->host_bytes / 1073741824.0);
    printf("  HBM: index %.2f GiB + window %.2f GiB + buffers %.2f GiB = %.2f GiB; weights %.2f GiB per GPU\n",
           f->hbm_index_bytes / 1073741824.0, f->hbm_tail_bytes / 1073741824.0, f->hbm_buffer_bytes / 1073741824.0,
           f->hbm_bytes / 1073741824.0, f->hbm_weight_bytes / 1073741824.0);
    printf("  %d session(s): host %.2f of %.2f GiB, HBM per GPU %.2f of %.2f GiB: %s\n", ft->sessions,
           ft->host_bytes / 1073741824.0, ft->host_capacity_bytes / 1073741824.0, ft->hbm_bytes_per_gpu / 1073741824.0,
           ft->hbm_capacity_bytes / 1073741824.0, feas_rc ? feas_msg : "feasible");
    size_t nq = 0;
    const quality_point_t *qp[8];
    err_t qe;
    if (quality_lookup(c->quality, method_name(mt), NULL, method_budget_asked(mt), (double)method_cfg(mt)->k, qp, 8, &nq, &qe))
        printf("\nquality: %s\n", qe.msg);
    else
        for (size_t i = 0; i < nq && i < 8; i++)
            printf("%squality: %s = %g%s (%s, %s; %s)\n", i ? "" : "\n", qp[i]->metric, qp[i]->value,
                   qp[i]->approx ? " approx" : "", qp[i]->model, qp[i]->context, qp[i]->origin);
    if (calib_flag_count(c->cal)) {
        printf("\nthese numbers use assumed or out-of-range parameters:\n");
        calib_flags_print(c->cal, stdout);
    }
    free(ls);
}

static void jset(json_t *o, const char *k, double v) { json_object_set_new(o, k, json_real(v)); }

static void print_json(const ctx_t *c, sim_ps_t step_ps, const footprint_t *f, const footprint_total_t *ft,
                       int feas_rc, const char *feas_msg)
{
    const method_t *mt = provider_method(c->prov);
    const method_cfg_t *cfg = method_cfg(mt);
    const llm_t *m = method_llm(mt);
    json_t *root = json_object(), *set = json_object(), *layers = json_array(), *ops = json_array();
    json_object_set_new(root, "odsim_version", json_string(ODSIM_VERSION));
    json_object_set_new(root, "assumptions", study_assumptions_json(&c->assumed));
    json_object_set_new(root, "model", json_string(m->name));
    json_object_set_new(root, "method", json_string(method_name(mt)));
    json_object_set_new(root, "phase", json_string(c->a.prefill ? "prefill" : "decode"));
    if (c->uplan)
        json_object_set_new(root, "plan", json_pack("{s:s,s:s,s:s,s:I,s:i}", "name", c->uplan->name, "file", c->uplan->file,
                                                    "form", c->uplan->whole ? "whole" : "edits", "context_tokens",
                                                    (json_int_t)c->uplan->context, "edits", (int)c->uplan->n_edits));
    json_object_set_new(root, "hardware", json_pack("{s:s,s:s,s:s,s:i}", "box", c->hw->box, "gpu", c->hw->gpu, "link",
                                                    c->hw->link, "gpus", c->hw->gpus));
    json_object_set_new(root, "calib_hash", json_sprintf("%016llx", (unsigned long long)calib_hash(c->cal)));
    json_object_set_new(set, "context_tokens", json_integer((json_int_t)c->a.context));
    json_object_set_new(set, "new_tokens", json_integer(c->a.prefill ? c->a.prefill : 1));
    jset(set, "budget_bits", method_budget_bits(mt));
    jset(set, "stored_bits", method_stored_bits(mt));
    json_object_set_new(set, "k_tokens", json_integer(cfg->k));
    json_object_set_new(set, "k_selects_every_offloaded_token", json_boolean(k_clamped_to(c) > 0));
    json_object_set_new(set, "window_tokens", json_integer(cfg->window));
    json_object_set_new(set, "chunk_tokens", json_integer(cfg->chunk));
    jset(set, "union_factor", method_union(mt));
    json_object_set_new(set, "select", json_string(sel_names[method_select(mt)]));
    jset(set, "rows_per_kv_head", rows_per_kv_head(c));
    json_object_set_new(set, "layout", json_string(lay_names[method_layout(mt)]));
    json_object_set_new(set, "index_layout", json_string(method_index_layout_names[cfg->index_layout]));
    json_object_set_new(set, "index_fetch", json_string(fetch_names[cfg->index_fetch]));
    json_object_set_new(set, "index_fetch_path", json_string(index_path(c)));
    json_object_set_new(set, "placement", json_string(cfg->placement));
    json_object_set_new(set, "kv_dtype", json_string(llm_dtype_names[cfg->kv_dtype]));
    json_object_set_new(set, "weight_dtype", json_string(llm_dtype_names[cfg->weight_dtype]));
    json_object_set_new(root, "settings", set);
    const fathom_stats_t *fs = method_fathom(mt);
    if (fs)
        json_object_set_new(root, method_name(mt), json_pack("{s:i,s:f,s:f,s:f}", "plane_bits", fs->plane_bits, "active_channels_mean",
                                                      fs->mean_active, "active_channels_sd", fs->sd_active,
                                                      "rel_residual_score_error", fs->mean_rel_residual));
    int L = plan_layer_count(c);
    layer_sum_t *ls = calloc((size_t)L, sizeof *ls), step, tot;
    if (!ls) {
        json_decref(root);
        json_decref(layers);
        json_decref(ops);
        return;
    }
    sum_layers(c, ls, L, &step);
    tot = step;
    for (int l = 0; l < L; l++) {
        json_array_append_new(layers, json_pack("{s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "layer", l, "index_host_bytes",
                                                ls[l].index_host, "index_pieces", ls[l].index_pieces, "winner_host_bytes",
                                                ls[l].winner_host, "winner_pieces", ls[l].winner_pieces, "kv_host_bytes",
                                                ls[l].kv_host, "flush_bytes", ls[l].flush, "hbm_bytes", ls[l].hbm, "flops",
                                                ls[l].flops, "time_us", us(ls[l].t_ps)));
        tot.index_host += ls[l].index_host, tot.winner_host += ls[l].winner_host, tot.kv_host += ls[l].kv_host;
        tot.flush += ls[l].flush, tot.hbm += ls[l].hbm, tot.flops += ls[l].flops;
        tot.index_pieces += ls[l].index_pieces, tot.winner_pieces += ls[l].winner_pieces;
    }
    for (uint32_t i = 0; i < c->plan.n_ops; i++) {
        const plan_op_t *o = &c->plan.ops[i];
        json_t *uses = json_array();
        for (int u = 0; u < o->n_uses; u++)
            json_array_append_new(uses, json_pack("{s:s,s:f}", "resource", sim_res_name(c->sim, o->uses[u].res), "coef",
                                                  o->uses[u].coef));
        json_t *op = json_pack("{s:s,s:i,s:s,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:f,s:o}", "op", opkind_name(o->kind),
                                             "layer", o->layer == PLAN_NO_LAYER ? -1 : (int)o->layer, "path", op_path(o),
                                             "stream", o->stream, "host_bytes", is_transfer(o) ? o->bytes_host : 0.0,
                                             "hbm_bytes", o->bytes_hbm, "flops", o->flops, "pieces", (int)o->pieces,
                                             "piece_bytes", o->pieces ? o->bytes_host / o->pieces : 0.0, "time_us",
                                             us(c->alone[i]), "finish_us", us(c->finish[i]), "uses", uses);
        if (is_transfer(o)) {
            double rate;
            const char *bound = op_bound(c, o, &rate);
            json_object_set_new(op, "latency_us", json_real(us(o->cost.latency_ps)));
            json_object_set_new(op, "rate_GBps", json_real(rate / 1e9));
            json_object_set_new(op, "bound", json_string(bound));
        }
        json_array_append_new(ops, op);
    }
    json_t *res = json_array();
    for (size_t r = 0; r < sim_res_count(c->sim); r++)
        json_array_append_new(res, json_pack("{s:s,s:f,s:s}", "name", sim_res_name(c->sim, (sim_res_t)r), "capacity",
                                             sim_res_capacity(c->sim, (sim_res_t)r), "unit", sim_res_unit(c->sim, (sim_res_t)r)));
    json_object_set_new(root, "resources", res);
    json_object_set_new(root, "layers", layers);
    json_object_set_new(root, "ops", ops);
    json_object_set_new(root, "total",
                        json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "index_host_bytes", tot.index_host,
                                  "index_pieces", tot.index_pieces, "winner_host_bytes", tot.winner_host, "winner_pieces",
                                  tot.winner_pieces, "kv_host_bytes", tot.kv_host, "h2d_bytes",
                                  tot.index_host + tot.winner_host + tot.kv_host, "flush_d2h_bytes", tot.flush, "hbm_bytes",
                                  tot.hbm, "flops", tot.flops, "step_time_us", us(step_ps)));
    json_object_set_new(root, "footprint",
                        json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:i,s:f,s:f,s:f,s:f,s:b,s:s}", "host_kv_bytes",
                                  f->host_kv_bytes, "host_index_bytes", f->host_index_bytes, "host_bytes", f->host_bytes,
                                  "hbm_index_bytes", f->hbm_index_bytes, "hbm_window_bytes", f->hbm_tail_bytes,
                                  "hbm_buffer_bytes", f->hbm_buffer_bytes, "hbm_session_bytes", f->hbm_bytes,
                                  "hbm_weight_bytes", f->hbm_weight_bytes, "sessions", ft->sessions, "total_host_bytes",
                                  ft->host_bytes, "host_capacity_bytes", ft->host_capacity_bytes, "hbm_per_gpu_bytes",
                                  ft->hbm_bytes_per_gpu, "hbm_capacity_bytes", ft->hbm_capacity_bytes, "feasible",
                                  feas_rc == 0, "why", feas_rc ? feas_msg : ""));
    json_t *flags = json_array();
    calib_flag_t fl;
    for (size_t i = 0; calib_flag_at(c->cal, i, &fl); i++)
        json_array_append_new(flags, json_pack("{s:s,s:s,s:b,s:I,s:I}", "name", fl.name, "origin", fl.origin, "assumed",
                                               fl.assumed, "uses", (json_int_t)fl.uses, "outside_range",
                                               (json_int_t)fl.outside));
    json_object_set_new(root, "assumed_or_out_of_range", flags);
    json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(root);
    free(ls);
}

/* Plan p (at context tokens) as a replay workload named name, its transfers' pieces over their
 * layer's host span (the index's for an index fetch, the K/V's for the rest). */
static int map_replay(const ctx_t *c, const plan_t *p, uint64_t context, const char *name, rf_workload_t *w,
                      plan_replay_note_t *note, err_t *e)
{
    const method_t *mt = provider_method(c->prov);
    plan_request_t req = {c->a.prefill ? PLAN_PREFILL : PLAN_DECODE, context, c->a.prefill ? c->a.prefill : 1, 0};
    int L = method_llm(mt)->layers;
    double *span = calloc((size_t)p->n_ops + 1, sizeof *span);
    method_layer_t *ly = calloc((size_t)L, sizeof *ly);
    int rc = span && ly ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    for (int l = 0; !rc && l < L; l++)
        method_layer(mt, l, req.context_tokens, req.new_tokens, provider_prefill_formulas(&req), &ly[l]);
    for (uint32_t i = 0; !rc && i < p->n_ops; i++) {
        const plan_op_t *o = &p->ops[i];
        if (o->layer != PLAN_NO_LAYER && o->layer < L)
            span[i] = o->kind == OPKIND_INDEX_FETCH ? ly[o->layer].index_region_bytes : ly[o->layer].kv_region_bytes;
    }
    plan_replay_in_t in = {p, c->sim, c->hw, provider_cost(c->prov), method_llm(mt), span, name};
    if (!rc) rc = plan_replay_make(&in, w, note, e);
    free(span);
    free(ly);
    return rc;
}

/* What the plan is, for comment lines: "MODEL, METHOD (or user plan NAME), decode step of ...". */
static void describe(const ctx_t *c, const char *cmd, char *out, size_t n)
{
    const method_t *mt = provider_method(c->prov);
    char who[160];
    if (c->uplan) snprintf(who, sizeof who, "%s plan %s of %s", c->uplan->whole ? "user" : method_name(mt), c->uplan->name, c->uplan->file);
    else snprintf(who, sizeof who, "%s", method_name(mt));
    snprintf(out, n, "odsim plan %s: %s, %s, %s of %u token(s) at context %llu, on %s (odsim %s)", cmd,
             method_llm(mt)->name, who, c->a.prefill ? "prefill chunk" : "decode step", c->a.prefill ? c->a.prefill : 1,
             (unsigned long long)c->a.context, c->hw->box, ODSIM_VERSION);
}

/* --emit-replay: the plan as a replay workload: a whole user plan's step exactly, else the mapping. */
static int emit_replay(const ctx_t *c, err_t *e)
{
    const method_t *mt = provider_method(c->prov);
    rf_workload_t *w = malloc(sizeof *w);
    plan_replay_note_t *note = malloc(sizeof *note);
    int rc = w && note ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    char name[64], what[768];
    if (c->uplan && c->uplan->whole) snprintf(name, sizeof name, "%s", c->uplan->name);
    else if (c->a.prefill)
        snprintf(name, sizeof name, "plan-%s-%llu-prefill%u", method_name(mt), (unsigned long long)c->a.context, c->a.prefill);
    else
        snprintf(name, sizeof name, "plan-%s-%llu", method_name(mt), (unsigned long long)c->a.context);
    describe(c, "--emit-replay", what, sizeof what);
    bool exact = c->uplan && c->uplan->whole;
    if (!rc && exact) {
        plan_replay_header(w, name);
        rc = uplan_session(c->uplan, c->a.context, uplan_layers(c->uplan, method_llm(mt)->layers), &w->sessions[0], NULL, e);
    } else if (!rc) {
        rc = map_replay(c, &c->plan, c->a.context, name, w, note, e);
    }
    if (!rc) rc = plan_replay_write(c->a.emit_replay, w, what, exact ? NULL : note, e);
    if (rc) err_prefix(e, "--emit-replay %s", c->a.emit_replay);
    free(w);
    free(note);
    return rc;
}

/* --show-yaml: the plan as a whole user plan on stdout, its sizes compared with the plan at twice the
 * context for their scale. */
static int show_yaml(const ctx_t *c, err_t *e)
{
    const method_t *mt = provider_method(c->prov);
    rf_workload_t *w1 = malloc(sizeof *w1), *w2 = malloc(sizeof *w2);
    plan_replay_note_t *n1 = malloc(sizeof *n1), *n2 = malloc(sizeof *n2);
    plan_t p2;
    plan_init(&p2);
    int rc = w1 && w2 && n1 && n2 ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    char name[64], what[768];
    snprintf(name, sizeof name, "plan-%s-%llu", method_name(mt), (unsigned long long)c->a.context);
    describe(c, "--show-yaml", what, sizeof what);
    plan_request_t req2 = {PLAN_DECODE, 2 * c->a.context, 1, 0};
    if (!rc) rc = map_replay(c, &c->plan, c->a.context, name, w1, n1, e);
    if (!rc) rc = plan_at(c, &req2, &p2, e);
    /* the plan at 2C may not map (a transfer beyond the format): then every size is fixed */
    bool have2 = !rc && !map_replay(c, &p2, req2.context_tokens, name, w2, n2, e);
    plan_yaml_in_t in = {&c->plan, &w1->sessions[0], have2 ? &w2->sessions[0] : NULL, n1, c->a.context,
                         method_llm(mt)->layers, name, what};
    if (!rc && plan_yaml_write(stdout, &in)) rc = err_set(e, ERR_IO, "stdout: write error");
    plan_free(&p2);
    free(w1);
    free(w2);
    free(n1);
    free(n2);
    return rc;
}

/* A whole user plan's footprint at context: its region on the host, its ops' device buffers in HBM
 * (the model's weights beside them), checked for `sessions` sessions as footprint_check does. */
static int whole_footprint(const ctx_t *c, uint64_t context, footprint_t *f, footprint_total_t *ft, err_t *e)
{
    const method_t *mt = provider_method(c->prov);
    footprint_t dense;
    footprint_session(mt, context, &dense);
    memset(f, 0, sizeof *f);
    memset(ft, 0, sizeof *ft);
    rf_session_t *s = malloc(sizeof *s);
    if (!s) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = uplan_session(c->uplan, context, uplan_layers(c->uplan, method_llm(mt)->layers), s, NULL, e);
    if (!rc) replay_footprint(s, &f->hbm_buffer_bytes, &f->host_bytes);
    free(s);
    if (rc) return rc;
    f->hbm_bytes = f->hbm_buffer_bytes;
    f->hbm_weight_bytes = dense.hbm_weight_bytes;
    const hw_t *hw = c->hw;
    ft->sessions = c->a.sessions;
    ft->sessions_per_gpu = (c->a.sessions + hw->gpus - 1) / hw->gpus;
    ft->host_bytes = f->host_bytes * c->a.sessions;
    ft->host_capacity_bytes = hw->host_dram_bytes;
    ft->hbm_bytes_per_gpu = f->hbm_weight_bytes + f->hbm_bytes * ft->sessions_per_gpu;
    ft->hbm_capacity_bytes = hw->hbm_bytes - hw->hbm_reserve_bytes;
    if (ft->host_bytes > ft->host_capacity_bytes)
        return err_set(e, ERR_INFEASIBLE, "infeasible: %d session(s) of plan %s need %.2f GiB of host DRAM, the box '%s' has %.2f GiB",
                       ft->sessions, c->uplan->name, ft->host_bytes / 1073741824.0, hw->box, ft->host_capacity_bytes / 1073741824.0);
    if (ft->hbm_bytes_per_gpu > ft->hbm_capacity_bytes)
        return err_set(e, ERR_INFEASIBLE, "infeasible: a %s needs %.2f GiB of HBM (weights and plan %s's buffers), it has %.2f GiB usable",
                       hw->gpu, ft->hbm_bytes_per_gpu / 1073741824.0, c->uplan->name, ft->hbm_capacity_bytes / 1073741824.0);
    return ERR_OK;
}

/* --plan FILE: read; a whole plan runs as method dense (its model, weights and names), edits on the
 * method given. */
static int load_user_plan(ctx_t *c, err_t *e)
{
    int rc = uplan_load(c->a.plan_file, &c->uplan, e);
    if (rc) return rc;
    if (c->uplan->whole) {
        if (c->a.method && strcmp(c->a.method, "dense"))
            return err_set(e, ERR_INVAL, "--plan %s is a whole plan: it runs as method dense (docs/plans.md), not %s",
                           c->a.plan_file, c->a.method);
        c->a.method = "dense";
    } else if (!c->a.method) {
        return err_set(e, ERR_INVAL, "--plan %s edits a built-in plan: --method names which", c->a.plan_file);
    }
    return ERR_OK;
}

static int plan_main(int argc, char **argv)
{
    ctx_t c;
    memset(&c, 0, sizeof c);
    int rc = parse_args(argc, argv, &c.a);
    if (rc) return rc;
    err_t e;
    err_clear(&e);
    if ((c.a.plan_file && load_user_plan(&c, &e)) || setup(&c, &e)) {
        ctx_free(&c);
        return cmd_fail("plan", "%s", e.msg);
    }
    if (c.a.show_yaml) {
        rc = show_yaml(&c, &e) ? cmd_fail("plan", "%s", e.msg) : 0;
        ctx_free(&c);
        return rc;
    }
    sim_ps_t step_ps = 0;
    if (plan_standalone_ps(&c.plan, c.sim, handoff_ps(c.cal), &step_ps, &e)) {
        ctx_free(&c);
        return cmd_fail("plan", "%s", e.msg);
    }
    if (c.a.emit_replay && emit_replay(&c, &e)) {
        ctx_free(&c);
        return cmd_fail("plan", "%s", e.msg);
    }
    footprint_t f;
    footprint_total_t ft;
    const method_t *mt = provider_method(c.prov);
    uint64_t at = c.a.context + (c.a.prefill ? c.a.prefill : 1);
    footprint_session(mt, at, &f);
    err_t fe;
    err_clear(&fe);
    int feas = c.uplan && c.uplan->whole ? whole_footprint(&c, at, &f, &ft, &fe)
                                         : footprint_check(mt, c.hw, at, c.a.sessions, &ft, &fe);
    if (c.a.json) print_json(&c, step_ps, &f, &ft, feas, fe.msg);
    else print_text(&c, step_ps, &f, &ft, feas, fe.msg);
    ctx_free(&c);
    if (feas) return cmd_fail("plan", "%s", fe.msg);
    return 0;
}

const cmd_t cmd_plan = {
    "plan",
    "the plan of one decode step or prefill chunk of one session alone: bytes, pieces, time, footprint",
    "usage: odsim plan --model M --method X --context N [options] [--json | --show-yaml]\n"
    "  --model M          LLM shape (models/catalog/llms.yaml): qwen3-8b, llama-3.1-8b, qwen2.5-7b, ...\n"
    "  --method X         an attention method (`odsim params method` lists them)\n"
    "  --context N        tokens already in the context (the scenarios' suffixes: 1M = 10^6, 1Mi = 2^20)\n"
    "  --budget B         index bits read per token per KV head, scales included\n"
    "  --k K              selected tokens          --page P     landmark page tokens (8 or 16)\n"
    "  --chunk T          flushed chunk tokens     --window W   dense HBM window tokens (default 0)\n"
    "  --hw H             box (models/catalog/boxes.yaml; default h200-1)   --link L  replace the GPU's link\n"
    "  --placement P      host | hbm | layers:L | planes:t\n"
    "  --index-layout L   sparq/fathom planes on the host: contiguous (default) | chunked\n"
    "  --max-context N    contiguous index: tokens each plane run is reserved for (default: the context)\n"
    "  --layout L         split | interleaved | token | page\n"
    "  --select S         group (default) | kv_head | query_head | shared   --union U  rows in units of k (group, query_head)\n"
    "  --kv-dtype D       bf16 | fp8                      --weight-dtype D  bf16 | fp8\n"
    "  --fetch F          winner fetch: sm | ce           --index-fetch F   sm | ce | auto\n"
    "  --store S          sparq storage: 4bit | bf16      --k-from-planes true|false\n"
    "  --prefill T        plan a prefill chunk of T tokens instead of a decode step\n"
    "  --prefill-mode M   exact | sparse                  --prefetch N  layers fetched ahead\n"
    "  --plane-scan V     Fathom's plane-scan kernel: coalesced (default) | two_per_thread | token_per_thread\n"
    "  --winners W        SM winner fetch: repeat (default: mostly the last step's) | new (all new each step)\n"
    "  --plane-bits P     Fathom: plane bits per plan (instead of --budget)\n"
    "  --key-variances L  Fathom's key-channel variances, '[v0, v1, ...]' (default: log-normal with outliers)\n"
    "  --sessions S       sessions for the footprint total (default 1)\n"
    "  --emit-replay FILE also write the plan as a replay workload (docs/replay.md) for kbench replay and\n"
    "                     odsim replay: one session, mode streams; the mapping is approximate (cli/plan_replay.h),\n"
    "                     a whole --plan's step exact\n"
    "  --plan FILE        a user plan (docs/plans.md): a whole plan (runs as method dense; --method may be left\n"
    "                     out) or edits of --method's plan\n"
    "  --show-yaml        print the plan as a whole user plan (YAML alone on stdout; approximate as\n"
    "                     --emit-replay's mapping)\n"
    "  --calib FILE       calibration profile (default " STUDY_DEFAULT_CALIBRATION ", as odsim run; none: presets)\n"
    "  --catalog DIR      catalog directory (default " STUDY_DEFAULT_CATALOG " under the data root: docs/data-root.md)\n"
    "  --json             the same as JSON, every figure named with its unit\n",
    plan_main,
};
