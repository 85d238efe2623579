#include "models/provider.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "models/footprint.h"
#include "models/method_ops.h"
#include "models/opkind.h"

enum { STREAM_COMPUTE = 0, STREAM_H2D = 1, STREAM_GATHER = 2, STREAM_D2H = 3 };
enum { GEMM_QKV = 0, GEMM_OMLP = 1, GEMM_HEAD = 2 };

struct provider {
    method_t *mt;
    bool own_mt;              /* mt is freed with the provider (provider_new) or borrowed */
    const hw_t *hw;
    const cost_t *cost;       /* own_cost, or one shared by the sessions of a run */
    cost_t *own_cost;
    cost_t quiet;             /* the same forms noting nothing: to weigh a path not taken */
    cost_paths_t paths;
    const sim_t *paths_sim;
    int paths_gpu;
    cost_gemm_t gemm[3];      /* models of the plan being built; outlive its execution */
};

int provider_new_costed(const method_t *mt, const hw_t *hw, const cost_t *cost, provider_t **out, err_t *e)
{
    *out = NULL;
    const method_cfg_t *cfg = method_cfg(mt);
    int rc = ERR_OK;
    if (cfg->weight_dtype == LLM_FP8 && cost->fp8_flops <= 0)
        rc = err_set(e, ERR_INVAL, "weight_dtype fp8: the %s has no FP8 tensor cores (fp8_TFLOPS = 0)", hw->gpu);
    if (!rc && cfg->tier == TIER_CXL && !hw->tier)
        rc = err_set(e, ERR_INVAL, "tier cxl: box '%s' has no memory tier (tiers.yaml)", hw->box);
    provider_t *p = rc ? NULL : calloc(1, sizeof *p);
    if (!rc && !p) rc = err_set(e, ERR_NOMEM, "provider: out of memory");
    if (rc) return rc;
    p->hw = hw;
    p->paths_gpu = -1;
    p->mt = (method_t *)mt;
    p->cost = cost;
    p->quiet = *cost;
    p->quiet.cal = NULL;
    *out = p;
    return ERR_OK;
}

int provider_new_shared(const method_t *mt, const hw_t *hw, calib_t *cal, provider_t **out, err_t *e)
{
    *out = NULL;
    cost_t *own = malloc(sizeof *own);
    int rc = own ? cost_init(own, cal, e) : err_set(e, ERR_NOMEM, "provider: out of memory");
    if (!rc) rc = provider_new_costed(mt, hw, own, out, e);
    if (rc) {
        free(own);
        return rc;
    }
    (*out)->own_cost = own;
    return ERR_OK;
}

int provider_new(const method_cfg_t *cfg, const llm_t *m, const hw_t *hw, calib_t *cal, provider_t **out,
                 err_t *e)
{
    method_t *mt = NULL;
    int rc = method_new(cfg, m, &mt, e);
    if (!rc) rc = provider_new_shared(mt, hw, cal, out, e);
    if (rc) {
        method_free(mt);
        return rc;
    }
    (*out)->own_mt = true;
    return ERR_OK;
}

void provider_free(provider_t *p)
{
    if (!p) return;
    if (p->own_mt) method_free(p->mt);
    free(p->own_cost);
    free(p);
}

const method_t *provider_method(const provider_t *p) { return p->mt; }

bool provider_prefill_formulas(const plan_request_t *req)
{
    return req->phase == PLAN_PREFILL && req->new_tokens > PROVIDER_DECODE_MAX_TOKENS;
}

const cost_t *provider_cost(const provider_t *p) { return p->cost; }

/* A copy-engine fetch of per-query planes, costed by `cost`: the host needs the plan first. Chunked,
 * it issues one 2D copy per (KV head, active channel), one after another on the copy stream, each a
 * row per chunk (the channel's plane prefix), rows a chunk apart in host memory: the chain costs one
 * copy setup and then ce2d_copy per further copy (fitted on such chains: the host issues the next
 * copy while the engine runs the one before). Contiguous, one batched copy of the plan's plane and
 * scale runs (cebatch_piece each). */
