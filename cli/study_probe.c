/* Probe workloads: a measured kbench case reproduced through the same cost forms and providers as a
 * study. An `op` probe runs one op per plan: a raw transfer built by the cost forms from the row's
 * pieces and region, or the ops of that kind from the method's own one-layer plan at the row's
 * context. Layer and session steps are the method's plans without the per-step LM head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study_int.h"
#include "models/method_ops.h"
#include "models/opkind.h"
#include "models/provider.h"
#include "validation/protocol.h"

typedef struct probe_prov {
    protocol_prov_t *inner;  /* the method's provider, timed as kbench times an op (owned) */
    const hw_t *hw;
    cost_t cost;
    cost_paths_t paths;
    const sim_t *paths_sim;
    int kind;                /* opkind_t */
    scn_probe_t pb;
    plan_t tmp;
} probe_prov_t;

/* The GPU's paths in sim (host data in DRAM), resolved once per simulator. */
static int probe_paths(probe_prov_t *pp, const sim_t *sim, int gpu, err_t *e)
{
    if (pp->paths_sim == sim) return ERR_OK;
    int rc = cost_paths_resolve(&pp->cost, pp->hw, sim, gpu, HWINST_DRAM, &pp->paths, e);
    if (!rc) pp->paths_sim = sim;
    return rc;
}

/* Raw transfers of the link suite: not taken from a method's plan. */
static bool raw_transfer(int kind, cost_xfer_t *form, bool *h2d)
{
    *h2d = kind != OPKIND_D2H_COPY;
    switch (kind) {
    case OPKIND_H2D_COPY:
    case OPKIND_D2H_COPY:
    case OPKIND_H2D_COPY2D: *form = COST_CE; return true;
    case OPKIND_H2D_BATCH: *form = COST_CE_BATCH; return true;
    case OPKIND_SM_GATHER: *form = COST_SM_GATHER; return true;
    default: return false;
    }
}

static int probe_transfer(probe_prov_t *pp, const sim_t *sim, int gpu, cost_xfer_t form, bool h2d, plan_t *out, err_t *e)
{
    int rc = probe_paths(pp, sim, gpu, e);
    if (rc) return rc;
    double pieces = pp->pb.pieces > 0 ? (double)pp->pb.pieces : 1;
    double bytes = pp->pb.piece_bytes * pieces;
    plan_op_t op = {.kind = (uint16_t)pp->kind, .layer = PLAN_NO_LAYER};
    cost_transfer(&pp->cost, &pp->paths, form, h2d, bytes, form == COST_CE && pp->kind != OPKIND_H2D_COPY2D ? 1 : pieces,
                  pp->pb.region_bytes, COST_GATHER_ALONE, &op);
    op.bytes_host = op.bytes_hbm = bytes;
    return plan_add(out, &op, NULL, 0, NULL, e);
}

/* The kernel reads its host data over the link as an SM zero-copy stream (large contiguous pieces,
 * the region they span), so the link and the gather's ceilings bound it, not HBM; what it writes
 * (a scan's scores) stays in HBM, alongside. A plane scan (Fathom's, SparQ's) reads just its
 * query's plane prefixes, the rows the SM index fetch would gather (COST_SM_ZC_SCAN). */
static int as_zero_copy(probe_prov_t *pp, const sim_t *sim, int gpu, const plan_request_t *req, plan_op_t *op,
                        err_t *e)
{
    int rc = probe_paths(pp, sim, gpu, e);
    if (rc) return rc;
    method_layer_t ly;
    method_layer(protocol_method(pp->inner), 0, req->context_tokens, 1, false, &ly);
    double bytes = op->kind == OPKIND_SCAN ? ly.index_host_bytes + ly.index_hbm_bytes : op->bytes_hbm, piece = 131072;
    uint16_t kind = op->kind, layer = op->layer;
    const method_t *mt = protocol_method(pp->inner);
    const method_cfg_t *c = method_cfg(mt);
    if (op->kind == OPKIND_SCAN && method_table(mt)->query_dependent && ly.index_pieces > 0) {
        /* the scan walks chunk by chunk: a chunk's prefixes lie within its own bytes (one run of
         * translations each), where the index fetch's kernel reads them channel by channel */
        double runs = method_llm(mt)->kv_heads * ceil((double)req->context_tokens / (double)c->chunk);
        cost_transfer(&pp->cost, &pp->paths, COST_SM_ZC_SCAN, true, ly.index_host_bytes, runs, ly.index_region_bytes, COST_GATHER_ALONE,
                      op);
    }
    else
        cost_transfer(&pp->cost, &pp->paths, COST_SM_GATHER, true, bytes, ceil(bytes / piece), bytes, COST_GATHER_ALONE, op);
    op->kind = kind;
    op->layer = layer;
    return ERR_OK;
}

/* The copy op i of plan p waits on (and so, started alone, on the copy engine's hand-off), or NULL. */
static const plan_op_t *copy_before(const plan_t *p, uint32_t i)
{
    const plan_op_t *o = &p->ops[i];
    for (uint32_t k = 0; k < o->n_deps; k++)
        if (plan_handoff(&p->ops[p->deps[o->dep_first + k]], o)) return &p->ops[p->deps[o->dep_first + k]];
    return NULL;
}

/* The ops of the probe's kind from the method's plan of one layer at the probe's context, one after
 * another (kbench times a layer's stage as a whole: its GEMMs are QKV, then O and the MLP, and write
 * back the dirty lines the attention left in the L2; its attn_tail stage runs the tail's partial and
 * then the combine of all partials). */
