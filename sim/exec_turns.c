/* exec_turns — gathers and kernels taking the GPU in turns (exec_config_t.gathers_exclusive). */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- gathers and kernels taking turns (gathers_exclusive) ----------------------------------- */

/* 1: a kernel; 2: a GPU op whose SMs read host memory; 0: neither (copies, host ops). */
static int excl_kind(const exec_t *x, const xop_t *o)
{
    if (!x->cfg.gathers_exclusive || o->op.exec != PLAN_EXEC_GPU) return 0;
    return o->op.bytes_host > 0 ? 2 : 1;
}

/* Whether o must wait for its turn (the other kind running, or ops ready before it waiting): then
 * it is queued. Else it counts as running. */
bool exec_turn_wait(xop_t *o)
{
    exec_t *x = o->run->x;
    gpu_t *g = o->run->gpu;
    int k = excl_kind(x, o);
    if (!k) return false;
    bool given = o->turn_given;
    o->turn_given = false;
    if (!given && (g->kind_running[3 - k] || g->turn_waits.head < g->turn_waits.n)) {
        o->t_ready = sim_now(x->sim);
        if (exec_push_ptr((void ***)&g->turn_waits.ops, &g->turn_waits.n, &g->turn_waits.cap, o))
            exec_fail(x, ERR_NOMEM, "exec: out of memory");
        return true;
    }
    g->kind_running[k]++;
    return false;
}

/* Starts the waiting ops, oldest first, while the head's kind may run (re-entered from an op that
 * ends at once: the outer call goes round again). */
static void turns_next(exec_t *x, gpu_t *g)
{
    if (g->in_turns) {
        g->turns_again = true;
        return;
    }
    g->in_turns = true;
    gpu_wait_t *w = &g->turn_waits;
    do {
        g->turns_again = false;
        while (w->head < w->n) {
            xop_t *h = w->ops[w->head];
            if (g->kind_running[3 - excl_kind(x, h)]) break;
            w->head++;
            x->stats.lost_ps[sim_res_count(x->sim) + EXEC_LOST_TURNS] += (double)(sim_now(x->sim) - h->t_ready);
            h->turn_given = true;
            exec_op_start(h);
        }
    } while (g->turns_again);
    if (w->head >= w->n) w->head = w->n = 0;
    g->in_turns = false;
}

/* o is done: with none of its kind left running, the other kind's turn. */
void exec_turn_done(xop_t *o)
{
    exec_t *x = o->run->x;
    gpu_t *g = o->run->gpu;
    int k = excl_kind(x, o);
    if (k && --g->kind_running[k] == 0) turns_next(x, g);
}