static void ce_planes_op(const provider_t *p, const cost_t *cost, const method_layer_t *ly, plan_op_t *op)
{
    const method_cfg_t *c = method_cfg(p->mt);
    memset(op, 0, sizeof *op);
    op->weight = 1.0;
    if (c->index_layout == INDEX_CONTIGUOUS) {
        cost_transfer(cost, &p->paths, COST_CE_BATCH, true, ly->index_host_bytes, ly->index_pieces, ly->index_region_bytes,
                      COST_GATHER_STEP, op);
    } else {
        double active = method_table(p->mt)->plan_channels(method_index(p->mt));
        double copies = fmax(1.0, active * method_llm(p->mt)->kv_heads);
        double rows = copies * ceil(ly->n_off / (double)c->chunk);
        cost_transfer(cost, &p->paths, COST_CE_STRIDED, true, ly->index_host_bytes, rows, ly->index_region_bytes,
                      COST_GATHER_STEP, op);
        op->cost.latency_ps = cost_ps(cost->ce_latency_s + (calib_x(cost->cal, "ce2d_copy_us", copies) - 1) * cost->ce2d_copy_s);
        op->launch_ps = cost_ps(cost->copy_launch_s);
        calib_note(cost->cal, "ce2d_copy_us", copies);
    }
    op->host_sync = true;
}

/* Whether index_fetch auto fetches a query's planes of a layer shaped ly with the SMs: the faster
 * alone of the SM prefix gather and the copy engine's path for the layout (the SM on a tie or where
 * either cannot be timed). */
static bool auto_planes_by_sm(const provider_t *p, const method_layer_t *ly)
{
    plan_op_t sm, ce;
    memset(&sm, 0, sizeof sm);
    cost_transfer(&p->quiet, &p->paths, COST_SM_PREFIX, true, ly->index_host_bytes, ly->index_pieces,
                  ly->index_region_bytes, COST_GATHER_ALONE, &sm);
    ce_planes_op(p, &p->quiet, ly, &ce);
    sim_ps_t t_sm, t_ce;
    err_t e;
    if (plan_op_alone_ps(&sm, p->paths_sim, &t_sm, &e) || plan_op_alone_ps(&ce, p->paths_sim, &t_ce, &e)) return true;
    return t_sm + sm.launch_ps <= t_ce + ce.launch_ps;
}

cost_xfer_t provider_fetch_form(const provider_t *p, int kind, bool prefill, const method_layer_t *ly)
{
    const method_cfg_t *c = method_cfg(p->mt);
    if (kind == OPKIND_INDEX_FETCH) {
        const method_ops_t *ops = method_table(p->mt);
        bool query_dependent = !prefill && ops->query_dependent;
        int path = c->index_fetch;
        if (path == FETCH_AUTO)
            path = !query_dependent ? ops->index_fetch : !ly || auto_planes_by_sm(p, ly) ? FETCH_SM : FETCH_CE;
        return path != FETCH_SM ? COST_CE : query_dependent ? COST_SM_PREFIX : COST_SM_GATHER;
    }
    /* the winners come head by head, each head's from its own part of the region (but for a token
     * layout, whose rows hold every head) */
    return c->fetch != FETCH_SM                   ? COST_CE_BATCH
           : method_layout(p->mt) == LAYOUT_TOKEN ? COST_SM_GATHER
           : c->winners                           ? COST_SM_HEADS_NEW
                                                  : COST_SM_HEADS;
}

static uint64_t merge_key(const llm_t *m, int dtype, int phase, uint32_t tokens, int layer, int which)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = m->name; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    uint64_t v[5] = {(uint64_t)dtype, (uint64_t)phase, tokens, (uint64_t)(layer + 1), (uint64_t)which};
    for (int i = 0; i < 5; i++) h = (h ^ v[i]) * 1099511628211ULL;
    return h ? h : 1;
}

/* The op being assembled and where it goes. */
typedef struct builder {
    provider_t *p;
    plan_t *out;
    err_t *e;
    cost_gather_at_t gather_at; /* where its SM gathers run (the layer's) */
    double evicting;            /* COST_GATHER_AFTER: the translations the gather before touched */
    double step_translations;   /* what the step's SM gathers touch, every layer's (cost_transfer_step) */
} builder_t;

