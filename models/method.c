#include "models/method.h"
#include "common/str.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "models/method_ops.h"

const char *const method_select_names[] = {"kv_head", "query_head", "shared", "group", "default", NULL};
#define select_names method_select_names
static const char *const layout_names[] = {"split", "interleaved", "token", "page", "default", NULL};
static const char *const fetch_names[] = {"sm", "ce", NULL};
static const char *const index_fetch_names[] = {"sm", "ce", "auto", NULL};
const char *const method_index_layout_names[] = {"contiguous", "chunked", "default", NULL};
static const char *const prefill_names[] = {"exact", "sparse", NULL};
static const char *const tier_names[] = {"dram", "cxl", NULL};
static const char *const kv_place_names[] = {"host", "hbm", NULL};
/* Fathom's plane-scan kernels (kernels/scan_planes.cu): their cost forms are v3 (none), v1, v2 */
static const char *const plane_scan_names[] = {"coalesced", "token_per_thread", "two_per_thread", NULL};
static const char *const plane_scan_forms[] = {NULL, "v1", "v2"};
static const char *const winners_names[] = {"repeat", "new", NULL};

#define P_(key, type, field, dflt, lo, hi, ch, doc) {key, type, offsetof(method_cfg_t, field), dflt, lo, hi, ch, doc}
static const cfg_param_t method_params[] = {
    P_("method", CFG_T_ENUM, method, NULL, 1, 0, NULL, "the attention method (models/methods/)"),
    P_("budget", CFG_T_DOUBLE, budget_bits, "0", 0, 65536, NULL,
       "index bits read per token per KV head, scales included (0: pertoken/sparq 136, fathom 56, fixed for hashattn/landmark)"),
    P_("k", CFG_T_INT, k, "512", 1, 1e9, NULL, "selected tokens per selection set (per query head, KV head or all heads; the papers' headline setting 512)"),
    P_("page", CFG_T_INT, page, "16", 1, 4096, NULL, "P: tokens per landmark page"),
    P_("chunk", CFG_T_INT, chunk, "1024", 64, 1 << 24, NULL, "T: tokens per flushed chunk, a multiple of 64"),
    P_("window", CFG_T_INT, window, "0", 0, 1e12, NULL, "W: dense HBM tokens, the latest W (sinks, local window, open chunk); the open chunk (context mod T) is dense whatever W"),
    P_("select", CFG_T_ENUM, select, "default", 1, 0, select_names,
       "GQA selection: per KV head (k rows), per query head (a KV head fetches the union of G sets, u·k rows), shared by all KV heads, or group (per KV head on its G query heads' pooled scores, u·k rows: the size of their union); default: group for every method (token layout: shared)"),
    P_("union", CFG_T_DOUBLE, union_factor, "0", 0, 4096, NULL,
       "u: rows per KV head in units of k with select query_head or group, in [1, G]; 0: (1 + G)/2 (assumed)"),
    P_("layout", CFG_T_ENUM, layout, "default", 1, 0, layout_names,
       "host K/V layout: split, interleaved, token (needs select shared), page (needs landmark); default: landmark page, else interleaved"),
    P_("placement", CFG_T_STRING, placement, "host", 1, 0, NULL, "index placement: host | hbm | layers:L | planes:t"),
    P_("kv_dtype", CFG_T_ENUM, kv_dtype, "bf16", 1, 0, llm_dtype_names, "K/V element type on the host"),
    P_("weight_dtype", CFG_T_ENUM, weight_dtype, "bf16", 1, 0, llm_dtype_names, "weight element type"),
    P_("k_from_planes", CFG_T_BOOL, k_from_planes, "false", 1, 0, NULL,
       "winner keys as 4-bit keys (d/2 + d/32 bytes) instead of K rows; host keeps K only at 4 bits"),
    P_("store", CFG_T_ENUM, store, "4bit", 1, 0, method_store_names, "sparq storage: 4-bit planes + scales, or bf16 channel-major"),
    P_("fetch", CFG_T_ENUM, fetch, "sm", 1, 0, fetch_names, "winner fetch: SM zero-copy gather or copy-engine batched copy"),
    P_("winners", CFG_T_ENUM, winners, "repeat", 1, 0, winners_names,
       "SM winner fetch: winners mostly the last step's (repeat: their address translations cached from the step before) or all new each step (new: every row a first touch, slower past 512 MiB)"),
    P_("index_fetch", CFG_T_ENUM, index_fetch, "auto", 1, 0, index_fetch_names,
       "index fetch: SM gather, or copy engine (contiguous runs; per-query planes: one batched copy of the plane runs, or with index_layout chunked one 2D copy per KV head and channel); auto: for sparq and fathom the faster of the two for the layout, else ce"),
    P_("index_layout", CFG_T_ENUM, index_layout, "default", 1, 0, method_index_layout_names,
       "channel-major index (sparq, fathom) on the host: contiguous (each layer, KV head, channel and plane one run reserved for max_context; a flush a strided 2D copy per layer and KV head) or chunked (channel-major within each flushed chunk of T tokens); default: contiguous"),
    P_("max_context", CFG_T_INT, max_context, "0", 0, 1e12, NULL,
       "contiguous index layout: tokens each run is reserved for, the session's maximum context (counted in the footprint); 0: the context at hand"),
    P_("prefill", CFG_T_ENUM, prefill, "exact", 1, 0, prefill_names, "prefill chunks: exact (all K/V) or sparse (scan per chunk)"),
    P_("prefill_union", CFG_T_DOUBLE, prefill_union, "8", 1, 1e9, NULL,
       "sparse prefill: rows per KV head per chunk in units of k (assumed)"),
    P_("prefetch", CFG_T_INT, prefetch, "1", 0, 8, NULL, "layers of index/K-V fetched ahead (buffers per layer - 1)"),
    P_("tier", CFG_T_ENUM, tier, "dram", 1, 0, tier_names, "where host-side K/V and index live: host DRAM or the CXL tier"),
    P_("kv_placement", CFG_T_ENUM, kv_placement, "host", 1, 0, kv_place_names,
       "K/V offloaded to the host (read over the link), or kept whole in HBM (winners read in place)"),
    P_("plane_scan", CFG_T_ENUM, plane_scan, "coalesced", 1, 0, plane_scan_names,
       "Fathom's plane-scan kernel: coalesced (32 tokens per lane, 128-byte plane rows), two_per_thread, token_per_thread"),
    P_("plane_bits", CFG_T_INT, plane_bits, "0", 0, 4096, NULL,
       "Fathom: plane bits per plan, fixed (budget then follows: their mean reads with scales); 0: the largest whose mean reads meet budget"),
    P_("key_variances", CFG_T_NODE, key_variances_node, NULL, 1, 0, NULL,
       "Fathom: the variance of each key channel, a list of head_dim positive numbers (measured keys, or a measured run's key_sigma2 header line); absent: log-normal with outliers (chosen: 48 plane bits touch 30-34 of 128 channels)"),
    P_("plan", CFG_T_STRING, plan, "", 1, 0, NULL,
       "a user plan file (docs/plans.md): edits of this method's plan, or a whole plan (then method dense and no other key); a relative path is found beside the scenario file first"),
    P_("seed", CFG_T_INT, seed, "1", 0, 1e18, NULL, "seed of the Fathom planner's statistics"),
    P_("queries", CFG_T_INT, queries, "512", 16, 1e7, NULL, "queries sampled by the Fathom planner's statistics"),
};
#undef P_
#define N_METHOD_PARAMS (sizeof method_params / sizeof method_params[0])

