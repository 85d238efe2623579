/* exec_admit — sessions' memory and admission: reserve or grow, preempt or evict when a pool is
 * full, and arrivals of one instant admitted in session-id order. */
#include "sim/exec_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory and admission ------------------------------------------------------------------- */

static int sess_footprint(sess_t *s, uint64_t tokens, double *hbm, double *host, err_t *e)
{
    *hbm = *host = 0;
    if (!s->prov.ops->footprint) return ERR_OK;
    return s->prov.ops->footprint(s->prov.self, tokens, hbm, host, e);
}

/* Host memory a session could ever hold: the host pool and the tier it spills into. */
static double host_capacity(const exec_t *x)
{
    const exec_config_t *c = &x->cfg;
    if (c->host_pool < 0) return INFINITY;
    return sim_pool_capacity(x->sim, c->host_pool) + (c->host_spill ? sim_pool_capacity(x->sim, c->host_spill_pool) : 0);
}

/* Grows the session's holdings to its footprint at `tokens`; nothing is taken on ERR_CAPACITY.
 * A session that could not fit on an empty machine is ERR_INFEASIBLE, with its numbers. */
int exec_sess_hold(sess_t *s, uint64_t tokens, err_t *e)
{
    double hbm, host;
    int rc = sess_footprint(s, tokens, &hbm, &host, e);
    if (rc) return rc;
    const exec_config_t *c = &s->x->cfg;
    if (host > host_capacity(s->x)) {
        char tier[128] = "";
        if (c->host_spill)
            snprintf(tier, sizeof tier, " + %s %.1f GB", sim_pool_name(s->x->sim, c->host_spill_pool),
                     sim_pool_capacity(s->x->sim, c->host_spill_pool) / 1e9);
        return err_set(e, ERR_INFEASIBLE, "infeasible: session %llu needs %.1f GB of host memory at %llu tokens; %s %.1f GB%s",
                       (unsigned long long)s->id, host / 1e9, (unsigned long long)tokens, sim_pool_name(s->x->sim, c->host_pool),
                       sim_pool_capacity(s->x->sim, c->host_pool) / 1e9, tier);
    }
    double d_hbm = hbm > s->hbm_held ? hbm - s->hbm_held : 0, d_host = host > s->host_held ? host - s->host_held : 0;
    if (d_hbm > 0 && (rc = plan_env_alloc(&s->env, true, d_hbm, e))) return rc;
    if (d_host > 0 && (rc = plan_env_alloc(&s->env, false, d_host, e))) {
        plan_env_release(&s->env, true, d_hbm);
        return rc;
    }
    s->hbm_held += d_hbm;
    s->host_held += d_host;
    return ERR_OK;
}

void exec_sess_release(sess_t *s)
{
    plan_env_release(&s->env, true, s->hbm_held);
    plan_env_release(&s->env, false, s->host_held);
    s->hbm_held = s->host_held = 0;
}

/* Memory freed on g: its own waiting sessions first, then every other GPU's (host memory and its
 * tier are shared by the box). */
static void kick_all(exec_t *x, gpu_t *g)
{
    exec_mem_kick(x, g);
    for (int i = 0; i < x->cfg.n_gpus; i++)
        if (&x->gpus[i] != g) exec_mem_kick(x, &x->gpus[i]);
}

/* A user's next session: the context starts over; growth-mode holdings shrink to the new size
 * (a reservation is kept: it covers the largest session). */
void exec_sess_restart(sess_t *s, uint64_t tokens)
{
    s->context = tokens;
    if (s->x->cfg.admission == EXEC_ADMIT_RESERVE) return;
    double hbm = 0, host = 0;
    err_t e;
    if (sess_footprint(s, tokens, &hbm, &host, &e)) {
        exec_fail_err(s->x, &e);
        return;
    }
    if (hbm < s->hbm_held) plan_env_release(&s->env, true, s->hbm_held - hbm);
    if (host < s->host_held) plan_env_release(&s->env, false, s->host_held - host);
    if (hbm < s->hbm_held) s->hbm_held = hbm;
    if (host < s->host_held) s->host_held = host;
    kick_all(s->x, s->gpu);
}

void exec_sess_finish(sess_t *s, bool evicted)
{
    exec_t *x = s->x;
    s->state = S_DONE;
    exec_sess_release(s);
    if (s->admitted) s->gpu->live--;
    exec_stats_t *st[2];
    for (size_t i = 0, n = exec_sess_stats(s, st); i < n; i++) {
        if (evicted) st[i]->evictions++;
        else st[i]->sessions_done++;
    }
    kick_all(x, s->gpu);
    exec_sess_retire_later(s);
    exec_kick_later(x, s->gpu);
}

