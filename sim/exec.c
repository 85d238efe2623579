/* exec — the executor's public face: creating it, adding sessions, its results; the plan_env that
 * providers build plans through. The parts it runs on are in sim/exec_*.c and sim/policy*.c. */
#include "sim/exec_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------- */

/* The per-GPU context every session of a streams or batching run shares (not to be freed alone). */
static bool shared_ctx(const exec_t *x, const ctx_t *c)
{
    for (int g = 0; g < x->cfg.n_gpus; g++)
        if (c == &x->gpu_ctx[g]) return true;
    return false;
}

void exec_fail(exec_t *x, int code, const char *what)
{
    err_t e;
    err_set(&e, code, "%s", what);
    sim_fail(x->sim, &e);
}

void exec_fail_err(exec_t *x, const err_t *e) { sim_fail(x->sim, e); }

int exec_push_ptr(void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        void **na = realloc(*arr, nc * sizeof *na);
        if (!na) return ERR_NOMEM;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return ERR_OK;
}

/* ---- plan_env ------------------------------------------------------------------------------- */

sim_res_t plan_env_res(const plan_env_t *env, const char *name) { return sim_res_find(env->x->sim, name); }
const sim_t *plan_env_sim(const plan_env_t *env) { return env->x->sim; }
int plan_env_gpu(const plan_env_t *env) { return env->s->gpu->index; }
uint64_t plan_env_session(const plan_env_t *env) { return env->s->id; }

static sim_pool_t env_pool(const plan_env_t *env, bool hbm)
{
    const exec_t *x = env->x;
    return hbm ? (x->hbm_pool ? x->hbm_pool[env->s->gpu->index] : -1) : x->cfg.host_pool;
}

/* Host bytes fill host_pool first and spill into the tier's pool (cfg.host_spill). */
int plan_env_alloc(plan_env_t *env, bool hbm, double bytes, err_t *e)
{
    sim_pool_t p = env_pool(env, hbm);
    const exec_config_t *c = &env->x->cfg;
    sim_t *sim = env->x->sim;
    if (p < 0) return ERR_OK;
    if (hbm || !c->host_spill) return sim_pool_alloc(sim, p, bytes, e);
    double room = sim_pool_capacity(sim, p) - sim_pool_used(sim, p);
    if (room < 0) room = 0;
    if (bytes <= room) return sim_pool_alloc(sim, p, bytes, e);
    int rc = sim_pool_alloc(sim, c->host_spill_pool, bytes - room, e);
    if (!rc && room > 0) rc = sim_pool_alloc(sim, p, room, e);
    return rc;
}

void plan_env_release(plan_env_t *env, bool hbm, double bytes)
{
    sim_pool_t p = env_pool(env, hbm);
    const exec_config_t *c = &env->x->cfg;
    if (p < 0) return;
    if (!hbm && c->host_spill) {
        double tier = sim_pool_used(env->x->sim, c->host_spill_pool), from_tier = bytes < tier ? bytes : tier;
        sim_pool_release(env->x->sim, c->host_spill_pool, from_tier);
        bytes -= from_tier;
    }
    sim_pool_release(env->x->sim, p, bytes);
}

static void retire_pending(exec_t *x);

static void kick_ev(sim_t *sim, void *arg)
{
    (void)sim;
    gpu_t *g = arg;
    g->kick_pending = false;
    retire_pending(g->x);
    if (g->x->pol->gpu_kick) g->x->pol->gpu_kick(g->x, g);
}

void exec_kick_later(exec_t *x, gpu_t *g)
{
    err_t e;
    if (g->kick_pending) return;
    g->kick_pending = true;
    if (sim_at(x->sim, sim_now(x->sim), kick_ev, g, &e)) exec_fail_err(x, &e);
}

/* ---- public --------------------------------------------------------------------------------- */

/* The histograms a statistics record owns (admit_waiting_s is made by exec_stats); false: out of memory. */
static bool stats_hists_new(exec_stats_t *st)
{
    st->step_s = hist_new();
    st->ttft_s = hist_new();
    st->prefill_chunk_s = hist_new();
    st->admit_wait_s = hist_new();
    st->session_tps = hist_new();
    return st->step_s && st->ttft_s && st->prefill_chunk_s && st->admit_wait_s && st->session_tps;
}

static void stats_hists_free(exec_stats_t *st)
{
    hist_free(st->step_s);
    hist_free(st->ttft_s);
    hist_free(st->prefill_chunk_s);
    hist_free(st->admit_wait_s);
    hist_free(st->admit_waiting_s);
    hist_free(st->session_tps);
}

