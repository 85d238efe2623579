/* replay_pred — a replay workload predicted through the engine (cli/replay_pred.h). */
#include "cli/replay_pred.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study.h"
#include "cli/study_cfg.h"
#include "common/atomicio.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "models/hwinst.h"
#include "models/platform.h"
#include "models/replay.h"
#include "sim/exec.h"
#include "sim/hist.h"

/* What both passes share: the machine, its profile and cost forms, the serving defaults. */
typedef struct rp_env {
    const rf_workload_t *w;
    const rpred_opts_t *o;
    hwcat_t *cat;
    hw_t hw;
    bool have_hw;
    calib_t *cal;
    cost_t cost;
    scn_serving_t sv;
} rp_env_t;

/* One simulation: the warm-ups alone (measure false), or the whole run. */
typedef struct rp_pass {
    rp_env_t *env;
    sim_t *sim;
    bool measure;
    double start_s, window_s;
    uint64_t plans[RF_MAX_SESSIONS], n[RF_MAX_SESSIONS];
    double end_s[RF_MAX_SESSIONS];   /* the last (measured) step's end */
    bool closed[RF_MAX_SESSIONS];
    uint32_t n_closed;
    hist_t *h[RF_MAX_SESSIONS + 1];  /* each session's measured steps, then all of them */
} rp_pass_t;

/* Warm-up steps: the file's, at least one (what is measured runs every op warm). */
static uint64_t warmup_steps(const rf_workload_t *w) { return w->warmup_steps ? w->warmup_steps : 1; }

/* The host's idle time after each of session i's steps: its own, or in a batched loop the longest. */
static double idle_s(const rf_workload_t *w, uint32_t i)
{
    uint64_t us = w->sessions[i].idle_us;
    for (uint32_t k = 0; w->mode == RF_MODE_BATCHED && k < w->n_sessions; k++)
        if (w->sessions[k].idle_us > us) us = w->sessions[k].idle_us;
    return (double)us * 1e-6;
}

static const exec_mode_t mode_of[RF_MODE_COUNT] = {
    [RF_MODE_PROCS] = EXEC_PROCESSES, [RF_MODE_STREAMS] = EXEC_STREAMS, [RF_MODE_BATCHED] = EXEC_LOCKSTEP};

static void on_plan(void *arg, uint64_t session, plan_phase_t phase, uint64_t ctx, double latency_s)
{
    (void)phase;
    (void)ctx;
    rp_pass_t *p = arg;
    const rf_workload_t *w = p->env->w;
    uint32_t s = (uint32_t)session;
    double now_s = (double)sim_now(p->sim) / (double)SIM_PS_PER_S;
    p->plans[s]++;
    if (!(latency_s > 0) && !(idle_s(w, s) > 0)) {   /* the clock would never move */
        err_t e;
        err_set(&e, ERR_INVAL, "replay %s, session %u: a step takes no time and no idle time follows it (only syncs and "
                "host ops of 0 us?): nothing to measure", w->name, s);
        sim_fail(p->sim, &e);
        return;
    }
    if (!p->measure) {
        p->end_s[s] = now_s;
        return;
    }
    if (p->plans[s] <= warmup_steps(w) || p->closed[s]) return;
    if (now_s - latency_s - p->start_s >= p->window_s && p->n[s] >= w->min_steps) {
        p->closed[s] = true;
        if (++p->n_closed == w->n_sessions) sim_stop(p->sim);
        return;
    }
    if (hist_add(p->h[s], latency_s) || hist_add(p->h[RF_MAX_SESSIONS], latency_s)) {
        err_t e;
        err_set(&e, ERR_NOMEM, "replay: out of memory");
        sim_fail(p->sim, &e);
        return;
    }
    p->n[s]++;
    p->end_s[s] = now_s;
}

