/* Finished sessions are retired (freed) by the executor: what the statistics read of them — tokens/s
 * samples, per group too, launch-thread time and count, the measured window — stays, in closed form.
 * Sessions arrive 10 s apart, so each runs alone and is retired before the next arrives. */
#include <criterion/criterion.h>
#include <math.h>

#include "sim/exec.h"

#define N 8           /* sessions */
#define STEPS 3       /* decode steps each */
#define LAUNCH_S 1e-3 /* launch time of each step's one op */
#define SWITCH_S 0.2  /* processes: the context switch to a new session's context */
#define WINDOW_AT 2   /* the window starts during this session's second step */

/* Each plan: one op moving `bytes` over res, launched in LAUNCH_S. */
typedef struct rtoy {
    sim_res_t res;
    double bytes;
} rtoy_t;

static int toy_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    (void)env;
    (void)req;
    const rtoy_t *t = self;
    plan_op_t op = {.exec = PLAN_EXEC_GPU, .n_uses = 1, .uses = {{t->res, 1.0}}, .cost = {.work = t->bytes},
                    .launch_ps = (sim_ps_t)(LAUNCH_S * SIM_PS_PER_S), .weight = 1};
    return plan_add(out, &op, NULL, 0, NULL, e);
}

static const plan_provider_ops_t toy_ops = {.name = "retire-toy", .build = toy_build};

/* Session i's link time per step (s): 1 + i/10 at 1e9 B/s. */
static double link_s(int i) { return 1.0 + 0.1 * i; }
static double arrival_s(int i) { return 10.0 * i; }

/* Session i's first step also waits for the context switch (processes: the GPU holds the state of
 * the session before it, retired by then; the first finds no state to switch from). */
static double first_extra_s(bool procs, int i) { return procs && i > 0 ? SWITCH_S : 0; }

/* Session i's tokens/s over its steps from `from` on (0: all). */
static double tps(bool procs, int i, int from)
{
    double t = (STEPS - from) * (LAUNCH_S + link_s(i)) + (from == 0 ? first_extra_s(procs, i) : 0);
    return (STEPS - from) / t;
}

typedef struct probe {
    exec_t *x;
    uint64_t count;
    double min, max;
} probe_t;

/* Before the window starts: every session so far has a sample (retired ones included). */
static void window_ev(sim_t *sim, void *arg)
{
    (void)sim;
    probe_t *p = arg;
    const exec_stats_t *st = exec_stats(p->x);
    p->count = hist_count(st->session_tps);
    p->min = hist_min(st->session_tps);
    p->max = hist_max(st->session_tps);
    exec_stats_window_start(p->x);
}

static void check(bool procs)
{
    err_t e;
    sim_t *sim;
    sim_res_t link;
    cr_assert_eq(sim_new(&sim, &e), 0);
    cr_assert_eq(sim_res_add(sim, "link", 1e9, "B/s", &link, &e), 0);
    exec_config_t cfg = {.mode = procs ? EXEC_PROCESSES : EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 1024,
                         .host_pool = -1, .n_groups = 2, .launch_per_session = !procs,
                         .timeslice_ps = 10 * SIM_PS_PER_S, .ctx_switch_ps = (sim_ps_t)(SWITCH_S * SIM_PS_PER_S),
                         .ctx_switch_idle_ps = (sim_ps_t)(SWITCH_S * SIM_PS_PER_S)};
    exec_t *x;
    cr_assert_eq(exec_new(sim, &cfg, &x, &e), 0, "%s", e.msg);
    rtoy_t toys[N];
    for (int i = 0; i < N; i++) {
        toys[i] = (rtoy_t){link, 1e9 * link_s(i)};
        exec_turn_t turn = {.arrival_s = -1, .decode_tokens = STEPS};
        exec_session_spec_t spec = {.id = (uint64_t)i, .arrival_s = arrival_s(i), .turns = &turn, .n_turns = 1,
                                    .provider = {&toy_ops, &toys[i]}, .group = (uint32_t)(i % 2)};
        cr_assert_eq(exec_add_session(x, &spec, &e), 0, "%s", e.msg);
    }
    /* the window starts after session WINDOW_AT's first step, during its second */
    double step1_end = arrival_s(WINDOW_AT) + LAUNCH_S + link_s(WINDOW_AT) + first_extra_s(procs, WINDOW_AT);
    probe_t p = {.x = x};
    cr_assert_eq(sim_at(sim, (sim_ps_t)((step1_end + 0.5) * SIM_PS_PER_S), window_ev, &p, &e), 0);
    cr_assert_eq(sim_run(sim, SIM_TIME_NEVER, &e), 0, "%s", e.msg);

    cr_expect_eq(p.count, WINDOW_AT + 1, "samples before the window: %llu", (unsigned long long)p.count);
    double one = 1 / (LAUNCH_S + link_s(WINDOW_AT) + first_extra_s(procs, WINDOW_AT)); /* its one token so far */
    cr_expect_float_eq(p.min, one, 1e-9, "%.12g", p.min);
    cr_expect_float_eq(p.max, tps(procs, 0, 0), 1e-9, "%.12g", p.max);

    const exec_stats_t *st = exec_stats(x);
    cr_expect_eq(st->sessions_done, N - WINDOW_AT);
    cr_expect_eq(st->launch_threads, N);
    cr_expect_float_eq(st->launch_busy_ps, N * STEPS * LAUNCH_S * SIM_PS_PER_S, 1, "%.12g", st->launch_busy_ps);
    double last = arrival_s(N - 1) + STEPS * (LAUNCH_S + link_s(N - 1)) + first_extra_s(procs, N - 1);
    cr_expect_float_eq(st->last_token_s, last, 1e-9, "%.12g", st->last_token_s);
    /* in the window: session WINDOW_AT's last two steps, then every later session whole */
    double sum[3] = {0}, min = INFINITY, max = 0;
    uint64_t n[3] = {0};
    for (int i = WINDOW_AT; i < N; i++) {
        double v = tps(procs, i, i == WINDOW_AT ? 1 : 0);
        sum[0] += v, sum[1 + i % 2] += v, n[0]++, n[1 + i % 2]++;
        min = fmin(min, v), max = fmax(max, v);
    }
    cr_expect_eq(hist_count(st->session_tps), n[0]);
    cr_expect_float_eq(hist_mean(st->session_tps), sum[0] / (double)n[0], 1e-9);
    cr_expect_float_eq(hist_min(st->session_tps), min, 1e-9);
    cr_expect_float_eq(hist_max(st->session_tps), max, 1e-9);
    for (uint32_t g = 0; g < 2; g++) {
        const exec_stats_t *gs = exec_group_stats(x, g);
        cr_expect_eq(hist_count(gs->session_tps), n[1 + g], "group %u", g);
        cr_expect_float_eq(hist_mean(gs->session_tps), sum[1 + g] / (double)n[1 + g], 1e-9, "group %u", g);
    }
    exec_free(x);
    sim_free(sim);
}

/* Separate processes: each session its own context, the GPU switching to each new one although the
 * one before it is freed (a context is named by a serial number, not its address). */
Test(exec_retire, processes_keep_every_figure) { check(true); }

/* Streams with a launch thread per session: the threads' time outlives their sessions. */
Test(exec_retire, streams_with_own_threads_keep_every_figure) { check(false); }