static int add(builder_t *b, plan_op_t *op, const uint32_t *deps, uint32_t n_deps, uint32_t *id)
{
    /* Dependencies named as UINT32_MAX mean "none" (a layer before the first). */
    uint32_t d[8], n = 0;
    for (uint32_t i = 0; i < n_deps; i++)
        if (deps[i] != UINT32_MAX) d[n++] = deps[i];
    for (uint32_t i = 0; i < n; i++)   /* the engine delays a kernel waiting on a copy by it */
        if (d[i] < b->out->n_ops && plan_handoff(&b->out->ops[d[i]], op)) calib_note(b->p->cost->cal, "ce_handoff_us", NAN);
    return plan_add(b->out, op, d, n, id, b->e);
}

static plan_op_t op_new(int kind, int layer, int stream)
{
    plan_op_t op;
    memset(&op, 0, sizeof op);
    op.kind = (uint16_t)kind;
    op.layer = layer < 0 ? PLAN_NO_LAYER : (uint16_t)layer;
    op.stream = (uint8_t)stream;
    op.weight = 1.0;
    return op;
}

/* kind's kernel over `bytes` of HBM; a scan over an index still in the L2 where `l2` */
static int add_kernel_l2(builder_t *b, int kind, int layer, double bytes, double flops, bool l2,
                         const uint32_t *deps, uint32_t n_deps, uint32_t *id)
{
    const method_cfg_t *c = method_cfg(b->p->mt);
    plan_op_t op = op_new(kind, layer, STREAM_COMPUTE);
    if (kind == OPKIND_SCAN) {
        const char *name = method_table(b->p->mt)->scan_family;
        int family = name ? cost_scan_form(cost_scan_family(name), method_scan_form(b->p->mt)) : -1;
        cost_scan(b->p->cost, &b->p->paths, family, l2, bytes, flops, method_budget_bits(b->p->mt),
                  (llm_dtype_t)c->kv_dtype, &op);
    } else
        cost_kernel(b->p->cost, &b->p->paths, kind, bytes, flops, (llm_dtype_t)c->kv_dtype, &op);
    cost_after_layer(b->p->cost, kind, &op);
    op.bytes_hbm = bytes;
    op.flops = flops;
    return add(b, &op, deps, n_deps, id);
}

static int add_kernel(builder_t *b, int kind, int layer, double bytes, double flops, const uint32_t *deps,
                      uint32_t n_deps, uint32_t *id)
{
    return add_kernel_l2(b, kind, layer, bytes, flops, false, deps, n_deps, id);
}

static int add_topk(builder_t *b, int layer, const method_layer_t *ly, const uint32_t *deps, uint32_t n_deps,
                    uint32_t *id)
{
    plan_op_t op = op_new(OPKIND_TOPK, layer, STREAM_COMPUTE);
    double rows = fmax(ly->score_rows, 1);
    cost_topk(b->p->cost, &b->p->paths, rows, ly->scores / rows, ly->select_k, &op);
    cost_after_layer(b->p->cost, OPKIND_TOPK, &op);
    cost_topk_scores_in_l2(b->p->cost, 4.0 * ly->scores, &op);   /* its scan has just written them */
    op.bytes_hbm = op.cost.work;
    return add(b, &op, deps, n_deps, id);
}

/* K/V rows the attention reads summed over the query heads (a row once per query head attending it):
 * attn_flops counts 4·head_dim per such row. */
static double query_rows(const builder_t *b, const method_layer_t *ly)
{
    return ly->attn_flops / (4.0 * method_llm(b->p->mt)->head_dim);
}

/* Attention over the winners: just written by the winner fetch, so read from the L2 where they fit.
 * From L2 its work is the bytes of query_rows: a GQA group's row costs its g queries' arithmetic,
 * not its bytes once. Winners chosen per query head are attended per query head (g = 1), a kernel
 * shape of its own (cost_attn_qh, cost_attn_l2's qh). */
