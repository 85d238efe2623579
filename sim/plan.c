#include "sim/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void plan_init(plan_t *p)
{
    memset(p, 0, sizeof *p);
}

void plan_free(plan_t *p)
{
    free(p->ops);
    free(p->deps);
    memset(p, 0, sizeof *p);
}

void plan_reset(plan_t *p, plan_phase_t phase, uint32_t tokens)
{
    p->n_ops = 0;
    p->n_deps = 0;
    p->phase = phase;
    p->tokens = tokens;
    p->graph_launch_ps = 0;
}

static int grow(void **buf, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) return ERR_OK;
    uint32_t ncap = *cap ? *cap : 16;
    while (ncap < need) ncap *= 2;
    void *nb = realloc(*buf, (size_t)ncap * elem);
    if (!nb) return ERR_NOMEM;
    *buf = nb;
    *cap = ncap;
    return ERR_OK;
}

static int check_cost(const plan_cost_t *c, uint32_t id, err_t *e)
{
    if (!(c->work >= 0) || !isfinite(c->work))
        return err_set(e, ERR_INVAL, "plan op %u: work %g is negative or not finite", id, c->work);
    if (!(c->cap_rate >= 0) || !isfinite(c->cap_rate))
        return err_set(e, ERR_INVAL, "plan op %u: rate cap %g is negative or not finite", id, c->cap_rate);
    if (c->latency_ps < 0) return err_set(e, ERR_INVAL, "plan op %u: negative latency", id);
    return ERR_OK;
}

static int check_op(const plan_op_t *op, uint32_t id, err_t *e)
{
    if (op->n_uses > PLAN_MAX_USES)
        return err_set(e, ERR_INVAL, "plan op %u: %u uses, at most %d", id, op->n_uses, PLAN_MAX_USES);
    if (op->exec > PLAN_EXEC_CPU) return err_set(e, ERR_INVAL, "plan op %u: unknown executor %u", id, op->exec);
    for (uint32_t i = 0; i < op->n_uses; i++) {
        if (op->uses[i].res < 0) return err_set(e, ERR_INVAL, "plan op %u: use %u names no resource", id, i);
        if (!(op->uses[i].coef > 0) || !isfinite(op->uses[i].coef))
            return err_set(e, ERR_INVAL, "plan op %u: use %u has coefficient %g (must be > 0)", id, i, op->uses[i].coef);
    }
    if (op->weight < 0 || !isfinite(op->weight)) return err_set(e, ERR_INVAL, "plan op %u: negative weight", id);
    if (op->launch_ps < 0) return err_set(e, ERR_INVAL, "plan op %u: negative launch time", id);
    int rc = check_cost(&op->cost, id, e);
    if (rc) return rc;
    if (op->cost.work > 0 && op->n_uses == 0 && op->cost.cap_rate == 0 && !op->cost_fn)
        return err_set(e, ERR_INVAL, "plan op %u: work %g crosses no resource and has no rate cap", id, op->cost.work);
    return ERR_OK;
}

int plan_add(plan_t *p, const plan_op_t *op, const uint32_t *deps, uint32_t n_deps, uint32_t *id, err_t *e)
{
    uint32_t nid = p->n_ops;
    int rc = check_op(op, nid, e);
    if (rc) return rc;
    for (uint32_t i = 0; i < n_deps; i++)
        if (deps[i] >= nid) return err_set(e, ERR_INVAL, "plan op %u: dependency on op %u, not yet added", nid, deps[i]);
    if (grow((void **)&p->ops, &p->cap_ops, nid + 1, sizeof *p->ops) ||
        grow((void **)&p->deps, &p->cap_deps, p->n_deps + n_deps, sizeof *p->deps))
        return err_set(e, ERR_NOMEM, "plan: out of memory");
    plan_op_t *o = &p->ops[nid];
    *o = *op;
    o->dep_first = p->n_deps;
    o->n_deps = n_deps;
    if (n_deps) memcpy(p->deps + p->n_deps, deps, n_deps * sizeof *deps);
    p->n_deps += n_deps;
    p->n_ops++;
    if (id) *id = nid;
    return ERR_OK;
}

