/* policy_timeslice — the serving policy of separate processes without MPS: their contexts take each
 * GPU in time slices (host-thread ops are not sliced). */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- time slicing between separate processes ------------------------------------------------ */

/* The owner's ops start while no other context waits or its slice lasts. */
static bool gpu_admits(const exec_t *x, const gpu_t *g, const ctx_t *c)
{
    if (g->switching || g->owner != c) return false;
    return g->waits.head >= g->waits.n || sim_now(x->sim) - g->slice_start < g->slice_ps;
}

static void gpu_wait(exec_t *x, gpu_t *g, xop_t *o)
{
    o->waiting_gpu = true;
    if (exec_push_ptr((void ***)&g->waits.ops, &g->waits.n, &g->waits.cap, o)) exec_fail(x, ERR_NOMEM, "exec: out of memory");
}

/* Gives the GPU to c with every op of c waiting for it (collected first: starting one may queue
 * others). An event recorded before a run's first op fires when that op gets the GPU. */
static void gpu_grant(exec_t *x, gpu_t *g, ctx_t *c)
{
    sim_ps_t now = sim_now(x->sim);
    g->owner = c;
    g->last_owner = c->serial;
    g->slice_start = now;
    g->slice_ps = x->cfg.timeslice_ps - (c->slice_debt_ps < x->cfg.timeslice_ps ? c->slice_debt_ps : x->cfg.timeslice_ps);
    c->slice_debt_ps = 0;
    gpu_wait_t *w = &g->waits;
    size_t n_go = 0, keep = w->head;
    for (size_t i = w->head; i < w->n; i++) n_go += w->ops[i]->run->ctx == c;
    xop_t **go = malloc((n_go + 1) * sizeof *go);
    if (!go) { exec_fail(x, ERR_NOMEM, "exec: out of memory"); return; }
    n_go = 0;
    for (size_t i = w->head; i < w->n; i++) {
        xop_t *wo = w->ops[i];
        if (wo->run->ctx == c) go[n_go++] = wo;
        else w->ops[keep++] = wo;
    }
    w->n = keep;
    if (w->head >= w->n) w->head = w->n = 0;
    g->owner_running += (uint32_t)n_go;
    for (size_t i = 0; i < n_go; i++) {
        go[i]->waiting_gpu = false;
        x->stats.lost_ps[sim_res_count(x->sim) + EXEC_LOST_TIMESLICE] += (double)(now - go[i]->t_ready);
        if (go[i]->pos == 0) go[i]->run->t_window = now;
        exec_op_start(go[i]);
    }
    free(go);
}

static void switch_done(sim_t *sim, void *arg)
{
    (void)sim;
    gpu_t *g = arg;
    g->switching = false;
    gpu_grant(g->x, g, g->waits.ops[g->waits.head]->run->ctx);
}

/* Passes the idle GPU to c (o, if any, waits with c's other ops): at once when the GPU holds c's
 * state or none yet, else after a context switch, the preemption's when the last owner's slice ran
 * out while c waited, else the idle one's. */
static void gpu_pass(exec_t *x, gpu_t *g, ctx_t *c, xop_t *o, bool preempted)
{
    if (o) gpu_wait(x, g, o);
    sim_ps_t cost = preempted ? x->cfg.ctx_switch_ps : x->cfg.ctx_switch_idle_ps;
    if (c->serial == g->last_owner || !g->last_owner || cost == 0) {
        gpu_grant(x, g, c);
        return;
    }
    err_t e;
    g->switching = true;
    if (sim_at(x->sim, sim_now(x->sim) + cost, switch_done, g, &e)) exec_fail_err(x, &e);
}

/* The owner has no op in flight: the longest-waiting context gets the GPU, if any. The GPU
 * preempts a context at its slice's end; here the op in flight runs on, and what the slice ran
 * past its length comes off the context's next slice, so that its share over slices is the same. */
static void gpu_release(exec_t *x, gpu_t *g)
{
    if (g->owner_running || g->switching || !g->owner) return;
    sim_ps_t used = sim_now(x->sim) - g->slice_start;
    bool preempted = g->waits.head < g->waits.n && used >= g->slice_ps;
    if (preempted && used > g->slice_ps) g->owner->slice_debt_ps = used - g->slice_ps;
    g->owner = NULL;
    if (g->waits.head < g->waits.n) gpu_pass(x, g, g->waits.ops[g->waits.head]->run->ctx, NULL, preempted);
}

/* Only kernels are sliced: host-thread ops are not, and the copy engines run lists of their own
 * (two processes' copies share the link as one process's do: DESIGN.md "Time slices"). */
static bool sliced(const xop_t *o) { return o->op.exec == PLAN_EXEC_GPU; }

/* o waits unless the GPU is idle with no one waiting (it passes to o's context) or o's context holds
 * it within its slice. */
static bool op_hold(exec_t *x, xop_t *o)
{
    if (!sliced(o)) return false;
    gpu_t *g = o->run->gpu;
    ctx_t *c = o->run->ctx;
    if (!g->owner && !g->switching && g->waits.head >= g->waits.n) {
        gpu_pass(x, g, c, o, false);
        return true;
    }
    if (!gpu_admits(x, g, c)) {
        gpu_wait(x, g, o);
        return true;
    }
    g->owner_running++;
    return false;
}

static void op_ending(exec_t *x, xop_t *o)
{
    if (sliced(o)) o->run->gpu->owner_running--;
}

/* After o's successors had their chance within the slice. */
static void op_ended(exec_t *x, xop_t *o)
{
    if (sliced(o)) gpu_release(x, o->run->gpu);
}

const exec_policy_t exec_policy_processes = {
    .own_ctx = true, .op_hold = op_hold, .op_ending = op_ending, .op_ended = op_ended};