static int add_attn_sparse(builder_t *b, int layer, const method_layer_t *ly, const uint32_t *deps, uint32_t n_deps,
                           uint32_t *id)
{
    bool qh = method_select(b->p->mt) == SELECT_QUERY_HEAD;
    plan_op_t op = op_new(OPKIND_ATTN_SPARSE, layer, STREAM_COMPUTE);
    if (!(ly->winner_rows > 0 && ly->attn_hbm_bytes <= b->p->cost->l2_bytes)) {
        if (!qh) return add_kernel(b, OPKIND_ATTN_SPARSE, layer, ly->attn_hbm_bytes, ly->attn_flops, deps, n_deps, id);
        cost_attn_qh(b->p->cost, &b->p->paths, ly->attn_hbm_bytes, ly->attn_flops,
                     (llm_dtype_t)method_cfg(b->p->mt)->kv_dtype, &op);
        op.bytes_hbm = ly->attn_hbm_bytes;
    } else {
        cost_attn_l2(b->p->cost, &b->p->paths, query_rows(b, ly) * ly->attn_hbm_bytes / ly->winner_rows, qh, &op);
    }
    cost_after_layer(b->p->cost, OPKIND_ATTN_SPARSE, &op);
    op.flops = ly->attn_flops;
    return add(b, &op, deps, n_deps, id);
}

/* The merge of a decode step's split-K partials, over the main attention's and the tail's, after both.
 * The partials are still in L2 unless the main attention streamed more than the L2 holds through it.
 * Per-query-head winners are attended per query head (Hq heads of k rows, one query each), so their
 * partials are merged on their own, and the tail's (per KV head, its g queries) after them. */
static int add_combine(builder_t *b, int layer, const method_layer_t *ly, bool exact, uint32_t attn, uint32_t tail,
                       uint32_t *id)
{
    const llm_t *m = method_llm(b->p->mt);
    double H = m->kv_heads, tail_rows = ly->tail_hbm_bytes / (4.0 * m->head_dim);
    double tail_splits = tail_rows > 0 ? cost_attn_splits(b->p->cost, tail_rows / H, H) : 0;
    bool l2 = ly->attn_hbm_bytes <= b->p->cost->l2_bytes;
    plan_op_t op = op_new(OPKIND_ATTN_COMBINE, layer, STREAM_COMPUTE);
    uint32_t deps[2] = {attn, tail};
    if (!exact && method_select(b->p->mt) == SELECT_QUERY_HEAD) {
        double Hq = m->q_heads;
        cost_attn_combine(b->p->cost, cost_attn_splits(b->p->cost, query_rows(b, ly) / Hq, Hq), l2, &op);
        int rc = add(b, &op, &attn, 1, &deps[0]);
        if (rc || tail_rows <= 0) {
            *id = deps[0];
            return rc;
        }
        cost_attn_combine(b->p->cost, tail_splits, true, &op);
        return add(b, &op, deps, 2, id);
    }
    double rows = exact ? ly->n_off * H : ly->winner_rows;
    cost_attn_combine(b->p->cost, cost_attn_splits(b->p->cost, rows / H, H) + tail_splits, l2, &op);
    return add(b, &op, deps, 2, id);
}

static int add_transfer(builder_t *b, int kind, int layer, cost_xfer_t form, bool h2d, double bytes, double pieces,
                        double region, const uint32_t *deps, uint32_t n_deps, uint32_t *id)
{
    int stream = !h2d ? STREAM_D2H : form == COST_CE || form == COST_CE_BATCH || form == COST_CE_STRIDED ? STREAM_H2D : STREAM_GATHER;
    plan_op_t op = op_new(kind, layer, stream);
    if (b->gather_at == COST_GATHER_AFTER && h2d)
        cost_transfer_after(b->p->cost, &b->p->paths, form, bytes, pieces, region, b->evicting, b->step_translations,
                            &op);
    else if (b->gather_at == COST_GATHER_STEP && h2d)
        cost_transfer_step(b->p->cost, &b->p->paths, form, bytes, pieces, region, b->step_translations, &op);
    else
        cost_transfer(b->p->cost, &b->p->paths, form, h2d, bytes, pieces, region, b->gather_at, &op);
    op.host_sync = h2d && form == COST_CE_BATCH && kind == OPKIND_WINNER_FETCH;
    op.bytes_host = bytes;
    op.bytes_hbm = bytes;
    return add(b, &op, deps, n_deps, id);
}