int plan_add_edge(plan_t *p, uint32_t pred, uint32_t succ, err_t *e)
{
    if (pred >= p->n_ops || succ >= p->n_ops)
        return err_set(e, ERR_INVAL, "plan edge %u -> %u: no such op (plan has %u)", pred, succ, p->n_ops);
    /* Ops are issued in id order (as a host thread issues CUDA work), so an edge must point forward;
     * a backward edge would wait on work not yet issued and closes a cycle with issue order. */
    if (pred >= succ) return err_set(e, ERR_CYCLE, "plan edge %u -> %u points backwards in issue order", pred, succ);
    if (grow((void **)&p->deps, &p->cap_deps, p->n_deps + 1, sizeof *p->deps))
        return err_set(e, ERR_NOMEM, "plan: out of memory");
    /* Predecessor slices are laid out in op order: insert at the end of succ's, shift later ops. */
    plan_op_t *s = &p->ops[succ];
    uint32_t at = s->dep_first + s->n_deps;
    memmove(p->deps + at + 1, p->deps + at, (p->n_deps - at) * sizeof *p->deps);
    p->deps[at] = pred;
    p->n_deps++;
    s->n_deps++;
    for (uint32_t i = succ + 1; i < p->n_ops; i++) p->ops[i].dep_first++;
    return ERR_OK;
}

int plan_validate(const plan_t *p, err_t *e)
{
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const plan_op_t *o = &p->ops[i];
        int rc = check_op(o, i, e);
        if (rc) return rc;
        if ((uint64_t)o->dep_first + o->n_deps > p->n_deps)
            return err_set(e, ERR_INVAL, "plan op %u: dependency slice out of range", i);
        /* Work is issued in id order, so every predecessor must come earlier; anything else either
         * closes a cycle or waits on work the host has not issued yet. */
        for (uint32_t k = 0; k < o->n_deps; k++) {
            uint32_t d = p->deps[o->dep_first + k];
            if (d >= i) return err_set(e, ERR_CYCLE, "plan op %u depends on op %u, which is not issued before it (cycle)", i, d);
        }
    }
    return ERR_OK;
}

void plan_totals(const plan_t *p, plan_totals_t *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const plan_op_t *o = &p->ops[i];
        out->bytes_host += o->bytes_host;
        out->bytes_hbm += o->bytes_hbm;
        out->flops += o->flops;
        for (uint32_t u = 0; u < o->n_uses; u++) out->work_by_res_sum += o->cost.work * o->uses[u].coef;
    }
    out->n_ops = p->n_ops;
}

int plan_op_cost(const plan_op_t *o, uint32_t batch, plan_cost_t *out)
{
    *out = o->cost;
    int rc = o->cost_fn ? o->cost_fn(o->cost_model, batch, out) : 0;
    out->latency_ps = out->latency_ps + o->latency_extra_ps > 0 ? out->latency_ps + o->latency_extra_ps : 0;
    return rc;
}

int plan_op_alone_ps(const plan_op_t *o, const sim_t *sim, sim_ps_t *out, err_t *e)
{
    plan_cost_t c;
    int rc = plan_op_cost(o, 1, &c);
    if (rc) return err_set(e, rc, "plan: cost model failed");
    double rate = c.cap_rate > 0 ? c.cap_rate : INFINITY;
    for (uint32_t u = 0; u < o->n_uses; u++) {
        if ((size_t)o->uses[u].res >= sim_res_count(sim))
            return err_set(e, ERR_INVAL, "plan: resource %d not in this simulator", o->uses[u].res);
        double r = sim_res_capacity(sim, o->uses[u].res) / o->uses[u].coef;
        if (r < rate) rate = r;
    }
    double t_s = (c.work > 0 && isfinite(rate)) ? c.work / rate : 0.0;
    *out = sim_ps_add(c.latency_ps, sim_ps_or_never(t_s));
    return ERR_OK;
}

bool plan_handoff(const plan_op_t *pred, const plan_op_t *succ)
{
    return (pred->exec == PLAN_EXEC_COPY_H2D || pred->exec == PLAN_EXEC_COPY_D2H) && succ->exec == PLAN_EXEC_GPU;
}

int plan_finish_ps(const plan_t *p, const sim_t *sim, sim_ps_t handoff_ps, sim_ps_t *finish, sim_ps_t *alone, err_t *e)
{
    int rc = plan_validate(p, e);
    /* Ops start in issue order on their stream (CUDA stream semantics) and after their predecessors,
     * which a validated plan issues earlier: id order is a topological order. */
    uint32_t stream_last[256];
    bool stream_used[256] = {false};
    for (uint32_t i = 0; !rc && i < p->n_ops; i++) {
        const plan_op_t *o = &p->ops[i];
        sim_ps_t start = 0, t = 0;
        for (uint32_t k = 0; k <= o->n_deps; k++) {   /* its predecessors, then its stream's last op */
            bool stream = k == o->n_deps;
            if (stream && !stream_used[o->stream]) break;
            uint32_t d = stream ? stream_last[o->stream] : p->deps[o->dep_first + k];
            sim_ps_t f = finish[d] + (plan_handoff(&p->ops[d], o) ? handoff_ps : 0);
            if (f > start) start = f;
        }
        rc = plan_op_alone_ps(o, sim, &t, e);
        finish[i] = start + t;
        if (alone) alone[i] = t;
        stream_last[o->stream] = i;
        stream_used[o->stream] = true;
    }
    return rc;
}

