/* replay — a replay workload's session as a plan provider (models/replay.h). */
#include "models/replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/hwinst.h"
#include "models/opkind.h"

struct replay_prov {
    rf_session_t s;
    uint32_t session;
    const hw_t *hw;
    const cost_t *cost;
    plan_t step;               /* the session's step, built once for (paths_sim, paths_gpu) */
    const sim_t *paths_sim;
    int paths_gpu;
    uint32_t plan_of[RF_MAX_OPS];
};

int replay_new(const rf_workload_t *w, uint32_t session, const hw_t *hw, const cost_t *cost, replay_prov_t **out,
               err_t *e)
{
    *out = NULL;
    if (session >= w->n_sessions)
        return err_set(e, ERR_INVAL, "replay %s: no session %u (it has %u)", w->name, session, w->n_sessions);
    replay_prov_t *p = calloc(1, sizeof *p);
    if (!p) return err_set(e, ERR_NOMEM, "replay: out of memory");
    p->s = w->sessions[session];
    p->session = session;
    p->hw = hw;
    p->cost = cost;
    p->paths_gpu = -1;
    plan_init(&p->step);
    *out = p;
    return ERR_OK;
}

void replay_free(replay_prov_t *p)
{
    if (!p) return;
    plan_free(&p->step);
    free(p);
}

uint32_t replay_plan_op(const replay_prov_t *p, uint32_t i) { return i < p->s.n_ops ? p->plan_of[i] : REPLAY_NO_OP; }

/* The device buffer an op writes or reads besides host memory. */
static double device_bytes(const rf_op_t *o)
{
    if (rf_kind_is_transfer((int)o->kind)) return (double)o->pieces * (double)o->piece_bytes;
    if (o->kind == RF_OP_GEMM) return 2.0 * ((double)o->m * o->k + (double)o->k * o->n + (double)o->m * o->n);
    return o->kind == RF_OP_HBM ? (double)o->bytes : 0;
}

void replay_footprint(const rf_session_t *s, double *hbm_bytes, double *host_bytes)
{
    double hbm = 0;
    for (uint32_t i = 0; i < s->n_ops; i++) hbm += device_bytes(&s->ops[i]);
    *hbm_bytes = hbm;
    *host_bytes = (double)s->region_bytes;
}

static plan_op_t op_new(int kind, uint32_t stream)
{
    plan_op_t op;
    memset(&op, 0, sizeof op);
    op.kind = (uint16_t)kind;
    op.layer = PLAN_NO_LAYER;
    op.stream = (uint8_t)stream;
    op.weight = 1.0;
    return op;
}

/* A host op holding the launch thread for launch_ps. */
static plan_op_t host_op(int kind, sim_ps_t launch_ps)
{
    plan_op_t op = op_new(kind, REPLAY_HOST_STREAM);
    op.exec = PLAN_EXEC_CPU;
    op.launch_ps = launch_ps;
    return op;
}

static const int transfer_kind[] = {
    [RF_OP_H2D] = OPKIND_H2D_COPY, [RF_OP_D2H] = OPKIND_D2H_COPY, [RF_OP_H2D2D] = OPKIND_H2D_COPY2D,
    [RF_OP_H2DBATCH] = OPKIND_H2D_BATCH, [RF_OP_GATHER] = OPKIND_SM_GATHER};