static int add_gemm(builder_t *b, int which, int layer, int phase, uint32_t tokens, const uint32_t *deps,
                    uint32_t n_deps, uint32_t *id)
{
    const method_cfg_t *c = method_cfg(b->p->mt);
    const llm_t *m = method_llm(b->p->mt);
    double wb = llm_dtype_bytes((llm_dtype_t)c->weight_dtype), d = m->head_dim;
    double params, act;
    if (which == GEMM_QKV) {
        params = (double)m->hidden * (m->q_heads + 2.0 * m->kv_heads) * d;
        act = ((double)m->hidden + (m->q_heads + 2.0 * m->kv_heads) * d) * 2.0;
    } else if (which == GEMM_OMLP) {
        params = llm_attn_params(m) - (double)m->hidden * (m->q_heads + 2.0 * m->kv_heads) * d + llm_mlp_params(m);
        act = ((double)m->q_heads * d + 2.0 * m->hidden + 3.0 * m->ffn) * 2.0;
    } else {
        params = llm_head_params(m);
        act = ((double)m->hidden + m->vocab) * 2.0;
        tokens = 1;
    }
    cost_gemm_t *g = &b->p->gemm[which];
    int kernels = which == GEMM_OMLP ? 3 : 1;   /* O, MLP up (gate and up fused), MLP down */
    cost_gemm_init(b->p->cost, params * wb, act, 2.0 * params, tokens, kernels, (llm_dtype_t)c->weight_dtype, g);
    plan_op_t op = op_new(which == GEMM_HEAD ? OPKIND_LM_HEAD : OPKIND_GEMM, layer, STREAM_COMPUTE);
    cost_gemm_op(b->p->cost, &b->p->paths, g, &op);
    op.merge_key = merge_key(m, c->weight_dtype, phase, tokens, layer, which);
    op.bytes_hbm = op.cost.work;
    op.flops = 2.0 * params * tokens;
    return add(b, &op, deps, n_deps, id);
}

/* The dirty bytes a layer's attention leaves in the L2 for its O projection to write back:
 * cost_l2_pass over its kernels in plan order. Data a kernel has just written is read back from the
 * L2 where it fits (the index the layer fetched itself, the scores, the winners, copied K/V). */
static double layer_dirty_bytes(const builder_t *b, const method_layer_t *ly, bool exact, bool fetched_here)
{
    const cost_t *c = b->p->cost;
    double L = c->l2_bytes;
    cost_l2_t l2 = {0};
    cost_l2_pass(c, &l2, ly->tail_hbm_bytes, 0);
    if (exact) {
        cost_l2_pass(c, &l2, 0, ly->kv_host_bytes);
        cost_l2_pass(c, &l2, ly->kv_host_bytes <= L ? ly->attn_hbm_bytes - ly->kv_host_bytes : ly->attn_hbm_bytes, 0);
        return l2.dirty_bytes;
    }
    double fetched = fetched_here ? ly->index_host_bytes : 0, scores = 4.0 * ly->scores;
    cost_l2_pass(c, &l2, 0, fetched);
    cost_l2_pass(c, &l2, ly->index_hbm_bytes + ly->index_host_bytes - (fetched <= L ? fetched : 0), scores);
    cost_l2_pass(c, &l2, scores <= L ? 0 : scores, 0);                                   /* top-k */
    bool in_place = !(ly->winner_host_bytes > 0);   /* K/V in HBM: the winners gathered there */
    double win = in_place ? (ly->winner_rows > 0 ? ly->attn_hbm_bytes : 0) : ly->winner_host_bytes;
    cost_l2_pass(c, &l2, in_place ? win : 0, win);
    cost_l2_pass(c, &l2, win <= L ? 0 : ly->attn_hbm_bytes, 0);                           /* attention */
    return l2.dirty_bytes;
}

/* The write-back of the layer's dirty L2 lines, between its attention (after `*dep`) and the O
 * projection, whose weight reads evict them; *dep becomes it. */
static int add_writeback(builder_t *b, int layer, double bytes, uint32_t *dep)
{
    if (!(bytes > 0)) return ERR_OK;
    plan_op_t op = op_new(OPKIND_L2_WRITEBACK, layer, STREAM_COMPUTE);
    cost_l2_writeback(b->p->cost, &b->p->paths, bytes, &op);
    op.bytes_hbm = bytes;
    return add(b, &op, dep, 1, dep);
}

static int resolve_paths(provider_t *p, const sim_t *sim, int gpu, err_t *e)
{
    if (p->paths_sim == sim && p->paths_gpu == gpu) return ERR_OK;
    const method_cfg_t *c = method_cfg(p->mt);
    int rc = cost_paths_resolve(p->cost, p->hw, sim, gpu, c->tier == TIER_CXL ? HWINST_CXL : HWINST_DRAM, &p->paths, e);
    if (rc) return rc;
    p->paths_sim = sim;
    p->paths_gpu = gpu;
    return ERR_OK;
}