/* The sessions' host regions and device buffers against the box's pools (every session on GPU 0). */
static int fits(const rp_env_t *env, sim_t *sim, sim_pool_t hbm, sim_pool_t host, err_t *e)
{
    double need_hbm = 0, need_host = 0;
    for (uint32_t i = 0; i < env->w->n_sessions; i++) {
        double d, h;
        replay_footprint(&env->w->sessions[i], &d, &h);
        need_hbm += d;
        need_host += h;
    }
    if (hbm >= 0 && need_hbm > sim_pool_capacity(sim, hbm))
        return err_set(e, ERR_CAPACITY, "replay %s: the ops' device buffers take %.2f GB, GPU 0 of %s has %.2f GB", env->w->name,
                       need_hbm / 1e9, env->hw.box, sim_pool_capacity(sim, hbm) / 1e9);
    if (host >= 0 && need_host > sim_pool_capacity(sim, host))
        return err_set(e, ERR_CAPACITY, "replay %s: the sessions' regions take %.2f GB, %s has %.2f GB of host memory",
                       env->w->name, need_host / 1e9, env->hw.box, sim_pool_capacity(sim, host) / 1e9);
    return ERR_OK;
}

/* The parameters of the engine itself this run depends on, noted for the flags. */
static void note_engine(const rp_env_t *env)
{
    static const char *const jitter[] = {"jitter_us", "jitter_rel", "jitter_copy_us", "jitter_copy_rel",
                                         "jitter_gather_us", "jitter_gather_rel", "ce_handoff_spread_us"};
    for (size_t i = 0; !env->o->no_jitter && i < sizeof jitter / sizeof jitter[0]; i++) calib_note(env->cal, jitter[i], NAN);
    calib_note(env->cal, "ce_handoff_us", NAN);
    if (env->w->mode == RF_MODE_PROCS && env->w->n_sessions > 1) {
        calib_note(env->cal, "timeslice_us", env->w->n_sessions);
        calib_note(env->cal, "ctx_switch_us", env->w->n_sessions);
        calib_note(env->cal, "ctx_switch_idle_us", NAN);
    }
}

static int exec_make(rp_env_t *env, rp_pass_t *p, sim_pool_t *hbm, exec_t **x, err_t *e)
{
    const cost_t *c = &env->cost;
    const rf_workload_t *w = env->w;
    bool jitter = !env->o->no_jitter, batched = w->mode == RF_MODE_BATCHED;
    exec_config_t cfg = {
        .mode = mode_of[w->mode], .admission = EXEC_ADMIT_RESERVE, .n_gpus = env->hw.gpus, .prefill_chunk = 1,
        .hw_queues = batched ? 0 : (uint32_t)env->sv.hw_queues, .gathers_exclusive = env->sv.gathers_exclusive,
        .launch_per_session = w->mode == RF_MODE_STREAMS, .batch_streams_apart = batched,
        .timeslice_ps = cost_ps(c->timeslice_s), .ctx_switch_ps = cost_ps(c->ctx_switch_s),
        .ctx_switch_idle_ps = cost_ps(c->ctx_switch_idle_s),
        .copy_handoff_ps = cost_ps(c->ce_handoff_s), .copy_handoff_spread_ps = jitter ? cost_ps(c->ce_handoff_spread_s) : 0,
        .jitter_abs_s = jitter ? c->jitter_s : 0, .jitter_rel = jitter ? c->jitter_rel : 0,
        .jitter_copy_abs_s = jitter ? c->jitter_copy_s : 0, .jitter_copy_rel = jitter ? c->jitter_copy_rel : 0,
        .jitter_gather_abs_s = jitter ? c->jitter_gather_s : 0, .jitter_gather_rel = jitter ? c->jitter_gather_rel : 0,
        .jitter_seed = w->seed, .hbm_pool = hbm, .host_pool = sim_pool_find(p->sim, "host.dram_mem"),
        .on_plan = on_plan, .on_plan_arg = p};
    int rc = fits(env, p->sim, hbm[0], cfg.host_pool, e);
    return rc ? rc : exec_new(p->sim, &cfg, x, e);
}