/* The parameters with the method key's choices: the methods registered now (method_ops.h). */
static void params_now(cfg_param_t *out)
{
    memcpy(out, method_params, sizeof method_params);
    out[0].choices = method_names();
}

static int bind_key_variances(const cfg_node_t *n, method_cfg_t *out, err_t *e)
{
    if (!n) return ERR_OK;
    if (cfg_kind(n) != CFG_SEQ || cfg_size(n) < 1 || cfg_size(n) > METHOD_MAX_CHANNELS)
        return cfg_error(e, ERR_INVAL, n, "expected a list of 1 to %d per-channel variances", METHOD_MAX_CHANNELS);
    out->n_key_variances = (int)cfg_size(n);
    for (size_t i = 0; i < cfg_size(n); i++) {
        const cfg_node_t *v = cfg_at(n, i);
        int rc = cfg_double(v, &out->key_variances[i], e);
        if (rc) return rc;
        if (!(out->key_variances[i] > 0))
            return cfg_error(e, ERR_RANGE, v, "a channel's variance must be positive, not %g", out->key_variances[i]);
    }
    return ERR_OK;
}

int method_cfg_bind(const cfg_node_t *node, method_cfg_t *out, err_t *e)
{
    cfg_param_t params[N_METHOD_PARAMS];
    params_now(params);
    memset(out, 0, sizeof *out);
    int rc = cfg_bind(node, params, N_METHOD_PARAMS, out, e);
    if (!rc) rc = bind_key_variances(out->key_variances_node, out, e);
    out->key_variances_node = NULL;   /* read: the document need not outlive the configuration */
    return rc;
}