/* The copy-engine fetch of a query's planes (ce_planes_op) into the plan. */
static int add_ce_planes(builder_t *b, int layer, const method_layer_t *ly, const uint32_t *dep, uint32_t *id)
{
    plan_op_t op;
    ce_planes_op(b->p, b->p->cost, ly, &op);
    op.kind = OPKIND_INDEX_FETCH;
    op.layer = (uint16_t)layer;
    op.stream = STREAM_H2D;
    op.bytes_host = op.bytes_hbm = ly->index_host_bytes;
    return add(b, &op, dep, 1, id);
}

/* A flush of a contiguous index: per KV head a strided 2D device-to-host copy, a row into each host
 * plane and scale run, one after another on the flush stream (as the index fetch's chains: one copy
 * setup, then ce2d_copy per further copy, ce2d_page_row per row as each row lands on its own pages). */
static int add_index_flush(builder_t *b, int layer, const method_layer_t *ly, const uint32_t *dep, uint32_t *id)
{
    const cost_t *cost = b->p->cost;
    int rc = add_transfer(b, OPKIND_FLUSH, layer, COST_CE_STRIDED, false, ly->flush_index_bytes, ly->flush_index_rows, 0, dep,
                          1, id);
    if (rc) return rc;
    plan_op_t *op = &b->out->ops[*id];
    op->cost.latency_ps =
        cost_ps(cost->ce_latency_s + (calib_x(cost->cal, "ce2d_copy_us", ly->flush_index_copies) - 1) * cost->ce2d_copy_s);
    calib_note(cost->cal, "ce2d_copy_us", ly->flush_index_copies);
    return ERR_OK;
}

/* Address translations the SM gathers of one step touch, every layer's (ly[0..L)): the index where
 * the SMs fetch it, the winners where the SMs gather them (each layer's rows over its own region). */
static double step_translations(const provider_t *p, const method_layer_t *ly, int L, const cost_xfer_t *idx_form,
                                bool win_sm)
{
    double sum = 0;
    for (int l = 0; l < L; l++) {
        if (idx_form[l] != COST_CE && ly[l].index_host_bytes > 0)
            sum += cost_gather_translations(p->cost, ly[l].index_pieces, ly[l].index_region_bytes);
        if (win_sm && ly[l].winner_host_bytes > 0)
            sum += cost_gather_translations(p->cost, ly[l].winner_pieces, ly[l].kv_region_bytes);
    }
    return sum;
}