int replay_cost_op(const rf_op_t *ro, const cost_t *c, const cost_paths_t *pa, plan_op_t out[2], uint32_t *n_out,
                   err_t *e)
{
    double pieces = (double)ro->pieces, bytes = pieces * (double)ro->piece_bytes, span = (double)ro->span_bytes;
    plan_op_t *op = &out[0];
    *n_out = 1;
    switch (ro->kind) {
    case RF_OP_SYNC:
        *n_out = 0;
        return ERR_OK;
    case RF_OP_HOST:
        *op = host_op(OPKIND_HOST_BUSY, cost_ps((double)ro->us * 1e-6));
        return ERR_OK;
    case RF_OP_H2D:
    case RF_OP_D2H:
    case RF_OP_H2D2D:
    case RF_OP_H2DBATCH:
    case RF_OP_GATHER:
        *op = op_new(transfer_kind[ro->kind], ro->stream);
        if (ro->kind == RF_OP_H2D || ro->kind == RF_OP_D2H) {
            cost_ce_chain(c, pa, ro->kind == RF_OP_H2D, bytes, pieces, op);
        } else if (ro->kind == RF_OP_H2D2D) {
            bool strided = pieces > 1 && (double)rf_pitch(ro) >= c->host_page_bytes;
            cost_transfer(c, pa, strided ? COST_CE_STRIDED : COST_CE, true, bytes, pieces, span, COST_GATHER_STEP, op);
        } else {
            cost_transfer(c, pa, ro->kind == RF_OP_GATHER ? COST_SM_GATHER : COST_CE_BATCH, true, bytes, pieces, span,
                          COST_GATHER_ALONE, op);
        }
        op->bytes_host = op->bytes_hbm = bytes;
        /* the chain's other calls: host time after the first, which already runs */
        if ((ro->kind == RF_OP_H2D || ro->kind == RF_OP_D2H) && ro->pieces > 1) {
            out[1] = host_op(OPKIND_LAUNCH, cost_ps((pieces - 1) * c->copy_launch_s));
            *n_out = 2;
        }
        return ERR_OK;
    case RF_OP_HBM:
        *op = op_new(OPKIND_HBM_STREAM, ro->stream);
        cost_kernel(c, pa, OPKIND_HBM_STREAM, (double)ro->bytes, 0, LLM_BF16, op);
        op->bytes_hbm = (double)ro->bytes;
        return ERR_OK;
    case RF_OP_COMPUTE: {
        *op = op_new(OPKIND_COMPUTE, ro->stream);
        int rc = cost_compute_fp32(c, pa, (double)ro->flops, op, e);
        op->flops = (double)ro->flops;
        return rc;
    }
    case RF_OP_GEMM: {
        /* the projections' form at batch 1: weights k·n and activations m·(k + n) in BF16, 2·m·n·k
         * FLOPs; a replay has no batch to merge, so the cost is fixed (no cost_fn to outlive) */
        double m = (double)ro->m, n = (double)ro->n, k = (double)ro->k;
        cost_gemm_t g;
        cost_gemm_init(c, 2.0 * k * n, 2.0 * (k + n), 2.0 * k * n, m, 1, LLM_BF16, &g);
        *op = op_new(OPKIND_GEMM, ro->stream);
        cost_gemm_op(c, pa, &g, op);
        op->cost_fn = NULL;
        op->cost_model = NULL;
        op->bytes_hbm = op->cost.work;
        op->flops = 2.0 * m * n * k;
        return ERR_OK;
    }
    case RF_OP_SPIN:
        *op = op_new(OPKIND_SPIN, ro->stream);
        op->exec = PLAN_EXEC_GPU;
        op->cost.latency_ps = cost_ps((double)ro->us * 1e-6);
        op->launch_ps = cost_ps(c->launch_s);
        calib_note(c->cal, "launch_us", NAN);
        return ERR_OK;
    default:
        return err_set(e, ERR_INVAL, "unknown kind %d", (int)ro->kind);
    }
}

/* Appends plan op id to deps[0..*n) unless it is none or already there. */
static void dep_put(uint32_t *deps, uint32_t *n, uint32_t id)
{
    for (uint32_t k = 0; k < *n; k++)
        if (deps[k] == id) return;
    if (id != REPLAY_NO_OP) deps[(*n)++] = id;
}