/* ---- retiring finished sessions -------------------------------------------------------------- */

/* s's tokens/s over the measured window, the sample stats_rebuild takes; false when it has none. */
static bool sess_window_tps(const sess_t *s, double *tps)
{
    uint64_t n = s->decoded - s->window_decoded;
    sim_ps_t t = s->t_decode_ps - s->window_decode_ps;
    if (!n || t <= 0) return false;
    *tps = (double)n / ps_to_s(t);
    return true;
}

static void sess_free(sess_t *s);

/* Frees s with its own context (the per-GPU ones are the executor's). */
static void sess_destroy(exec_t *x, sess_t *s)
{
    if (!shared_ctx(x, s->ctx)) free(s->ctx);
    sess_free(s);
}

void exec_sess_retire_later(sess_t *s)
{
    exec_t *x = s->x;
    /* out of memory: it stays among the sessions, counted as a finished one is until retired */
    (void)exec_push_ptr((void ***)&x->retiring, &x->n_retiring, &x->cap_retiring, s);
}

/* Drops the NULL slots of retired sessions, keeping the others' order (sums over the sessions go in
 * the order they were added), and gives back most of the room when few are left. */
static void sessions_compact(exec_t *x)
{
    size_t k = 0;
    for (size_t i = 0; i < x->n_sessions; i++) {
        if (!x->sessions[i]) continue;
        x->sessions[k] = x->sessions[i];
        x->sessions[k]->slot = k;
        k++;
    }
    x->n_sessions = k;
    x->n_retired_slots = 0;
    if (x->cap_sessions > 4 * (k + 8)) {
        sess_t **na = realloc(x->sessions, 2 * (k + 8) * sizeof *na);
        if (na) {
            x->sessions = na;
            x->cap_sessions = 2 * (k + 8);
        }
    }
}

/* Folds each finished session into what the statistics still read of it (its tokens/s sample, its
 * launch time; launch_threads counts sessions_added) and frees it: the executor holds the sessions
 * alive, not every session it ran. */
static void retire_pending(exec_t *x)
{
    for (size_t i = 0; i < x->n_retiring; i++) {
        sess_t *s = x->retiring[i];
        double tps;
        if (sess_window_tps(s, &tps) &&
            (hist_add(x->retired_tps[0], tps) || (x->groups && hist_add(x->retired_tps[1 + s->group], tps))))
            exec_fail(x, ERR_NOMEM, "exec: out of memory");
        if (x->pol->own_ctx) x->retired_busy_ps += s->ctx->busy_ps;
        if (s->thread) x->retired_busy_ps += s->thread->busy_ps;
        x->sessions[s->slot] = NULL;
        x->n_retired_slots++;
        sess_destroy(x, s);
    }
    x->n_retiring = 0;
    if (2 * x->n_retired_slots > x->n_sessions) sessions_compact(x);
}