int provider_build(provider_t *p, const sim_t *sim, int gpu, const plan_request_t *req, plan_t *out, err_t *e)
{
    int rc = resolve_paths(p, sim, gpu, e);
    if (rc) return rc;
    const method_t *mt = p->mt;
    const method_cfg_t *c = method_cfg(mt);
    const llm_t *m = method_llm(mt);
    bool prefill = provider_prefill_formulas(req);
    uint32_t nt = req->new_tokens ? req->new_tokens : 1;
    plan_reset(out, req->phase, nt);
    builder_t b = {p, out, e, COST_GATHER_STEP, 0, INFINITY};
    const method_ops_t *ops = method_table(mt);
    bool exact = ops->reads_all || (prefill && c->prefill == PREFILL_EXACT);
    bool query_dependent = !prefill && ops->query_dependent;
    int L = m->layers, depth = (int)c->prefetch;
    /* per layer: the op consuming its fetch buffer (attention or scan), to bound prefetch */
    uint32_t *consumer = malloc((size_t)L * sizeof *consumer);
    method_layer_t *lys = malloc((size_t)L * sizeof *lys);   /* each layer's shape, worked out once */
    cost_xfer_t *idx_forms = malloc((size_t)L * sizeof *idx_forms);
    if (!consumer || !lys || !idx_forms) {
        free(consumer);
        free(lys);
        free(idx_forms);
        return err_set(e, ERR_NOMEM, "provider: out of memory");
    }
    /* the SM fetches per-query planes with the prefix kernel, other indexes as plain gathers; auto
     * picks a layer's path by its shape */
    for (int l = 0; l < L; l++) {
        method_layer(mt, l, req->context_tokens, nt, prefill, &lys[l]);
        idx_forms[l] = provider_fetch_form(p, OPKIND_INDEX_FETCH, prefill, &lys[l]);
    }
    uint32_t prev = UINT32_MAX;
    cost_xfer_t win_form = provider_fetch_form(p, OPKIND_WINNER_FETCH, prefill, NULL);
    if (!exact) b.step_translations = step_translations(p, lys, L, idx_forms, win_form != COST_CE_BATCH);
    for (int l = 0; !rc && l < L; l++) {
        const method_layer_t ly = lys[l];
        cost_xfer_t idx_form = idx_forms[l];
        b.gather_at = COST_GATHER_STEP;   /* what the step's gathers leave */
        bool idx_sm = idx_form != COST_CE && ly.index_host_bytes > 0;
        uint32_t qkv, wf = UINT32_MAX, fetch = UINT32_MAX, tail = UINT32_MAX, attn = UINT32_MAX;
        uint32_t buf_free = (depth > 0 && l - 1 - depth >= 0) ? consumer[l - 1 - depth] : UINT32_MAX;
        rc = add_gemm(&b, GEMM_QKV, l, req->phase, nt, &prev, 1, &qkv);
        if (depth == 0) buf_free = qkv;
        if (!rc && ly.tail_hbm_bytes > 0)
            rc = add_kernel(&b, OPKIND_ATTN_TAIL, l, ly.tail_hbm_bytes, ly.tail_flops, &qkv, 1, &tail);
        if (!rc && exact) {
            if (ly.kv_host_bytes > 0)
                rc = add_transfer(&b, OPKIND_H2D_COPY, l, COST_CE, true, ly.kv_host_bytes, ly.kv_pieces, ly.kv_region_bytes,
                                  &buf_free, 1, &fetch);
            uint32_t deps[2] = {qkv, fetch};
            if (!rc) rc = add_kernel(&b, OPKIND_ATTN_DENSE, l, ly.attn_hbm_bytes, ly.attn_flops, deps, 2, &attn);
            if (!rc) cost_attn_dense_blocks(p->cost, ly.n_off, m->kv_heads, &b.out->ops[attn]);
            consumer[l] = attn;
        } else if (!rc) {
            if (query_dependent)
                rc = add_kernel(&b, OPKIND_WF_PLAN, l, (double)m->q_heads * m->head_dim * 4.0,
                                (double)m->q_heads * m->head_dim * FATHOM_MAX_BITS * 4.0, &qkv, 1, &wf);
            if (!rc && ly.index_host_bytes > 0) {
                uint32_t dep = query_dependent ? wf : buf_free;
                if (query_dependent && idx_form == COST_CE)
                    rc = add_ce_planes(&b, l, &ly, &dep, &fetch);
                else
                    rc = add_transfer(&b, OPKIND_INDEX_FETCH, l, idx_form, true, ly.index_host_bytes, ly.index_pieces,
                                      ly.index_region_bytes, &dep, 1, &fetch);
            }
            uint32_t scan, topk, win = UINT32_MAX;
            uint32_t sdeps[3] = {qkv, wf, fetch};
            /* an index the layer fetched for itself, right before its scan, is read from the L2 where
             * the whole index and the scores fit there (one fetched layers ahead is not: its GEMMs
             * came between) */
            double scan_bytes = ly.index_host_bytes + ly.index_hbm_bytes + ly.scores * 4.0;
            bool scan_l2 = ly.index_host_bytes > 0 && (query_dependent || depth == 0) && scan_bytes <= p->cost->l2_bytes;
            if (!rc) rc = add_kernel_l2(&b, OPKIND_SCAN, l, scan_bytes, ly.scan_flops, scan_l2, sdeps, 3, &scan);
            consumer[l] = scan;
            if (!rc) rc = add_topk(&b, l, &ly, &scan, 1, &topk);
            /* winners gathered right after the SMs gathered the index from the host: the index fetch
             * evicts their translations as it touches more than the GPU keeps (the link suite's
             * order_win_after rows: the step's winner fetch after another gather); the index fetch
             * itself, after 16K winner rows or so, takes the plain step tables */
            if (idx_sm) {
                b.gather_at = COST_GATHER_AFTER;
                b.evicting = cost_gather_translations(p->cost, ly.index_pieces, ly.index_region_bytes);
            }
            if (!rc && ly.winner_host_bytes > 0)
                rc = add_transfer(&b, OPKIND_WINNER_FETCH, l, win_form, true, ly.winner_host_bytes, ly.winner_pieces,
                                  ly.kv_region_bytes, &topk, 1, &win);
            else if (!rc && ly.winner_rows > 0) /* K/V in HBM: the winners are gathered in place */
                rc = add_kernel(&b, OPKIND_WINNER_FETCH, l, 2.0 * ly.attn_hbm_bytes, 0, &topk, 1, &win);
            uint32_t adeps[2] = {topk, win};
            if (!rc) rc = add_attn_sparse(&b, l, &ly, adeps, 2, &attn);
        }
        if (!rc && !prefill) rc = add_combine(&b, l, &ly, exact, attn, tail, &attn);
        if (!rc && ly.flush_bytes > 0) {
            uint32_t q = qkv, fl;
            if (ly.quantize_bytes > 0) rc = add_kernel(&b, OPKIND_QUANTIZE, l, ly.quantize_bytes, 0, &qkv, 1, &q);
            /* K/V (and a chunked index) in pieces; a contiguous index row by row */
            double rest = ly.flush_bytes - ly.flush_index_bytes;
            if (!rc && rest > 0)
                rc = add_transfer(&b, OPKIND_FLUSH, l, COST_CE, false, rest, ly.flush_pieces - ly.flush_index_rows, 0, &q, 1,
                                  &fl);
            if (!rc && ly.flush_index_rows > 0) rc = add_index_flush(&b, l, &ly, &q, &fl);
        }
        /* the index this layer fetched for itself is still in the L2 (not one prefetched layers
         * ahead, whose GEMMs came between) */
        bool fetched_here = query_dependent || depth == 0;
        if (!rc) rc = add_writeback(&b, l, layer_dirty_bytes(&b, &ly, exact, fetched_here), &attn);
        if (!rc) rc = add_gemm(&b, GEMM_OMLP, l, req->phase, nt, &attn, 1, &prev);
    }
    free(consumer);
    free(lys);
    free(idx_forms);
    uint32_t head;
    if (!rc) rc = add_gemm(&b, GEMM_HEAD, -1, req->phase, 1, &prev, 1, &head);
    if (!rc) {
        plan_op_t op = op_new(OPKIND_SAMPLE, -1, STREAM_COMPUTE);
        op.exec = PLAN_EXEC_GPU;
        op.cost.latency_ps = cost_ps(p->cost->sample_s);
        op.launch_ps = cost_ps(p->cost->launch_s);
        calib_note(p->cost->cal, "sample_us", NAN);
        rc = add(&b, &op, &head, 1, NULL);
    }
    out->graph_launch_ps = cost_ps(p->cost->graph_launch_s);
    return rc;
}

