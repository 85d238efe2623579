#include "validation/protocol.h"

#include <stdlib.h>
#include <string.h>

#include "models/footprint.h"
#include "models/opkind.h"
#include "models/provider.h"

struct protocol_prov {
    provider_t *inner;        /* the method's provider (owned) */
    const hw_t *hw;
    protocol_t how;
    cost_paths_t paths;       /* the GPU's, for re-costing gathers */
    const sim_t *paths_sim;
    int paths_gpu;
    plan_t tmp;               /* the method's plan before the protocol changes it */
};

int protocol_new(const method_t *mt, const hw_t *hw, calib_t *cal, const protocol_t *how, protocol_prov_t **out,
                 err_t *e)
{
    *out = NULL;
    protocol_prov_t *pp = calloc(1, sizeof *pp);
    if (!pp) return err_set(e, ERR_NOMEM, "protocol: out of memory");
    pp->hw = hw;
    pp->how = *how;
    pp->paths_gpu = -1;
    plan_init(&pp->tmp);
    int rc = provider_new_shared(mt, hw, cal, &pp->inner, e);
    if (rc) {
        protocol_free(pp);
        return rc;
    }
    *out = pp;
    return ERR_OK;
}

void protocol_free(protocol_prov_t *pp)
{
    if (!pp) return;
    provider_free(pp->inner);
    plan_free(&pp->tmp);
    free(pp);
}

const method_t *protocol_method(const protocol_prov_t *pp) { return provider_method(pp->inner); }

static bool sm_form(cost_xfer_t f) { return f != COST_CE && f != COST_CE_BATCH && f != COST_CE_STRIDED; }

/* op (an SM gather of the index or the winners from the host) re-costed as re-reading its rows back
 * to back, with the layer's shape ly. */
static void reread(const protocol_prov_t *pp, const method_layer_t *ly, bool prefill, plan_op_t *op)
{
    bool idx = op->kind == OPKIND_INDEX_FETCH;
    double bytes = idx ? ly->index_host_bytes : ly->winner_host_bytes;
    double pieces = idx ? ly->index_pieces : ly->winner_pieces;
    double region = idx ? ly->index_region_bytes : ly->kv_region_bytes;
    plan_op_t r;
    memset(&r, 0, sizeof r);
    r.kind = op->kind;
    r.layer = op->layer;
    r.stream = op->stream;
    r.weight = 1.0;
    r.host_sync = op->host_sync;
    r.latency_extra_ps = op->latency_extra_ps;
    cost_transfer(provider_cost(pp->inner), &pp->paths, provider_fetch_form(pp->inner, op->kind, prefill, ly), true, bytes,
                  pieces, region, COST_GATHER_ALONE, &r);
    r.bytes_host = r.bytes_hbm = bytes;
    *op = r;
}

/* op as timed by the protocol, its layer's shape ly (for its layer's op kinds that need it). */
static void retime(const protocol_prov_t *pp, const method_layer_t *ly, bool prefill, plan_op_t *op)
{
    const cost_t *c = provider_cost(pp->inner);
    bool fetch = op->kind == OPKIND_INDEX_FETCH || op->kind == OPKIND_WINNER_FETCH;
    if (pp->how.gathers_reread && fetch && op->exec == PLAN_EXEC_GPU && op->bytes_host > 0 &&
        sm_form(provider_fetch_form(pp->inner, op->kind, prefill, ly)))
        reread(pp, ly, prefill, op);
    if (pp->how.kernels_alone) op->latency_extra_ps -= cost_in_layer_ps(c, op->kind, 4.0 * ly->scores);
}

static int resolve_paths(protocol_prov_t *pp, const sim_t *sim, int gpu, err_t *e)
{
    if (pp->paths_sim == sim && pp->paths_gpu == gpu) return ERR_OK;
    const method_cfg_t *c = method_cfg(provider_method(pp->inner));
    int rc = cost_paths_resolve(provider_cost(pp->inner), pp->hw, sim, gpu,
                                c->tier == TIER_CXL ? HWINST_CXL : HWINST_DRAM, &pp->paths, e);
    if (rc) return rc;
    pp->paths_sim = sim;
    pp->paths_gpu = gpu;
    return ERR_OK;
}

int protocol_build(protocol_prov_t *pp, const sim_t *sim, int gpu, const plan_request_t *req, plan_t *out, err_t *e)
{
    int rc = resolve_paths(pp, sim, gpu, e);
    if (!rc) rc = provider_build(pp->inner, sim, gpu, req, &pp->tmp, e);
    if (rc) return rc;
    const plan_t *in = &pp->tmp;
    const method_t *mt = provider_method(pp->inner);
    bool prefill = provider_prefill_formulas(req);
    uint32_t nt = req->new_tokens ? req->new_tokens : 1;
    plan_reset(out, in->phase, in->tokens);
    out->graph_launch_ps = in->graph_launch_ps;
    uint32_t *id = malloc((size_t)(in->n_ops ? in->n_ops : 1) * sizeof *id);   /* op i of in as out's, or UINT32_MAX */
    if (!id) return err_set(e, ERR_NOMEM, "protocol: out of memory");
    method_layer_t ly;
    int ly_of = -1;
    for (uint32_t i = 0; !rc && i < in->n_ops; i++) {
        plan_op_t op = in->ops[i];
        id[i] = UINT32_MAX;
        if (pp->how.layers_only && op.layer == PLAN_NO_LAYER) continue;
        if (op.layer != PLAN_NO_LAYER && op.layer != ly_of) {
            method_layer(mt, op.layer, req->context_tokens, nt, prefill, &ly);
            ly_of = op.layer;
        }
        if (op.layer != PLAN_NO_LAYER) retime(pp, &ly, prefill, &op);
        uint32_t deps[8], n = 0;
        for (uint32_t k = 0; k < op.n_deps && n < 8; k++) {
            uint32_t d = id[in->deps[op.dep_first + k]];
            if (d != UINT32_MAX) deps[n++] = d;
        }
        rc = plan_add(out, &op, deps, n, &id[i], e);
    }
    free(id);
    if (rc) return rc;
    if (pp->how.first_launch_hidden && out->n_ops) out->ops[0].launch_ps = 0;
    return ERR_OK;
}

/* ---- the engine's view ---------------------------------------------------------------------- */

static int ops_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    return protocol_build(self, plan_env_sim(env), plan_env_gpu(env), req, out, e);
}

static int ops_footprint(void *self, uint64_t context_tokens, double *hbm_bytes, double *host_bytes, err_t *e)
{
    (void)e;
    protocol_prov_t *pp = self;
    footprint_t f;
    footprint_session(protocol_method(pp), context_tokens, &f);
    *hbm_bytes = f.hbm_bytes;
    *host_bytes = f.host_bytes;
    return ERR_OK;
}

static void ops_destroy(void *self, plan_env_t *env)
{
    (void)env;
    protocol_free(self);
}

static const plan_provider_ops_t protocol_ops = {"kbench-protocol", ops_build, NULL, ops_footprint, ops_destroy};

plan_provider_t protocol_wrap(protocol_prov_t *pp) { return (plan_provider_t){&protocol_ops, pp}; }