static int probe_method_op(probe_prov_t *pp, const sim_t *sim, int gpu, const plan_request_t *req, plan_t *out, err_t *e)
{
    int rc = protocol_build(pp->inner, sim, gpu, req, &pp->tmp, e);
    if (rc) return rc;
    for (uint32_t i = 0; i < pp->tmp.n_ops && !rc; i++) {
        plan_op_t op = pp->tmp.ops[i];
        bool combine = pp->pb.stage && pp->kind == OPKIND_ATTN_TAIL && op.kind == OPKIND_ATTN_COMBINE;
        bool writeback = pp->pb.stage && pp->kind == OPKIND_GEMM && op.kind == OPKIND_L2_WRITEBACK;
        if (op.kind != pp->kind && !combine && !writeback) continue;
        if (pp->pb.zero_copy && combine)   /* host reads leave the L2 alone: the partials are still there */
            cost_attn_combine(&pp->cost, op.pieces, true, &op);
        else if (pp->pb.zero_copy && op.kind != OPKIND_ATTN_TAIL)
            rc = as_zero_copy(pp, sim, gpu, req, &op, e);
        if (pp->pb.launch_hidden) op.launch_ps = 0;
        const plan_op_t *copy = pp->pb.stage ? copy_before(&pp->tmp, i) : NULL;
        if (copy && !rc) {   /* kbench's stage window opens at the copy's end: the copy, done, then the hand-off */
            plan_op_t mark = {.kind = copy->kind, .layer = copy->layer, .exec = copy->exec, .stream = op.stream};
            uint32_t prev = out->n_ops - 1;
            rc = plan_add(out, &mark, out->n_ops ? &prev : NULL, out->n_ops ? 1 : 0, NULL, e);
        }
        uint32_t prev = out->n_ops - 1;
        if (!rc) rc = plan_add(out, &op, out->n_ops ? &prev : NULL, out->n_ops ? 1 : 0, NULL, e);
    }
    if (rc || out->n_ops) return rc;
    if (pp->pb.bytes > 0) {   /* e.g. quantising a whole context at once: the kernel alone on its bytes */
        plan_op_t op = {.kind = (uint16_t)pp->kind, .layer = PLAN_NO_LAYER};
        rc = probe_paths(pp, sim, gpu, e);
        if (rc) return rc;
        cost_kernel(&pp->cost, &pp->paths, pp->kind, pp->pb.bytes, 0, LLM_BF16, &op);
        op.bytes_hbm = pp->pb.bytes;
        if (pp->pb.launch_hidden) op.launch_ps = 0;
        return plan_add(out, &op, NULL, 0, NULL, e);
    }
    return err_set(e, ERR_INVAL, "probe: the %s plan at %llu tokens has no '%s' op (variant '%s')",
                   method_name(protocol_method(pp->inner)),
                   (unsigned long long)req->context_tokens, opkind_name(pp->kind), pp->pb.variant);
}

static int probe_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    probe_prov_t *pp = self;
    const sim_t *sim = plan_env_sim(env);
    int gpu = plan_env_gpu(env);
    cost_xfer_t form;
    bool h2d;
    int rc;
    if (raw_transfer(pp->kind, &form, &h2d)) rc = probe_transfer(pp, sim, gpu, form, h2d, out, e);
    else if (pp->kind == OPKIND_LAUNCH || pp->kind == OPKIND_GRAPH_REPLAY) {
        plan_op_t op = {.kind = (uint16_t)pp->kind, .layer = PLAN_NO_LAYER,
                        .launch_ps = cost_ps(pp->kind == OPKIND_LAUNCH ? pp->cost.launch_s : pp->cost.graph_launch_s)};
        rc = plan_add(out, &op, NULL, 0, NULL, e);
    } else
        rc = probe_method_op(pp, sim, gpu, req, out, e);
    return rc;
}

static int probe_footprint(void *self, uint64_t tokens, double *hbm, double *host, err_t *e)
{
    (void)self;
    (void)tokens;
    (void)e;
    *hbm = *host = 0; /* a kbench case allocates its buffers once, outside what is timed */
    return ERR_OK;
}

static void probe_destroy(void *self, plan_env_t *env)
{
    (void)env;
    probe_prov_t *pp = self;
    protocol_free(pp->inner);
    plan_free(&pp->tmp);
    free(pp);
}

static const plan_provider_ops_t probe_ops = {"probe-op", probe_build, NULL, probe_footprint, probe_destroy};

int study_probe_provider(const study_point_t *pt, const method_t *mt, calib_t *cal, plan_provider_t *out, err_t *e)
{
    int kind = opkind_find(pt->probe.op);
    if (kind < 0) return err_set(e, ERR_INVAL, "probe: unknown op '%s' (models/opkind.h)", pt->probe.op);
    probe_prov_t *pp = calloc(1, sizeof *pp);
    if (!pp) return err_set(e, ERR_NOMEM, "out of memory");
    pp->hw = &pt->hw;
    pp->kind = kind;
    pp->pb = pt->probe;
    plan_init(&pp->tmp);
    /* kbench times an op alone (its kernels after an L2 flush, its gathers re-reading their rows),
     * a stage in its step */
    protocol_t how = {.layers_only = true, .gathers_reread = !pp->pb.stage,
                      .kernels_alone = pp->pb.what == SCN_PROBE_OP && !pp->pb.stage};
    int rc = cost_init(&pp->cost, cal, e);
    if (!rc) rc = protocol_new(mt, &pt->hw, cal, &how, &pp->inner, e);
    if (rc) {
        probe_destroy(pp, NULL);
        return rc;
    }
    *out = (plan_provider_t){&probe_ops, pp};
    return ERR_OK;
}