int exec_new(sim_t *sim, const exec_config_t *cfg, exec_t **out, err_t *e)
{
    *out = NULL;
    if (cfg->n_gpus < 1 || cfg->n_gpus > 1024) return err_set(e, ERR_INVAL, "exec: %d GPUs", cfg->n_gpus);
    if (cfg->prefill_chunk < 1) return err_set(e, ERR_INVAL, "exec: prefill chunk must be ≥ 1 token");
    const exec_policy_t *pol = exec_policy_of(cfg->mode);
    if (!pol) return err_set(e, ERR_INVAL, "exec: unknown mode");
    if (cfg->graph_launch_ps < 0) return err_set(e, ERR_INVAL, "exec: negative graph launch time");
    if (cfg->copy_handoff_ps < 0 || cfg->copy_handoff_spread_ps < 0) return err_set(e, ERR_INVAL, "exec: negative copy hand-off");
    double j[6] = {cfg->jitter_abs_s, cfg->jitter_rel, cfg->jitter_copy_abs_s, cfg->jitter_copy_rel,
                   cfg->jitter_gather_abs_s, cfg->jitter_gather_rel};
    for (int i = 0; i < 6; i++)
        if (!(j[i] >= 0) || !isfinite(j[i])) return err_set(e, ERR_INVAL, "exec: jitter must be finite and >= 0");
    if (cfg->hw_queues > EXEC_MAX_HW_QUEUES)
        return err_set(e, ERR_INVAL, "exec: %u hardware queues (CUDA allows at most %d)", cfg->hw_queues, EXEC_MAX_HW_QUEUES);
    if (cfg->launch_per_session && pol->batching)
        return err_set(e, ERR_INVAL, "exec: mode %s issues every session from one thread (no launch thread per session)", exec_mode_name(cfg->mode));
    if (cfg->coarse && pol->batching)
        return err_set(e, ERR_INVAL, "exec: coarse plans drop merge keys, so they cannot be batched (mode %s)", exec_mode_name(cfg->mode));
    exec_t *x = calloc(1, sizeof *x);
    if (!x) return err_set(e, ERR_NOMEM, "exec: out of memory");
    x->sim = sim;
    x->cfg = *cfg;
    x->pol = pol;
    x->jitter_state = cfg->jitter_seed;
    x->gpus = calloc((size_t)cfg->n_gpus, sizeof *x->gpus);
    x->gpu_ctx = calloc((size_t)cfg->n_gpus, sizeof *x->gpu_ctx);
    x->stats.n_lost = sim_res_count(sim) + EXEC_LOST_EXTRA;
    x->stats.lost_ps = calloc(x->stats.n_lost, sizeof *x->stats.lost_ps);
    bool hists = stats_hists_new(&x->stats);
    if (cfg->n_groups && (x->groups = calloc(cfg->n_groups, sizeof *x->groups)))
        for (uint32_t g = 0; g < cfg->n_groups; g++) hists = stats_hists_new(&x->groups[g]) && hists;
    if ((x->retired_tps = calloc(1 + (size_t)cfg->n_groups, sizeof *x->retired_tps)))
        for (uint32_t g = 0; g <= cfg->n_groups; g++) hists = (x->retired_tps[g] = hist_new()) && hists;
    else hists = false;
    if (cfg->hbm_pool && (x->hbm_pool = malloc((size_t)cfg->n_gpus * sizeof *x->hbm_pool)))
        memcpy(x->hbm_pool, cfg->hbm_pool, (size_t)cfg->n_gpus * sizeof *x->hbm_pool);
    x->cfg.hbm_pool = x->hbm_pool;
    if (!x->gpus || !x->gpu_ctx || !x->stats.lost_ps || !hists || (cfg->n_groups && !x->groups) ||
        (cfg->hbm_pool && !x->hbm_pool)) {
        exec_free(x);
        return err_set(e, ERR_NOMEM, "exec: out of memory");
    }
    for (int g = 0; g < cfg->n_gpus; g++) {
        x->gpus[g].index = g;
        x->gpus[g].x = x;
        x->gpu_ctx[g].x = x;
        x->gpu_ctx[g].serial = ++x->ctx_serial;
    }
    *out = x;
    return ERR_OK;
}

static void sess_free(sess_t *s)
{
    if (s->state != S_DONE) exec_sess_release(s);
    if (s->prov.ops && s->prov.ops->destroy) s->prov.ops->destroy(s->prov.self, &s->env);
    plan_free(&s->plan);
    plan_free(&s->fine);
    free(s->thread);
    free(s->turns);
    free(s->queue_of);
    free(s);
}

void exec_free(exec_t *x)
{
    if (!x) return;
    while (x->runs) exec_run_free(x->runs);
    for (size_t i = 0; i < x->n_sessions; i++)
        if (x->sessions[i]) sess_destroy(x, x->sessions[i]);
    free(x->sessions);
    free(x->retiring);
    for (uint32_t g = 0; x->retired_tps && g <= x->cfg.n_groups; g++) hist_free(x->retired_tps[g]);
    free(x->retired_tps);
    for (int g = 0; x->gpus && g < x->cfg.n_gpus; g++) {
        free(x->gpus[g].waits.ops);
        free(x->gpus[g].turn_waits.ops);
        free(x->gpus[g].ready);
        free(x->gpus[g].admitq);
    }
    free(x->gpus);
    free(x->gpu_ctx);
    free(x->arriving);
    free(x->stats.lost_ps);
    stats_hists_free(&x->stats);
    for (uint32_t g = 0; x->groups && g < x->cfg.n_groups; g++) stats_hists_free(&x->groups[g]);
    free(x->groups);
    free(x->timeline);
    free(x->hbm_pool);
    free(x);
}

