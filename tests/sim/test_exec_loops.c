/* The executor's serving-loop options on hand-solvable cases: a launch thread per session
 * (launch_per_session), a batched loop keeping each session's streams apart (batch_streams_apart)
 * and host idle time between a turn's steps (step_idle_s). */
#include <criterion/criterion.h>
#include <math.h>

#include "sim/exec.h"

/* Each plan: n_ops ops on stream 0, one after another, each launched in launch_ps and moving `bytes`
 * over resource res (0 bytes: a pure delay of latency_ps). */
typedef struct loop_toy {
    sim_res_t res;
    double bytes;
    int n_ops;
    sim_ps_t launch_ps, latency_ps;
} loop_toy_t;

static int toy_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    (void)env;
    (void)req;
    const loop_toy_t *t = self;
    for (int i = 0; i < t->n_ops; i++) {
        plan_op_t op = {.exec = PLAN_EXEC_GPU, .n_uses = t->bytes > 0, .uses = {{t->res, 1.0}},
                        .cost = {.work = t->bytes, .latency_ps = t->latency_ps}, .launch_ps = t->launch_ps, .weight = 1};
        uint32_t dep = (uint32_t)i - 1;
        int rc = plan_add(out, &op, i ? &dep : NULL, i ? 1 : 0, NULL, e);
        if (rc) return rc;
    }
    return 0;
}

static const plan_provider_ops_t toy_ops = {.name = "loop-toy", .build = toy_build};

typedef struct loop_world {
    sim_t *sim;
    exec_t *x;
    sim_res_t res[2];
    loop_toy_t toys[2];
} loop_world_t;

static void world_new(loop_world_t *w, exec_config_t cfg)
{
    err_t e;
    cr_assert_eq(sim_new(&w->sim, &e), 0);
    cr_assert_eq(sim_res_add(w->sim, "a", 1e9, "B/s", &w->res[0], &e), 0);
    cr_assert_eq(sim_res_add(w->sim, "b", 1e9, "B/s", &w->res[1], &e), 0);
    cfg.n_gpus = 1;
    cfg.prefill_chunk = 1024;
    cfg.host_pool = -1;
    cr_assert_eq(exec_new(w->sim, &cfg, &w->x, &e), 0, "%s", e.msg);
}

/* Session i runs `steps` decode steps of toys[i], idle_s[i] apart. */
static void add_session(loop_world_t *w, int i, uint32_t steps, double idle_s)
{
    exec_turn_t turn = {.arrival_s = -1, .decode_tokens = steps, .step_idle_s = idle_s};
    exec_session_spec_t spec = {.id = (uint64_t)i, .turns = &turn, .n_turns = 1, .provider = {&toy_ops, &w->toys[i]}};
    err_t e;
    cr_assert_eq(exec_add_session(w->x, &spec, &e), 0, "%s", e.msg);
}

static void world_run_free(loop_world_t *w, double *step_mean_s, double *last_s)
{
    err_t e;
    cr_assert_eq(sim_run(w->sim, SIM_TIME_NEVER, &e), 0, "%s", e.msg);
    const exec_stats_t *st = exec_stats(w->x);
    *step_mean_s = hist_mean(st->step_s);
    *last_s = st->last_token_s;
    exec_free(w->x);
    sim_free(w->sim);
}

/* Two sessions under cfg, session i running `steps` steps of toy (on resource i) idle_s[i] apart:
 * the mean step and the last step's end. */
static void two_sessions(exec_config_t cfg, loop_toy_t toy, uint32_t steps, const double *idle_s, double *mean, double *last)
{
    loop_world_t w;
    world_new(&w, cfg);
    for (int i = 0; i < 2; i++) {
        w.toys[i] = toy;
        w.toys[i].res = w.res[i];
        add_session(&w, i, steps, idle_s[i]);
    }
    world_run_free(&w, mean, last);
}

static const double no_idle[2] = {0, 0};

/* Two sessions of streams, each step two ops launched in 1 s each with nothing to do. One launch
 * thread issues session 0's two launches, then session 1's: steps of 2 s and 4 s (mean 3 s); a
 * thread each launches both at once: 2 s each. (With one thread, session 0's run is queued again
 * while its second op is being launched, and completes while queued behind session 1: under ASan
 * this once read the freed run; exec_run_unqueue.) */