void method_cfg_describe(FILE *fp)
{
    cfg_param_t params[N_METHOD_PARAMS];
    params_now(params);
    cfg_params_describe(fp, "method", params, N_METHOD_PARAMS);
}

struct method {
    method_cfg_t cfg;
    const method_ops_t *ops;
    char placement[64];
    llm_t m;                 /* name and origin copied */
    method_select_t select;
    method_layout_t layout;
    method_place_t place;
    int place_arg;           /* t of planes:t */
    bool hbm_layer[1024];    /* layers:... : which layers keep their index in HBM */
    double u;                /* union factor */
    method_index_t ix;       /* what the method's budget rule resolved */
    double e;                /* K/V element bytes */
};

static int check_dense_placement(const method_t *mt, err_t *e)
{
    if (mt->ops->reads_all && mt->place != PLACE_HOST)
        return err_set(e, ERR_INVAL, "placement '%s': %s keeps no index (use host)", mt->placement, mt->ops->name);
    return ERR_OK;
}

static int parse_placement(method_t *mt, err_t *e)
{
    const char *p = mt->placement;
    char *end = NULL;
    if (!strcmp(p, "host")) mt->place = PLACE_HOST;
    else if (!strcmp(p, "hbm")) mt->place = PLACE_HBM;
    else if (!strncmp(p, "layers:", 7)) {
        /* layers:L = the first L layers; layers:a-b,c,... = those layers */
        bool list = strchr(p + 7, '-') || strchr(p + 7, ',');
        const char *q = p + 7;
        mt->place = PLACE_LAYERS;
        for (;;) {
            long a = strtol(q, &end, 10), b = a;
            if (end == q || a < 0) break;
            if (*end == '-') {
                const char *r = end + 1;
                b = strtol(r, &end, 10);
                if (end == r) break;
            }
            if (!list) a = 0, b = b - 1;
            if (b >= mt->m.layers || (list && b < a)) break;
            for (long l = a; l <= b; l++) mt->hbm_layer[l] = true;
            if (!*end) return check_dense_placement(mt, e);
            if (*end != ',') break;
            q = end + 1;
        }
        return err_set(e, ERR_INVAL, "placement '%s': expected layers:L (the first L of %d layers) or layers:a-b,c,...",
                       p, mt->m.layers);
    } else if (!strncmp(p, "planes:", 7)) {
        long v = strtol(p + 7, &end, 10);
        if (end == p + 7 || *end || v < 0 || v > FATHOM_MAX_BITS)
            return err_set(e, ERR_INVAL, "placement '%s': t must be an integer in [0, 4]", p);
        if (!mt->ix.planes)
            return err_set(e, ERR_INVAL, "placement '%s' splits bit planes: %s keeps no planes%s", p, mt->ops->name,
                           mt->ops->plane_read_bits ? " with this storage" : "");
        mt->place = PLACE_PLANES;
        mt->place_arg = (int)v;
    } else {
        return err_set(e, ERR_INVAL, "placement '%s': expected host, hbm, layers:L or planes:t", p);
    }
    return check_dense_placement(mt, e);
}