static int spec_check(const exec_t *x, const exec_session_spec_t *spec, err_t *e)
{
    if (spec->gpu < 0 || spec->gpu >= x->cfg.n_gpus)
        return err_set(e, ERR_INVAL, "session %llu: GPU %d of %d", (unsigned long long)spec->id, spec->gpu, x->cfg.n_gpus);
    if (spec->group && spec->group >= x->cfg.n_groups)
        return err_set(e, ERR_INVAL, "session %llu: group %u of %u", (unsigned long long)spec->id, spec->group, x->cfg.n_groups);
    if (!spec->n_turns) return err_set(e, ERR_INVAL, "session %llu: no turns", (unsigned long long)spec->id);
    if (!spec->provider.ops || !spec->provider.ops->build)
        return err_set(e, ERR_INVAL, "session %llu: no plan provider", (unsigned long long)spec->id);
    if (!(spec->arrival_s >= 0) || !isfinite(spec->arrival_s))
        return err_set(e, ERR_INVAL, "session %llu: arrival %g s", (unsigned long long)spec->id, spec->arrival_s);
    for (size_t i = 0; i < spec->n_turns; i++) {
        const exec_turn_t *t = &spec->turns[i];
        if (!t->decode_tokens)
            return err_set(e, ERR_INVAL, "session %llu turn %zu: no decode tokens", (unsigned long long)spec->id, i);
        if (!(t->think_s >= 0) || !isfinite(t->think_s))
            return err_set(e, ERR_INVAL, "session %llu turn %zu: think time %g s", (unsigned long long)spec->id, i, t->think_s);
        if (!(t->step_idle_s >= 0) || !isfinite(t->step_idle_s))
            return err_set(e, ERR_INVAL, "session %llu turn %zu: idle time %g s between steps", (unsigned long long)spec->id, i, t->step_idle_s);
    }
    return ERR_OK;
}

int exec_add_session(exec_t *x, const exec_session_spec_t *spec, err_t *e)
{
    int rc = spec_check(x, spec, e);
    sess_t *s = rc ? NULL : calloc(1, sizeof *s);
    if (!rc && !s) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    if (!rc && !(s->turns = malloc(spec->n_turns * sizeof *s->turns))) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    ctx_t *c = rc ? NULL : x->pol->own_ctx ? calloc(1, sizeof *c) : &x->gpu_ctx[spec->gpu];
    if (c && !shared_ctx(x, c)) {
        c->x = x;
        c->serial = ++x->ctx_serial;
    }
    if (!rc && !c) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    bool own_thread = x->cfg.launch_per_session && !x->pol->own_ctx;
    ctx_t *th = !rc && own_thread ? calloc(1, sizeof *th) : NULL;
    if (th) {
        th->x = x;
        th->serial = ++x->ctx_serial;
    }
    if (!rc && own_thread && !th) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    if (s) s->slot = x->n_sessions;
    if (!rc && exec_push_ptr((void ***)&x->sessions, &x->n_sessions, &x->cap_sessions, s)) rc = err_set(e, ERR_NOMEM, "exec: out of memory");
    if (!rc) x->sessions_added++;
    if (rc) {
        if (spec->provider.ops && spec->provider.ops->destroy) {
            plan_env_t env = {x, NULL};
            spec->provider.ops->destroy(spec->provider.self, &env);
        }
        if (s) free(s->turns);
        if (c && !shared_ctx(x, c)) free(c);
        free(th);
        free(s);
        return rc;
    }
    memcpy(s->turns, spec->turns, spec->n_turns * sizeof *s->turns);
    s->x = x;
    s->id = spec->id;
    s->gpu = &x->gpus[spec->gpu];
    s->ctx = c;
    s->thread = th;
    s->prov = spec->provider;
    s->env = (plan_env_t){x, s};
    s->n_turns = spec->n_turns;
    s->open_loop = spec->open_loop;
    s->group = spec->group;
    s->context = spec->context_tokens;
    s->final_tokens = spec->final_tokens > spec->context_tokens ? spec->final_tokens : spec->context_tokens;
    s->state = S_ARRIVING;
    plan_init(&s->plan);
    plan_init(&s->fine);
    /* an arrival beyond what the clock holds is after every run's end: the session never arrives */
    sim_ps_t at = sim_ps_or_never(spec->arrival_s);
    if (at != SIM_TIME_NEVER && sim_at(x->sim, at, exec_sess_arrive, s, e)) return e ? e->code : ERR_INVAL;
    return ERR_OK;
}

/* Rebuilds st's per-session parts from the sessions of group g (all when all): sessions still
 * running count with what they decoded so far, retired ones with their samples kept at retirement. */