static void sess_wait_mem(sess_t *s)
{
    s->state = S_WAIT_MEM;
    if (exec_push_ptr((void ***)&s->gpu->admitq, &s->gpu->n_admitq, &s->gpu->cap_admitq, s))
        exec_fail(s->x, ERR_NOMEM, "exec: out of memory");
}

/* A running session whose context cannot grow: evicted, or preempted until memory frees. */
void exec_sess_blocked(sess_t *s)
{
    if (s->x->cfg.admission == EXEC_ADMIT_GROW_EVICT) {
        exec_sess_finish(s, true);
        return;
    }
    exec_stats_t *st[2];
    for (size_t i = 0, n = exec_sess_stats(s, st); i < n; i++) st[i]->preemptions++;
    s->gpu->waiting_mem++;
    sess_wait_mem(s);
}

/* Admission: reserve takes the final footprint now; grow takes the current one. */
static int sess_try_admit(sess_t *s, err_t *e)
{
    exec_t *x = s->x;
    uint64_t tokens = x->cfg.admission == EXEC_ADMIT_RESERVE ? s->final_tokens : s->context;
    int rc = exec_sess_hold(s, tokens, e);
    if (rc) return rc;
    s->admitted = true;
    s->gpu->live++;
    exec_stats_t *st[2];
    for (size_t i = 0, n = exec_sess_stats(s, st); i < n; i++) hist_add(st[i]->admit_wait_s, ps_to_s(sim_now(x->sim) - s->t_arrive));
    return ERR_OK;
}

uint32_t exec_next_chunk(const sess_t *s)
{
    uint32_t c = s->x->cfg.prefill_chunk;
    return s->prefill_left ? (s->prefill_left < c ? s->prefill_left : c) : 1;
}

/* Retries the sessions waiting for memory on g, in arrival order; those that still do not fit keep
 * their place ahead of any that queue meanwhile. */
void exec_mem_kick(exec_t *x, gpu_t *g)
{
    if (g->in_mem_kick) {
        g->mem_kick_again = true;
        return;
    }
    g->in_mem_kick = true;
    do {
        g->mem_kick_again = false;
        sess_t **q = g->admitq;
        size_t n = g->n_admitq, keep = 0;
        g->admitq = NULL;
        g->n_admitq = g->cap_admitq = 0;
        for (size_t i = 0; i < n; i++) {
            sess_t *s = q[i];
            err_t e;
            bool was_admitted = s->admitted;
            int rc = was_admitted ? exec_sess_hold(s, s->context + exec_next_chunk(s), &e) : sess_try_admit(s, &e);
            if (rc == ERR_CAPACITY) {
                q[keep++] = s;
                continue;
            }
            if (rc) {
                exec_fail_err(x, &e);
                break;
            }
            if (was_admitted) g->waiting_mem--;
            if (was_admitted) exec_sess_next(s);
            else exec_sess_start_turn(s);
        }
        for (size_t i = 0; i < g->n_admitq; i++) q[keep++] = g->admitq[i]; /* n ≥ keep + these */
        free(g->admitq);
        g->admitq = q;
        g->n_admitq = keep;
        g->cap_admitq = n;
    } while (g->mem_kick_again);
    g->in_mem_kick = false;
}

static void sess_admit_first(sess_t *s)
{
    err_t e;
    int rc = sess_try_admit(s, &e);
    if (rc == ERR_CAPACITY) {
        sess_wait_mem(s);
        return;
    }
    if (rc) {
        exec_fail_err(s->x, &e);
        return;
    }
    exec_sess_start_turn(s);
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = (*(sess_t *const *)a)->id, y = (*(sess_t *const *)b)->id;
    return (x > y) - (x < y);
}

/* Sessions arriving at one instant are admitted in session-id order, after every arrival of that
 * instant: results do not depend on the order sessions were listed in. */
static void arrivals_flush(sim_t *sim, void *arg)
{
    (void)sim;
    exec_t *x = arg;
    sess_t **batch = x->arriving;
    size_t n = x->n_arriving;
    x->arriving = NULL;
    x->n_arriving = x->cap_arriving = 0;
    x->arrivals_pending = false;
    qsort(batch, n, sizeof *batch, by_id);
    for (size_t i = 0; i < n; i++) sess_admit_first(batch[i]);
    free(batch);
}

void exec_sess_arrive(sim_t *sim, void *arg)
{
    sess_t *s = arg;
    exec_t *x = s->x;
    s->t_arrive = sim_now(sim);
    err_t e;
    if (exec_push_ptr((void ***)&x->arriving, &x->n_arriving, &x->cap_arriving, s)) {
        exec_fail(x, ERR_NOMEM, "exec: out of memory");
        return;
    }
    if (x->arrivals_pending) return;
    x->arrivals_pending = true;
    if (sim_at(sim, sim_now(sim), arrivals_flush, x, &e)) exec_fail_err(x, &e);
}
