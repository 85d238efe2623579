/* exec_launch — the launch thread of a CUDA context (a serial FIFO server of runs' launches) and
 * its hardware work queues. */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

static void ctx_kick(exec_t *x, ctx_t *c);

/* ---- the launch thread --------------------------------------------------------------------- */

static bool graphs(const exec_t *x) { return x->cfg.cuda_graphs; }

/* Host time to launch op o: its own launch, or with graphs one launch per segment. */
static sim_ps_t launch_cost(const exec_t *x, const xop_t *o)
{
    if (!graphs(x)) return o->op.launch_ps;
    return o->segment_start ? x->cfg.graph_launch_ps : 0;
}

/* The next op of r can be launched now (a host_sync op waits for its predecessors). */
static bool launchable(const run_t *r)
{
    if (r->next_launch >= r->n_ops) return false;
    const xop_t *o = &r->ops[r->next_launch];
    return !o->op.host_sync || o->pending == 0;
}

static void ctx_enqueue(ctx_t *c, run_t *r)
{
    r->in_launch_queue = true;
    r->launch_next = NULL;
    if (c->q_tail) c->q_tail->launch_next = r;
    else c->q_head = r;
    c->q_tail = r;
}

/* The thread goes on with r's next op at once: a host thread issues a step's launches back to back
 * (they are asynchronous) until one must wait for the GPU. */
static void ctx_continue(ctx_t *c, run_t *r)
{
    if (r->in_launch_queue || !launchable(r)) return;
    r->in_launch_queue = true;
    r->launch_next = c->q_head;
    c->q_head = r;
    if (!c->q_tail) c->q_tail = r;
}

/* The hardware queue of o's stream, -1 when queues are not modelled (host ops included). A stream
 * takes its context's next queue, round robin, when first used, as the driver assigns them to
 * streams as they are created. */
static int op_queue(const run_t *r, const xop_t *o)
{
    exec_t *x = r->x;
    uint32_t h = x->cfg.hw_queues;
    if (!h || x->pol->batching || o->op.exec == PLAN_EXEC_CPU) return -1;
    sess_t *s = r->members[0];
    if (!s->queue_of) {
        if (!(s->queue_of = malloc(256))) {
            exec_fail(x, ERR_NOMEM, "exec: out of memory");
            return -1;
        }
        memset(s->queue_of, 0xff, 256);
    }
    uint8_t st = x->cfg.one_stream ? 0 : o->op.stream;
    if (s->queue_of[st] < 0) s->queue_of[st] = (int8_t)(r->ctx->streams_made++ % h);
    return s->queue_of[st];
}

static void op_launched(xop_t *o, sim_ps_t now)
{
    o->launched = true;
    o->t_launch = now;
    o->run->next_launch++;
    o->queue = (int8_t)op_queue(o->run, o);
    if (o->queue >= 0) {
        xop_t **tail = &o->run->ctx->hwq_tail[o->queue];
        if (*tail) {
            (*tail)->q_next = o;
            o->q_blocked = true;
        }
        *tail = o;
    }
    exec_op_try_start(o);
}

static void launch_done(sim_t *sim, void *arg)
{
    ctx_t *c = arg;
    run_t *r = c->launching;
    c->launching = NULL;
    op_launched(&r->ops[r->next_launch], sim_now(sim));
    ctx_continue(c, r);
    ctx_kick(c->x, c);
}

/* Serves the context's FIFO of runs: free launches are done at once, costly ones take the thread. */
static void ctx_kick(exec_t *x, ctx_t *c)
{
    while (!c->launching && c->q_head) {
        run_t *r = c->q_head;
        c->q_head = r->launch_next;
        if (!c->q_head) c->q_tail = NULL;
        r->in_launch_queue = false;
        if (!launchable(r)) continue;
        xop_t *o = &r->ops[r->next_launch];
        sim_ps_t cost = launch_cost(x, o);
        if (cost == 0) {
            op_launched(o, sim_now(x->sim));
            ctx_continue(c, r);
            continue;
        }
        err_t e;
        c->launching = r;
        c->busy_ps += cost;
        if (sim_at(x->sim, sim_now(x->sim) + cost, launch_done, c, &e)) {
            exec_fail_err(x, &e);
            return;
        }
    }
}

void exec_run_unqueue(run_t *r)
{
    if (!r->in_launch_queue || !r->thread) return;
    ctx_t *c = r->thread;
    run_t *prev = NULL;
    for (run_t *q = c->q_head; q; prev = q, q = q->launch_next) {
        if (q != r) continue;
        if (prev) prev->launch_next = q->launch_next;
        else c->q_head = q->launch_next;
        if (c->q_tail == q) c->q_tail = prev;
        break;
    }
    r->in_launch_queue = false;
}

void exec_run_kick_launch(run_t *r)
{
    if (!r->in_launch_queue && launchable(r)) {
        ctx_enqueue(r->thread, r);
        ctx_kick(r->x, r->thread);
    }
}