static void stats_rebuild(const exec_t *x, exec_stats_t *st, bool all, uint32_t g)
{
    hist_t *tps = hist_new(), *waiting = hist_new();
    if (tps && hist_merge(tps, x->retired_tps[all ? 0 : 1 + g])) {
        hist_free(tps);
        tps = NULL;
    }
    st->sessions_waiting = st->open_slo_ok = st->open_slo_missed = 0;
    for (size_t i = 0; i < x->n_sessions; i++) {
        const sess_t *s = x->sessions[i];
        if (!s || (!all && s->group != g)) continue;
        double v;
        if (tps && sess_window_tps(s, &v)) hist_add(tps, v);
        if (waiting && !s->admitted && s->state == S_WAIT_MEM) hist_add(waiting, ps_to_s(sim_now(x->sim) - s->t_arrive));
        st->sessions_waiting += s->state == S_WAIT_MEM;
        int open = s->state == S_ARRIVING ? -1 : exec_open_turn_slo(s, sim_now(x->sim));
        st->open_slo_ok += open == 1;
        st->open_slo_missed += open == 0;
    }
    if (tps) {
        hist_free(st->session_tps);
        st->session_tps = tps;
    }
    if (waiting) {
        hist_free(st->admit_waiting_s);
        st->admit_waiting_s = waiting;
    }
}

const exec_stats_t *exec_group_stats(const exec_t *x, uint32_t g)
{
    if (!x->groups || g >= x->cfg.n_groups) return NULL;
    stats_rebuild(x, &x->groups[g], false, g);
    return &x->groups[g];
}

const exec_stats_t *exec_stats(const exec_t *x)
{
    exec_stats_t *st = (exec_stats_t *)&x->stats;
    stats_rebuild(x, st, true, 0);
    bool own = x->pol->own_ctx, own_thread = own || (x->cfg.launch_per_session && !x->pol->batching);
    sim_ps_t busy_ps = x->retired_busy_ps; /* summed exactly, whatever order sessions retire in */
    for (int g = 0; !own && g < x->cfg.n_gpus; g++) busy_ps += x->gpu_ctx[g].busy_ps;
    st->launch_threads = own_thread ? (uint32_t)x->sessions_added : (uint32_t)x->cfg.n_gpus;
    for (size_t i = 0; i < x->n_sessions; i++) {
        const sess_t *s = x->sessions[i];
        if (s && own) busy_ps += s->ctx->busy_ps;
        if (s && s->thread) busy_ps += s->thread->busy_ps;
    }
    st->launch_busy_ps = (double)busy_ps;
    return st;
}

static void stats_window_start(exec_stats_t *st)
{
    hist_t *const h[] = {st->step_s, st->ttft_s, st->prefill_chunk_s, st->admit_wait_s};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        if (h[i]) hist_reset(h[i]);
    st->turns_done = st->turns_slo_ok = st->sessions_done = 0;
}

void exec_stats_window_start(exec_t *x)
{
    stats_window_start(&x->stats);
    for (uint32_t g = 0; x->groups && g < x->cfg.n_groups; g++) stats_window_start(&x->groups[g]);
    for (uint32_t g = 0; g <= x->cfg.n_groups; g++) hist_reset(x->retired_tps[g]); /* their n is 0 from here */
    for (size_t i = 0; i < x->n_sessions; i++) {
        sess_t *s = x->sessions[i];
        if (!s) continue;
        s->window_decoded = s->decoded;
        s->window_decode_ps = s->t_decode_ps;
    }
}

void exec_turn_times(const exec_t *x, uint64_t *done, double *done_s, uint64_t *n, double *elapsed_s)
{
    sim_ps_t now = sim_now(x->sim);
    *done = x->stats.turns_all;
    *done_s = x->stats.turn_all_s;
    *n = 0;
    *elapsed_s = 0;
    for (size_t i = 0; i < x->n_sessions; i++) {
        const sess_t *s = x->sessions[i];
        if (!s || s->state == S_ARRIVING || s->state == S_DONE || s->turn >= s->n_turns) continue;
        /* between turns a session has nothing left of the last one (a pause between steps has) */
        if (s->admitted && s->state == S_THINKING && !s->prefill_left && !s->decode_left) continue;
        (*n)++;
        *elapsed_s += ps_to_s(now - (s->admitted ? s->t_turn_ready : s->t_arrive));
    }
}

const exec_trace_op_t *exec_timeline(const exec_t *x, size_t *n)
{
    *n = x->n_timeline;
    return x->timeline;
}

const char *exec_lost_name(int extra)
{
    static const char *const names[] = {"cap", "launch", "timeslice", "gather-turns"};
    return extra >= 0 && extra < EXEC_LOST_EXTRA ? names[extra] : "?";
}