/* Whether the method's table names scan form `form` (models/cost.h: <family>_<form>). */
static bool has_form(const method_ops_t *ops, const char *form)
{
    for (int i = 0; ops->scan_family && ops->scan_forms && ops->scan_forms[i]; i++)
        if (!strcmp(ops->scan_forms[i], form)) return true;
    return false;
}

/* The selection every method takes by default, so that k means the same rows for all of them: k per
 * query head, one selection per KV head on its G query heads' pooled scores (one score vector per KV
 * head, as Fathom's shared read plan scores them), as many rows as the union of G per-query-head
 * sets holds, u·k (u = (1 + G)/2 unless given). It reproduces the published winner volume
 * (published-quality.md, Fathom): Qwen3-8B at k = 512 fetches 36 layers × 8 KV heads × 2.5 × 512 rows
 * × 512 B (K and V of d = 128 in bf16) = 189 MB of winner rows per step, the paper's "about 200 MB";
 * k rows per KV head would fetch 75 MB, k per query head without a union 302 MB
 * (tests/models/test_selection.c). Per-query-head selection fetches as many rows but scores and
 * selects G times over. */
#define METHOD_SELECT_RULE SELECT_GROUP

static int resolve_selection(method_t *mt, err_t *e)
{
    const method_cfg_t *c = &mt->cfg;
    double G = llm_group(&mt->m);
    const method_ops_t *ops = mt->ops;
    mt->layout = c->layout == LAYOUT_DEFAULT ? ops->layout : (method_layout_t)c->layout;
    if (c->select != SELECT_DEFAULT) mt->select = (method_select_t)c->select;
    else if (mt->layout == LAYOUT_TOKEN) mt->select = SELECT_SHARED;
    else mt->select = ops->reads_all ? SELECT_KV_HEAD : METHOD_SELECT_RULE;
    if (mt->layout == LAYOUT_TOKEN && mt->select != SELECT_SHARED && !ops->reads_all)
        return err_set(e, ERR_INVAL,
                       "layout token keeps all KV heads of a token together: it pays only with one selection shared by the KV heads (select shared), not select %s",
                       select_names[mt->select]);
    if (mt->layout == LAYOUT_PAGE && !ops->pages)
        return err_set(e, ERR_INVAL, "layout page fetches whole pages of %lld tokens: it needs page-granular selection (landmark), not %s",
                       (long long)c->page, ops->name);
    mt->u = 1.0;
    if (mt->select == SELECT_QUERY_HEAD || mt->select == SELECT_GROUP) {
        mt->u = c->union_factor > 0 ? c->union_factor : (1.0 + G) / 2.0;
        if (mt->u < 1.0 || mt->u > G)
            return err_set(e, ERR_RANGE, "union factor %g outside [1, G = %g]: the union of G per-query-head sets holds between k and G·k rows",
                           mt->u, G);
    } else if (c->union_factor > 0 && c->union_factor != 1.0) {
        return err_set(e, ERR_INVAL, "union %g needs per-query-head or group selection (select query_head or group)", c->union_factor);
    }
    if (c->chunk % 64)
        return err_set(e, ERR_INVAL, "chunk %lld: a chunk holds whole 64-token scale blocks (a multiple of 64)", (long long)c->chunk);
    /* only a channel-major index (read by per-query channel prefixes) has a layout to choose */
    if (mt->cfg.index_layout == INDEX_LAYOUT_DEFAULT) mt->cfg.index_layout = INDEX_CONTIGUOUS;
    else if (!ops->query_dependent && mt->cfg.index_layout == INDEX_CHUNKED)
        return err_set(e, ERR_INVAL, "index_layout chunked stores a channel-major index chunk by chunk: %s keeps %s", ops->name,
                       ops->reads_all ? "no index" : "its index token-major, one run per head");
    if (c->k_from_planes && ops->reads_all)
        return err_set(e, ERR_INVAL, "k_from_planes: %s reads every K row, there are no winners", ops->name);
    if ((c->plane_bits || c->n_key_variances) && !ops->planner)
        return err_set(e, ERR_INVAL, "%s: plane_bits and key_variances set Fathom's planner, not %s's",
                       c->plane_bits ? "plane_bits" : "key_variances", ops->name);
    if (c->n_key_variances && c->n_key_variances != mt->m.head_dim)
        return err_set(e, ERR_INVAL, "key_variances: %d channels given, %s's keys have %d", c->n_key_variances, mt->m.name,
                       mt->m.head_dim);
    if (c->plane_scan && !has_form(ops, plane_scan_forms[c->plane_scan]))
        return err_set(e, ERR_INVAL, "plane_scan %s: a plane-scan kernel of Fathom's, not %s's", plane_scan_names[c->plane_scan],
                       ops->name);
    if (c->plane_scan && mt->select == SELECT_QUERY_HEAD)
        return err_set(e, ERR_INVAL, "plane_scan %s with select query_head: Fathom's per-query-head scan is one kernel of its own",
                       plane_scan_names[c->plane_scan]);
    return ERR_OK;
}