int replay_cost_session(const rf_session_t *s, const cost_t *c, const cost_paths_t *pa, const replay_label_t *labels,
                        plan_t *out, uint32_t *plan_of, err_t *e)
{
    /* the last plan op of each stream so far (a sync waits for them), and whether the next op
     * follows a sync */
    uint32_t last[REPLAY_HOST_STREAM + 1];
    bool after_sync = false;
    for (uint32_t st = 0; st <= REPLAY_HOST_STREAM; st++) last[st] = REPLAY_NO_OP;
    for (uint32_t i = 0; i < s->n_ops; i++) plan_of[i] = REPLAY_NO_OP;
    for (uint32_t i = 0; i < s->n_ops; i++) {
        const rf_op_t *ro = &s->ops[i];
        plan_op_t ops[2];
        uint32_t n_ops;
        int rc = replay_cost_op(ro, c, pa, ops, &n_ops, e);
        if (rc) return err_prefix(e, "op %u (%s)", i, rf_kind_name((int)ro->kind));
        if (!n_ops) after_sync = true;
        for (uint32_t j = 0; j < n_ops; j++) {
            plan_op_t *op = &ops[j];
            if (labels) {
                if (j == 0 && labels[i].kind >= 0) op->kind = (uint16_t)labels[i].kind;
                op->layer = labels[i].layer;
            }
            /* the op's `after` ops and, after a sync, every stream's last op as host_sync
             * dependencies; a chain's other calls follow the first without either */
            uint32_t deps[RF_MAX_AFTER + REPLAY_HOST_STREAM + 1], n = 0;
            for (uint32_t k = 0; j == 0 && k < ro->n_after; k++) dep_put(deps, &n, plan_of[ro->after[k]]);
            if (after_sync) {
                op->host_sync = true;
                after_sync = false;
                for (uint32_t st = 0; st <= REPLAY_HOST_STREAM; st++) dep_put(deps, &n, last[st]);
            }
            uint32_t id;
            rc = plan_add(out, op, deps, n, &id, e);
            if (rc) return rc;
            last[op->stream] = id;
            if (j == 0) plan_of[i] = id;
        }
    }
    return ERR_OK;
}

/* Builds the session's step once for GPU gpu of sim into p->step. */
static int build_step(replay_prov_t *p, const sim_t *sim, int gpu, err_t *e)
{
    cost_paths_t paths;
    int rc = cost_paths_resolve(p->cost, p->hw, sim, gpu, HWINST_DRAM, &paths, e);
    if (rc) return rc;
    plan_reset(&p->step, PLAN_DECODE, 1);
    rc = replay_cost_session(&p->s, p->cost, &paths, NULL, &p->step, p->plan_of, e);
    if (!rc) rc = plan_validate(&p->step, e);
    if (rc) return err_prefix(e, "replay session %u", p->session);
    p->paths_sim = sim;
    p->paths_gpu = gpu;
    return ERR_OK;
}

int replay_build(replay_prov_t *p, const sim_t *sim, int gpu, plan_t *out, err_t *e)
{
    if (p->paths_sim != sim || p->paths_gpu != gpu) {
        int rc = build_step(p, sim, gpu, e);
        if (rc) return rc;
    }
    plan_reset(out, PLAN_DECODE, 1);
    const plan_t *st = &p->step;
    for (uint32_t i = 0; i < st->n_ops; i++) {
        const plan_op_t *o = &st->ops[i];
        int rc = plan_add(out, o, st->deps + o->dep_first, o->n_deps, NULL, e);
        if (rc) return rc;
    }
    return ERR_OK;
}

/* ---- the engine's view ---------------------------------------------------------------------- */

static int ops_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    (void)req;
    return replay_build(self, plan_env_sim(env), plan_env_gpu(env), out, e);
}

static int ops_footprint(void *self, uint64_t context_tokens, double *hbm_bytes, double *host_bytes, err_t *e)
{
    (void)context_tokens;
    (void)e;
    replay_footprint(&((replay_prov_t *)self)->s, hbm_bytes, host_bytes);
    return ERR_OK;
}

static void ops_destroy(void *self, plan_env_t *env)
{
    (void)env;
    replay_free(self);
}

static const plan_provider_ops_t replay_ops = {"odsim-replay", ops_build, NULL, ops_footprint, ops_destroy};

plan_provider_t replay_wrap(replay_prov_t *p) { return (plan_provider_t){&replay_ops, p}; }