/* ---- the engine's view ---------------------------------------------------------------------- */

static int ops_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    return provider_build(self, plan_env_sim(env), plan_env_gpu(env), req, out, e);
}

static int ops_footprint(void *self, uint64_t context_tokens, double *hbm_bytes, double *host_bytes, err_t *e)
{
    provider_t *p = self;
    footprint_t f;
    footprint_session(p->mt, context_tokens, &f);
    *hbm_bytes = f.hbm_bytes;
    *host_bytes = f.host_bytes;
    return ERR_OK;
}

static void ops_destroy(void *self, plan_env_t *env) { provider_free(self); }

static const plan_provider_ops_t provider_ops = {"odsim-method", ops_build, NULL, ops_footprint, ops_destroy};

plan_provider_t provider_wrap(provider_t *p) { return (plan_provider_t){&provider_ops, p}; }

int provider_create(const cfg_node_t *method, const llm_t *m, const hw_t *hw, calib_t *cal, plan_provider_t *out,
                    err_t *e)
{
    method_cfg_t cfg;
    provider_t *p = NULL;
    int rc = method_cfg_bind(method, &cfg, e);
    if (!rc) rc = provider_new(&cfg, m, hw, cal, &p, e);
    if (rc) return rc;
    *out = provider_wrap(p);
    return ERR_OK;
}
