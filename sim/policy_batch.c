/* policy_batch — the serving policies of lockstep and continuous batching: one iteration at a time
 * per GPU over the batched sessions' merged plans. */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

/* Batching: starts the GPU's next iteration when it is idle and its batch is ready (lockstep: every
 * admitted session that is not waiting for memory). */
static void batch_kick(exec_t *x, gpu_t *g)
{
    if (g->iterating || !g->n_ready) return;
    if (x->pol == &exec_policy_lockstep && g->n_ready < g->live - g->waiting_mem) return;
    uint32_t n = (uint32_t)g->n_ready;
    if (x->cfg.max_batch && n > x->cfg.max_batch) n = x->cfg.max_batch;
    sess_t **taken = malloc(n * sizeof *taken);
    if (!taken) {
        exec_fail(x, ERR_NOMEM, "exec: out of memory");
        return;
    }
    memcpy(taken, g->ready, n * sizeof *taken);
    memmove(g->ready, g->ready + n, (g->n_ready - n) * sizeof *g->ready);
    g->n_ready -= n;
    uint32_t m = 0, blocked = 0;
    for (uint32_t i = 0; i < n; i++) {
        sess_t *s = taken[i];
        err_t e;
        int rc = exec_sess_build(s, &e);
        if (rc && rc != ERR_CAPACITY) {
            free(taken);
            exec_fail_err(x, &e);
            return;
        }
        s->state = rc ? S_WAIT_MEM : S_RUNNING;
        if (rc) taken[n - 1 - blocked++] = s; /* blocked ones collect at the end, members at the front */
        else taken[m++] = s;
    }
    if (m) {
        err_t e;
        g->iterating = true;
        if (exec_run_start(x, g, &x->gpu_ctx[g->index], taken, m, &e)) exec_fail_err(x, &e);
    }
    for (uint32_t i = n - blocked; i < n; i++) exec_sess_blocked(taken[i]);
    free(taken);
}

/* s waits for the next iteration, formed once every session ready at this instant has joined. */
static void sess_ready(sess_t *s)
{
    s->state = S_READY;
    if (exec_push_ptr((void ***)&s->gpu->ready, &s->gpu->n_ready, &s->gpu->cap_ready, s)) {
        exec_fail(s->x, ERR_NOMEM, "exec: out of memory");
        return;
    }
    exec_kick_later(s->x, s->gpu);
}

static void run_done(exec_t *x, gpu_t *g)
{
    g->iterating = false;
    exec_kick_later(x, g);
}

const exec_policy_t exec_policy_lockstep = {
    .batching = true, .sess_ready = sess_ready, .run_done = run_done, .gpu_kick = batch_kick};
const exec_policy_t exec_policy_continuous = {
    .batching = true, .sess_ready = sess_ready, .run_done = run_done, .gpu_kick = batch_kick};
