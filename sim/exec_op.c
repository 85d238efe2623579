/* exec_op — an op's life: ready when launched and its predecessors are done, held by the serving
 * policy or the gathers' turns, run as a fluid flow, and its successors told when done. */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

/* A kernel after a copy-engine op: its start waits for the copy's completion to reach the SMs. */
bool exec_handoff(const exec_t *x, const xop_t *pred, const xop_t *succ)
{
    return (x->cfg.copy_handoff_ps > 0 || x->cfg.copy_handoff_spread_ps > 0) && plan_handoff(&pred->op, &succ->op);
}

/* One predecessor of s is done (after its hand-off, if any). */
static void dep_done(sim_t *sim, void *arg)
{
    xop_t *s = arg;
    if (--s->pending) return;
    s->t_deps = sim_now(sim);
    exec_op_try_start(s);
    if (s->pos == s->run->next_launch) exec_run_kick_launch(s->run);
}

static void op_finish(xop_t *o)
{
    run_t *r = o->run;
    exec_t *x = r->x;
    o->done = true;
    o->t_end = sim_now(x->sim);
    if (r->traced) {
        if (x->n_timeline == x->cap_timeline) {
            size_t nc = x->cap_timeline ? 2 * x->cap_timeline : 256;
            exec_trace_op_t *nt = realloc(x->timeline, nc * sizeof *nt);
            if (!nt) { exec_fail(x, ERR_NOMEM, "exec: out of memory"); return; }
            x->timeline = nt;
            x->cap_timeline = nc;
        }
        x->timeline[x->n_timeline++] = (exec_trace_op_t){
            .session = o->session, .batch = o->batch, .plan = r->seq, .kind = o->op.kind,
            .layer = o->op.layer, .exec = o->op.exec, .stream = o->op.stream, .gpu = r->gpu->index,
            .t_launch_ps = o->t_launch, .t_start_ps = o->t_start, .t_end_ps = o->t_end,
            .track = o->op.n_uses ? o->op.uses[0].res : -1};
    }
    if (x->pol->op_ending) x->pol->op_ending(x, o);
    for (uint32_t k = 0; k < o->n_succ; k++) {
        xop_t *s = &r->ops[r->succ[o->succ_first + k]];
        err_t e;
        if (exec_handoff(x, o, s)) {
            if (sim_at(x->sim, sim_now(x->sim) + exec_handoff_draw_ps(x), dep_done, s, &e)) exec_fail_err(x, &e);
        } else {
            dep_done(x->sim, s);
        }
    }
    if (x->pol->op_ended) x->pol->op_ended(x, o);
    exec_turn_done(o);
    if (++r->n_done == r->n_ops) exec_run_complete(r);
}

static void flow_done(sim_t *sim, void *arg, sim_flow_t *f)
{
    (void)sim;
    (void)f;
    op_finish(arg);
}

static void delay_done(sim_t *sim, void *arg)
{
    (void)sim;
    op_finish(arg);
}

int exec_op_cost(const xop_t *o, plan_cost_t *c) { return plan_op_cost(&o->op, o->batch, c); }

/* The op's time alone on the idle machine: its latency, then its work at its slowest bound. */
sim_ps_t exec_op_alone_ps(const exec_t *x, const xop_t *o, const plan_cost_t *c)
{
    double rate = c->cap_rate > 0 ? c->cap_rate : INFINITY;
    for (uint32_t u = 0; u < o->op.n_uses; u++) {
        double cr = sim_res_capacity(x->sim, o->op.uses[u].res) / o->op.uses[u].coef;
        if (cr < rate) rate = cr;
    }
    return sim_ps_add(c->latency_ps, c->work > 0 && isfinite(rate) ? sim_ps_or_never(c->work / rate) : 0);
}


static void op_begin_flow(xop_t *o)
{
    exec_t *x = o->run->x;
    o->started = true;
    o->t_start = sim_now(x->sim);
    plan_cost_t c;
    err_t e;
    int rc = exec_op_cost(o, &c);
    if (rc) { exec_fail(x, rc, "exec: an op's cost model failed"); return; }
    exec_op_jitter(x, o, &c);
    if (o->op.n_uses == 0 && c.cap_rate <= 0) {
        if (c.work > 0) { exec_fail(x, ERR_INVAL, "exec: an op moves work over no resource"); return; }
        if (sim_at(x->sim, o->t_start + c.latency_ps, delay_done, o, &e)) exec_fail_err(x, &e);
        return;
    }
    sim_res_t res[PLAN_MAX_USES];
    double coef[PLAN_MAX_USES];
    for (uint32_t u = 0; u < o->op.n_uses; u++) {
        res[u] = o->op.uses[u].res;
        coef[u] = o->op.uses[u].coef;
    }
    sim_flow_spec_t spec = {
        .work = c.work, .cap_rate = c.cap_rate, .weight = o->op.weight > 0 ? o->op.weight : 1.0,
        .latency_ps = c.latency_ps, .n_uses = o->op.n_uses, .res = res, .coef = coef,
        .charge_ps = x->stats.lost_ps, .done = flow_done, .arg = o};
    if (sim_flow_start(x->sim, &spec, NULL, &e)) exec_fail_err(x, &e);
}

/* Starts o's flow (when its turn has come); the op launched after it on its hardware queue may
 * start now. */
void exec_op_start(xop_t *o)
{
    if (exec_turn_wait(o)) return;
    op_begin_flow(o);
    if (o->queue < 0) return;
    xop_t **tail = &o->run->ctx->hwq_tail[o->queue];
    if (*tail == o) *tail = NULL;
    xop_t *next = o->q_next;
    o->q_next = NULL;
    if (!next) return;
    next->q_blocked = false;
    if (next->pos == 0) next->run->t_window = sim_now(next->run->x->sim);
    exec_op_try_start(next);
}

/* Starts o when it is launched, its predecessors (and stream predecessor) are done, every op
 * launched before it on its hardware queue has started, and the serving policy does not hold it
 * (between separate processes: the GPU held by another context). */
void exec_op_try_start(xop_t *o)
{
    if (!o->launched || o->pending || o->started || o->waiting_gpu || o->q_blocked) return;
    exec_t *x = o->run->x;
    o->t_ready = sim_now(x->sim);
    /* Time an op was held back only by its launch is the launch thread's doing. */
    if (o->t_launch > o->t_deps) x->stats.lost_ps[sim_res_count(x->sim) + EXEC_LOST_LAUNCH] += (double)(o->t_launch - o->t_deps);
    if (x->pol->op_hold && x->pol->op_hold(x, o)) return;
    exec_op_start(o);
}