int plan_standalone_ps(const plan_t *p, const sim_t *sim, sim_ps_t handoff_ps, sim_ps_t *out, err_t *e)
{
    *out = 0;
    if (!p->n_ops) return ERR_OK;
    sim_ps_t *finish = calloc(p->n_ops, sizeof *finish);
    if (!finish) return err_set(e, ERR_NOMEM, "plan: out of memory");
    int rc = plan_finish_ps(p, sim, handoff_ps, finish, NULL, e);
    for (uint32_t i = 0; !rc && i < p->n_ops; i++)
        if (finish[i] > *out) *out = finish[i];
    free(finish);
    return rc;
}

/* Per resource of a plan: total demand, time its ops would take one after another alone, and the
 * executor of its longest op. */
typedef struct res_load {
    double demand, alone_ps, longest_ps;
    uint8_t exec;
} res_load_t;

static int loads_of(const plan_t *p, const sim_t *sim, res_load_t *load, sim_ps_t *launch_ps, err_t *e)
{
    *launch_ps = 0;
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const plan_op_t *o = &p->ops[i];
        plan_cost_t c;
        if (plan_op_cost(o, 1, &c)) return err_set(e, ERR_INVAL, "plan: cost model failed");
        sim_ps_t alone;
        int rc = plan_op_alone_ps(o, sim, &alone, e);
        if (rc) return rc;
        *launch_ps += o->launch_ps;
        for (uint32_t u = 0; u < o->n_uses; u++) {
            res_load_t *l = &load[o->uses[u].res];
            l->demand += c.work * o->uses[u].coef;
            l->alone_ps += (double)alone;
            if ((double)alone > l->longest_ps) {
                l->longest_ps = (double)alone;
                l->exec = o->exec;
            }
        }
    }
    return ERR_OK;
}

int plan_coarsen(const plan_t *in, const sim_t *sim, sim_ps_t handoff_ps, plan_t *out, err_t *e)
{
    sim_ps_t fine_ps = 0, launch_ps = 0;
    size_t nres = sim_res_count(sim);
    int rc = plan_standalone_ps(in, sim, handoff_ps, &fine_ps, e);
    res_load_t *load = rc ? NULL : calloc(nres ? nres : 1, sizeof *load);
    if (!rc && !load) rc = err_set(e, ERR_NOMEM, "plan: out of memory");
    if (!rc) rc = loads_of(in, sim, load, &launch_ps, e);
    plan_reset(out, in->phase, in->tokens);
    out->graph_launch_ps = in->graph_launch_ps;
    uint8_t stream = 0;
    for (size_t r = 0; !rc && r < nres; r++) {
        if (!(load[r].demand > 0)) continue;
        /* Alone, a resource's op takes what its ops took one after another (never more than the
         * whole step); shared, it slows as they would. */
        double t_ps = load[r].alone_ps < (double)fine_ps ? load[r].alone_ps : (double)fine_ps;
        double t_s = t_ps / (double)SIM_PS_PER_S;
        plan_op_t op = {.kind = in->ops[0].kind, .layer = PLAN_NO_LAYER, .exec = load[r].exec, .stream = stream++,
                        .n_uses = 1, .uses = {{(sim_res_t)r, 1.0}},
                        .cost = {.work = load[r].demand, .cap_rate = t_s > 0 ? load[r].demand / t_s : 0}};
        rc = plan_add(out, &op, NULL, 0, NULL, e);
    }
    /* Beside them, one delay: issued last, it holds the launch thread for every launch of the step
     * and then the rest of the step's critical path, so alone the step takes as long as the fine one. */
    sim_ps_t rest = fine_ps > launch_ps ? fine_ps - launch_ps : 0;
    plan_op_t tail = {.kind = in->n_ops ? in->ops[0].kind : 0, .layer = PLAN_NO_LAYER, .stream = stream,
                      .launch_ps = launch_ps, .cost = {.latency_ps = rest}};
    if (!rc) rc = plan_add(out, &tail, NULL, 0, NULL, e);
    free(load);
    return rc;
}