/* Adds session i: its warm-up steps (a turn of its own in the measured pass), then, measuring, as many
 * steps as the run takes from the common start on. */
static int add_session(const rp_env_t *env, rp_pass_t *p, exec_t *x, uint32_t i, err_t *e)
{
    const rf_workload_t *w = env->w;
    double idle = (double)w->sessions[i].idle_us * 1e-6;
    exec_turn_t turns[2] = {{.arrival_s = 0, .decode_tokens = (uint32_t)warmup_steps(w), .step_idle_s = idle},
                            {.arrival_s = p->start_s, .decode_tokens = UINT32_MAX, .step_idle_s = idle}};
    replay_prov_t *rp;
    int rc = replay_new(w, i, &env->hw, &env->cost, &rp, e);
    if (rc) return rc;
    exec_session_spec_t spec = {.id = i, .gpu = 0, .open_loop = true, .turns = turns, .n_turns = p->measure ? 2 : 1,
                                .provider = replay_wrap(rp)};
    return exec_add_session(x, &spec, e);
}

static int pass_run(rp_env_t *env, rp_pass_t *p, err_t *e)
{
    exec_t *x = NULL;
    sim_pool_t *hbm = calloc((size_t)env->hw.gpus, sizeof *hbm);
    int rc = hbm ? sim_new(&p->sim, e) : err_set(e, ERR_NOMEM, "replay: out of memory");
    if (!rc) rc = hwinst_build(&env->hw, env->cal, p->sim, e);
    for (int g = 0; !rc && g < env->hw.gpus; g++) {
        char name[64];
        snprintf(name, sizeof name, "gpu%d.hbm_mem", g);
        hbm[g] = sim_pool_find(p->sim, name);
    }
    if (!rc) rc = exec_make(env, p, hbm, &x, e);
    free(hbm);
    for (uint32_t i = 0; !rc && i < env->w->n_sessions; i++) rc = add_session(env, p, x, i, e);
    if (!rc) {
        calib_notes_reset(env->cal);
        note_engine(env);
        rc = sim_run(p->sim, SIM_TIME_NEVER, e);
    }
    if (rc) err_prefix(e, "replay %s", env->w->name);
    exec_free(x);
    sim_free(p->sim);
    p->sim = NULL;
    return rc;
}

static void stat_of(const hist_t *h, uint64_t n, double span_s, rpred_stat_t *s)
{
    *s = (rpred_stat_t){.steps = n, .p10_s = hist_quantile(h, 0.10), .p50_s = hist_quantile(h, 0.50),
                        .p90_s = hist_quantile(h, 0.90), .p99_s = hist_quantile(h, 0.99), .mean_s = hist_mean(h),
                        .per_s = span_s > 0 ? (double)n / span_s : NAN};
}

/* The flags of the last pass as text lines (owned by out). */
static int flags_text(calib_t *cal, rpred_t *out, err_t *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp) return err_set(e, ERR_NOMEM, "replay: out of memory");
    calib_flags_print(cal, fp);
    if (fclose(fp) || !buf) {
        free(buf);
        return err_set(e, ERR_NOMEM, "replay: out of memory");
    }
    out->flags = buf;
    calib_clamp_list(cal, out->clamps, sizeof out->clamps);
    return ERR_OK;
}