const char *method_scan_form(const method_t *mt)
{
    if (mt->select == SELECT_QUERY_HEAD && has_form(mt->ops, "qh")) return "qh";
    return plane_scan_forms[mt->cfg.plane_scan];
}

int method_new(const method_cfg_t *cfg, const llm_t *m, method_t **out, err_t *e)
{
    *out = NULL;
    method_t *mt = calloc(1, sizeof *mt);
    if (!mt) return err_set(e, ERR_NOMEM, "method: out of memory");
    mt->cfg = *cfg;
    mt->ops = method_ops_at(cfg->method);
    /* auto stays for per-query planes: the provider picks the faster path per layer */
    if (mt->ops && mt->cfg.index_fetch == FETCH_AUTO && !mt->ops->query_dependent) mt->cfg.index_fetch = mt->ops->index_fetch;
    snprintf(mt->placement, sizeof mt->placement, "%s", cfg->placement ? cfg->placement : "host");
    mt->cfg.placement = mt->placement;
    mt->m = *m;
    mt->m.name = str_dup(m->name ? m->name : "");
    mt->m.origin = str_dup(m->origin ? m->origin : "");
    mt->e = llm_dtype_bytes((llm_dtype_t)cfg->kv_dtype);
    int rc = (mt->m.name && mt->m.origin) ? ERR_OK : err_set(e, ERR_NOMEM, "method: out of memory");
    if (!rc && !mt->ops) rc = err_set(e, ERR_INVAL, "method %d unknown", cfg->method);
    if (!rc && m->layers > 1024) rc = err_set(e, ERR_RANGE, "model '%s' has %d layers (at most 1024)", m->name, m->layers);
    if (!rc) rc = resolve_selection(mt, e);
    if (!rc) rc = mt->ops->resolve(&mt->cfg, &mt->m, mt->e, &mt->ix, e);
    if (!rc) rc = parse_placement(mt, e);
    if (rc) {
        method_free(mt);
        return rc;
    }
    *out = mt;
    return ERR_OK;
}

void method_free(method_t *mt)
{
    if (!mt) return;
    llm_free(&mt->m);
    free(mt);
}

const method_cfg_t *method_cfg(const method_t *mt) { return &mt->cfg; }
const llm_t *method_llm(const method_t *mt) { return &mt->m; }
method_select_t method_select(const method_t *mt) { return mt->select; }
method_layout_t method_layout(const method_t *mt) { return mt->layout; }
double method_union(const method_t *mt) { return mt->u; }
double method_budget_bits(const method_t *mt) { return mt->ix.budget_bits; }
double method_budget_asked(const method_t *mt) { return mt->ix.asked_bits > 0 ? mt->ix.asked_bits : mt->ix.budget_bits; }
double method_stored_bits(const method_t *mt) { return mt->ix.stored_bits; }
const fathom_stats_t *method_fathom(const method_t *mt) { return mt->ix.planned ? &mt->ix.fs : NULL; }
const char *method_name(const method_t *mt) { return mt->ops->name; }
const method_ops_t *method_table(const method_t *mt) { return mt->ops; }
const method_index_t *method_index(const method_t *mt) { return &mt->ix; }

double method_kv_row_bytes(const method_t *mt)
{
    double d = mt->m.head_dim;
    double k = mt->cfg.k_from_planes ? d / 2.0 + d / 32.0 : d * mt->e;
    return k + d * mt->e;
}