Test(exec_loops, a_launch_thread_per_session)
{
    for (int per = 0; per < 2; per++) {
        double mean, last;
        two_sessions((exec_config_t){.mode = EXEC_STREAMS, .launch_per_session = per},
                     (loop_toy_t){.n_ops = 2, .launch_ps = SIM_PS_PER_S}, 1, no_idle, &mean, &last);
        cr_expect_float_eq(mean, per ? 2.0 : 3.0, 1e-9, "launch_per_session %d: mean step %g s", per, mean);
        cr_expect_float_eq(last, per ? 2.0 : 4.0, 1e-9);
    }
}

/* Batching has one thread: a launch thread per session is refused. */
Test(exec_loops, no_thread_per_session_when_batching)
{
    sim_t *sim;
    exec_t *x;
    err_t e;
    cr_assert_eq(sim_new(&sim, &e), 0);
    exec_config_t cfg = {.mode = EXEC_LOCKSTEP, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1, .launch_per_session = true};
    cr_expect_eq(exec_new(sim, &cfg, &x, &e), ERR_INVAL);
    sim_free(sim);
}

/* Lockstep of two sessions whose step is one op on their stream 0, 1e9 B over a resource of their
 * own at 1e9 B/s (no launch cost). Merged, stream 0 is one stream: the two ops run one after the
 * other, an iteration of 2 s; with each session's streams apart they overlap: 1 s. */
Test(exec_loops, batched_sessions_keep_their_streams_apart)
{
    for (int apart = 0; apart < 2; apart++) {
        double mean, last;
        two_sessions((exec_config_t){.mode = EXEC_LOCKSTEP, .batch_streams_apart = apart},
                     (loop_toy_t){.n_ops = 1, .bytes = 1e9}, 3, no_idle, &mean, &last);
        cr_expect_float_eq(mean, apart ? 1.0 : 2.0, 1e-9, "apart %d: step %g s", apart, mean);
        cr_expect_float_eq(last, apart ? 3.0 : 6.0, 1e-9);
    }
}

/* One session of three 1 s steps, 0.5 s idle between them: steps stay 1 s, the last ends at
 * 1 + 0.5 + 1 + 0.5 + 1 = 4 s. In lockstep, sessions idling 0.2 s and 0.5 s (1 s steps apart): each
 * iteration waits for the longer idle, so the third ends at 3 · 1 + 2 · 0.5 = 4 s as well. */
Test(exec_loops, idle_between_steps)
{
    loop_world_t w;
    world_new(&w, (exec_config_t){.mode = EXEC_STREAMS});
    w.toys[0] = (loop_toy_t){.res = w.res[0], .n_ops = 1, .bytes = 1e9};
    add_session(&w, 0, 3, 0.5);
    double mean, last;
    world_run_free(&w, &mean, &last);
    cr_expect_float_eq(mean, 1.0, 1e-9);
    cr_expect_float_eq(last, 4.0, 1e-9);

    static const double idle_s[2] = {0.2, 0.5};
    two_sessions((exec_config_t){.mode = EXEC_LOCKSTEP, .batch_streams_apart = true}, (loop_toy_t){.n_ops = 1, .bytes = 1e9},
                 3, idle_s, &mean, &last);
    cr_expect_float_eq(mean, 1.0, 1e-9);
    cr_expect_float_eq(last, 4.0, 1e-9);
}

/* A negative idle time is refused. */
Test(exec_loops, negative_idle_refused)
{
    loop_world_t w;
    world_new(&w, (exec_config_t){.mode = EXEC_STREAMS});
    w.toys[0] = (loop_toy_t){.res = w.res[0], .n_ops = 1, .bytes = 1};
    exec_turn_t turn = {.arrival_s = -1, .decode_tokens = 1, .step_idle_s = -1};
    exec_session_spec_t spec = {.id = 0, .turns = &turn, .n_turns = 1, .provider = {&toy_ops, &w.toys[0]}};
    err_t e;
    cr_expect_eq(exec_add_session(w.x, &spec, &e), ERR_INVAL);
    exec_free(w.x);
    sim_free(w.sim);
}