/* Loads the catalogs, resolves the box and carries the profile to it. */
static int env_open(rp_env_t *env, err_t *e)
{
    char *dir = study_data_path(STUDY_DEFAULT_CATALOG);
    char *prof = study_data_path(env->o->calib_path ? env->o->calib_path : STUDY_DEFAULT_CALIBRATION);
    int rc = dir && prof ? hwcat_load(dir, &env->cat, e) : err_set(e, ERR_NOMEM, "replay: out of memory");
    hw_select_t sel = {.box = env->o->box ? env->o->box : "h200-1"};
    if (!rc) rc = hw_resolve(env->cat, &sel, NULL, &env->hw, e);
    env->have_hw = !rc;
    if (!rc) rc = calib_load(prof, &env->cal, e);
    if (!rc) rc = platform_apply(env->cal, env->cat, &env->hw, e);
    if (!rc) rc = calib_seed(env->cal, &env->hw, e);
    if (!rc && env->o->clamp) rc = calib_clamp(env->cal, env->o->clamp, e);
    if (!rc) rc = cost_init(&env->cost, env->cal, e);
    if (!rc) rc = scn_bind_serving(NULL, &env->sv, e);
    free(dir);
    free(prof);
    return rc;
}

static void env_close(rp_env_t *env)
{
    calib_free(env->cal);
    if (env->have_hw) hw_free(&env->hw);
    hwcat_free(env->cat);
}

int rpred_load(const char *path, rf_workload_t *w, uint64_t *fnv, err_t *e)
{
    char *text = NULL, msg[512];
    size_t len = 0;
    int rc = atomicio_read_all(path, (size_t)16 << 20, &text, &len, e);
    if (rc) return rc;
    *fnv = rf_fnv1a(text, len);
    if (rf_parse(text, len, path, w, msg, sizeof msg)) rc = err_set(e, ERR_PARSE, "%s", msg);
    free(text);
    return rc;
}

int rpred_run(const rf_workload_t *w, const rpred_opts_t *o, rpred_t *out, err_t *e)
{
    memset(out, 0, sizeof *out);
    rp_env_t env = {.w = w, .o = o};
    rp_pass_t warm = {.env = &env}, run = {.env = &env, .measure = true, .window_s = (double)w->window_ms * 1e-3};
    int rc = env_open(&env, e);
    /* the common start: the last warm-up's end and idle time */
    if (!rc) rc = pass_run(&env, &warm, e);
    for (uint32_t i = 0; !rc && i < w->n_sessions; i++) run.start_s = fmax(run.start_s, warm.end_s[i] + idle_s(w, i));
    for (uint32_t i = 0; !rc && i <= RF_MAX_SESSIONS; i++)
        if (!(run.h[i] = hist_new())) rc = err_set(e, ERR_NOMEM, "replay: out of memory");
    if (!rc) rc = pass_run(&env, &run, e);
    if (!rc && run.n_closed < w->n_sessions)
        rc = err_set(e, ERR_INVAL, "replay %s: the run ended before every session's window closed (%u of %u)", w->name,
                     run.n_closed, w->n_sessions);
    if (!rc) {
        snprintf(out->profile, sizeof out->profile, "%s", calib_profile(env.cal));
        snprintf(out->box, sizeof out->box, "%s", env.hw.box);
        snprintf(out->gpu, sizeof out->gpu, "%s", env.hw.gpu);
        out->calib_hash = calib_hash(env.cal);
        out->n_sessions = w->n_sessions;
        out->start_s = run.start_s;
        double per_s = 0, end_s = run.start_s;
        uint64_t n = 0;
        for (uint32_t i = 0; i < w->n_sessions; i++) {
            stat_of(run.h[i], run.n[i], run.end_s[i] + idle_s(w, i) - run.start_s, &out->session[i]);
            per_s += out->session[i].per_s;
            n += run.n[i];
            end_s = fmax(end_s, run.end_s[i]);
        }
        stat_of(run.h[RF_MAX_SESSIONS], n, 0, &out->pooled);
        out->pooled.per_s = per_s;
        out->end_s = end_s;
        rc = flags_text(env.cal, out, e);
    }
    for (uint32_t i = 0; i <= RF_MAX_SESSIONS; i++) hist_free(run.h[i]);
    env_close(&env);
    return rc;
}

void rpred_free(rpred_t *r)
{
    if (!r) return;
    free(r->flags);
    r->flags = NULL;
}