/* Bits per token per KV head of the planes beyond the first t (host side of planes:t), for reads
 * (`stored` false: what a decode step reads) or storage. */
static double planes_host_bits(const method_t *mt, int t, bool stored)
{
    return stored ? method_plane_bits(mt->m.head_dim, t) : mt->ops->plane_read_bits(&mt->ix, t);
}

static void split_bits(const method_t *mt, int layer, bool stored, double *host_bits, double *hbm_bits)
{
    double total = stored ? mt->ix.stored_bits : mt->ix.budget_bits;
    double host = total;
    switch (mt->place) {
    case PLACE_HOST: break;
    case PLACE_HBM: host = 0; break;
    case PLACE_LAYERS: host = mt->hbm_layer[layer] ? 0 : total; break;
    case PLACE_PLANES: host = planes_host_bits(mt, mt->place_arg, stored); break;
    }
    if (mt->ops->reads_all) host = total = 0;
    *host_bits = host;
    *hbm_bits = total - host;
}

void method_index_split(const method_t *mt, int layer, double *host_bits, double *hbm_bits)
{
    split_bits(mt, layer, true, host_bits, hbm_bits);
}

uint64_t method_flushed_tokens(const method_t *mt, uint64_t context, uint32_t new_tokens)
{
    uint64_t T = (uint64_t)mt->cfg.chunk;
    return ((context + new_tokens) / T - context / T) * T;
}

double method_offloaded_tokens(const method_t *mt, uint64_t context)
{
    /* the window holds the latest W tokens, the open chunk at least the latest n mod T */
    uint64_t open = context % (uint64_t)mt->cfg.chunk;
    return fmax(0.0, (double)context - fmax((double)mt->cfg.window, (double)open));
}

double method_dense_tokens(const method_t *mt, uint64_t context)
{
    return (double)context - method_offloaded_tokens(mt, context);
}

/* whether the index is channel-major in runs reserved for the whole session */
static bool contiguous_planes(const method_t *mt)
{
    return mt->ops->query_dependent && mt->cfg.index_layout == INDEX_CONTIGUOUS;
}

double method_index_span_tokens(const method_t *mt, double n_off)
{
    return contiguous_planes(mt) ? fmax(n_off, (double)mt->cfg.max_context - (double)mt->cfg.window) : n_off;
}

void method_layer(const method_t *mt, int layer, uint64_t context, uint32_t new_tokens, bool prefill,
                  method_layer_t *o)
{
    const method_cfg_t *c = &mt->cfg;
    const llm_t *m = &mt->m;
    double H = m->kv_heads, Hq = m->q_heads, G = llm_group(m), d = m->head_dim;
    double nt = new_tokens;
    memset(o, 0, sizeof *o);
    double n_off = method_offloaded_tokens(mt, context);
    o->n_off = n_off;
    double row = method_kv_row_bytes(mt);          /* K + V per token per KV head on the host */
    double dense_row = 2.0 * d * mt->e;
    double tail_tokens = method_dense_tokens(mt, context) + nt;   /* the window or the open chunk */
    o->tail_hbm_bytes = tail_tokens * H * 2.0 * d * 2.0;
    o->tail_flops = 4.0 * d * Hq * tail_tokens * nt;
    bool reads_all = mt->ops->reads_all;
    o->kv_region_bytes = n_off * H * (reads_all ? dense_row : row);
    bool exact = reads_all || (prefill && c->prefill == PREFILL_EXACT);
    double kv_pieces_per_head = mt->layout == LAYOUT_SPLIT ? 2.0 : 1.0;

    /* chunks completed by this plan go device→host */
    double tf = (double)method_flushed_tokens(mt, context, new_tokens);
    double sh_bits, sb_bits;
    split_bits(mt, layer, true, &sh_bits, &sb_bits);
    bool kv_hbm = c->kv_placement == KV_HBM;
    int t = mt->place == PLACE_PLANES ? mt->place_arg : 0;
    if (tf > 0) {
        double kv = kv_hbm ? 0 : reads_all ? dense_row : row;
        double kv_pieces = kv_hbm ? 0 : mt->layout == LAYOUT_TOKEN ? 1.0 : H * kv_pieces_per_head;
        o->flush_bytes = tf * H * (kv + sh_bits / 8.0);
        if (sh_bits > 0 && contiguous_planes(mt)) {
            /* a row into each host plane and each channel's scales (bf16 channels: a row each) */
            o->flush_index_bytes = tf * H * sh_bits / 8.0;
            o->flush_index_copies = H;
            o->flush_index_rows = H * (mt->ix.planes ? method_plane_pieces(d, t) : d);
            o->flush_pieces = kv_pieces + o->flush_index_rows;
        } else {
            o->flush_pieces = kv_pieces + (sh_bits > 0 ? H : 0);
        }
        if (!reads_all) o->quantize_bytes = tf * H * (d * 2.0 + (sh_bits + sb_bits) / 8.0);
    }

    if (exact) {
        o->attn_hbm_bytes = n_off * H * dense_row;
        o->kv_host_bytes = kv_hbm ? 0 : o->attn_hbm_bytes;
        o->kv_pieces = n_off > 0 && !kv_hbm ? (mt->layout == LAYOUT_TOKEN ? 1.0 : H * kv_pieces_per_head) : 0;
        o->attn_flops = 4.0 * d * Hq * n_off * nt + (prefill ? 2.0 * d * Hq * nt * nt : 0);
        return;
    }

    /* the scan: decode reads `budget` bits, a prefill chunk the whole stored index */
    double host_bits, hbm_bits;
    split_bits(mt, layer, prefill, &host_bits, &hbm_bits);
    o->index_host_bytes = host_bits * n_off * H / 8.0;
    o->index_hbm_bytes = hbm_bits * n_off * H / 8.0;
    o->hbm_index = host_bits == 0;
    o->index_pieces = (host_bits > 0 && n_off > 0) ? H * mt->ops->index_pieces(&mt->ix, c, m, n_off, t, prefill) : 0;
    o->index_region_bytes = sh_bits * method_index_span_tokens(mt, n_off) * H / 8.0;
    o->scan_flops = 2.0 * G * (o->index_host_bytes + o->index_hbm_bytes) * nt;

    /* top-k and the winners */
    double P = mt->ops->pages ? (double)c->page : 1.0;
    double per_head_scores = n_off / P;
    double sets = mt->select == SELECT_QUERY_HEAD ? Hq : mt->select == SELECT_SHARED ? 1.0 : H;
    /* a sparse prefill chunk pools its queries' scores into one selection per set (prefill_union·k
     * rows), tile by tile on chip: one score vector per set reaches HBM, as in decode */
    o->scores = per_head_scores * sets;
    o->score_rows = sets;
    double k = (double)c->k;
    double want = prefill ? c->prefill_union * k : mt->u * k;
    /* a group's pooled selection keeps its union's rows; a query head its own k */
    double keep = prefill ? c->prefill_union * k : mt->select == SELECT_GROUP ? mt->u * k : k;
    o->select_k = fmin(ceil(keep / P), per_head_scores);
    double units = fmin(ceil(want / P), ceil(n_off / P));     /* pages (P = 1: rows) per KV head */
    if (n_off <= 0) units = 0;
    double rows_per_head = fmin(units * P, n_off);
    o->winner_rows = rows_per_head * H;
    o->winner_host_bytes = kv_hbm ? 0 : o->winner_rows * row;
    switch (mt->layout) {
    case LAYOUT_SPLIT: o->winner_pieces = 2.0 * units * H; break;
    case LAYOUT_INTERLEAVED:
    case LAYOUT_PAGE: o->winner_pieces = units * H; break;
    case LAYOUT_TOKEN: o->winner_pieces = units; break;
    case LAYOUT_DEFAULT: break;
    }
    if (kv_hbm) o->winner_pieces = 0;
    o->attn_hbm_bytes = o->winner_rows * row;
    double rows_per_query = fmin(fmin(mt->select == SELECT_GROUP ? mt->u * k : k, n_off), rows_per_head);
    o->attn_flops = 4.0 * d * Hq * rows_per_query * nt + (prefill ? 2.0 * d * Hq * nt * nt : 0);
}
