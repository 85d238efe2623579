/* The executor on hand-solvable cases: closed forms for one session, N sessions sharing a link,
 * time slicing between processes, batch merging, launch costs, admission. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "sim/exec.h"

/* A toy provider: each plan is a chain of n_ops ops of `bytes` over resource res (GPU executor). */
typedef struct toy {
    sim_res_t res;
    double bytes;
    int n_ops;
    uint64_t merge_key;
    sim_ps_t launch_ps;
    uint8_t exec;
    double hbm_per_token;
    bool separate_streams;   /* op i on stream i, no dependencies; odd ops on res_odd */
    sim_ps_t latency_ps;
    sim_res_t res_odd;
    double bytes_host;       /* what each op says it moves over the host link */
} toy_t;

static int toy_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    (void)env;
    (void)req;
    const toy_t *t = self;
    for (int i = 0; i < t->n_ops; i++) {
        plan_op_t op = {.kind = 0, .layer = (uint16_t)i, .exec = t->exec, .n_uses = 1,
                        .uses = {{t->separate_streams && i % 2 ? t->res_odd : t->res, 1.0}}, .cost = {.work = t->bytes, .latency_ps = t->latency_ps}, .launch_ps = t->launch_ps,
                        .merge_key = t->merge_key, .stream = t->separate_streams ? (uint8_t)i : 0,
                        .bytes_host = t->bytes_host};
        uint32_t dep = (uint32_t)i - 1;
        int rc = plan_add(out, &op, i && !t->separate_streams ? &dep : NULL, i && !t->separate_streams ? 1 : 0, NULL, e);
        if (rc) return rc;
    }
    return 0;
}

static int toy_footprint(void *self, uint64_t tokens, double *hbm, double *host, err_t *e)
{
    (void)e;
    const toy_t *t = self;
    *hbm = t->hbm_per_token * (double)tokens;
    *host = 0;
    return 0;
}

static const plan_provider_ops_t toy_ops = {.name = "toy", .build = toy_build, .footprint = toy_footprint};

typedef struct world {
    sim_t *sim;
    exec_t *x;
    sim_res_t link, hbm, other;
    sim_pool_t pool;
    toy_t toy;
} world_t;

static void world_init(world_t *w, exec_mode_t mode, double pool_bytes)
{
    err_t e;
    cr_assert_eq(sim_new(&w->sim, &e), 0);
    cr_assert_eq(sim_res_add(w->sim, "link", 1e9, "B/s", &w->link, &e), 0);
    cr_assert_eq(sim_res_add(w->sim, "hbm", 1e9, "B/s", &w->hbm, &e), 0);
    cr_assert_eq(sim_res_add(w->sim, "other", 1e9, "B/s", &w->other, &e), 0);
    w->pool = -1;
    if (pool_bytes > 0) cr_assert_eq(sim_pool_add(w->sim, "hbm_mem", pool_bytes, &w->pool, &e), 0);
    exec_config_t cfg = {.mode = mode, .n_gpus = 1, .prefill_chunk = 1024, .host_pool = -1,
                         .hbm_pool = pool_bytes > 0 ? &w->pool : NULL, .graph_launch_ps = 7 * SIM_PS_PER_US};
    cr_assert_eq(exec_new(w->sim, &cfg, &w->x, &e), 0, "%s", e.msg);
    w->toy = (toy_t){.res = w->link, .res_odd = w->other, .bytes = 1e9, .n_ops = 1, .exec = PLAN_EXEC_GPU};
}

/* Replaces w's executor by one with cfg. */
static void world_config(world_t *w, exec_config_t cfg)
{
    err_t e;
    exec_free(w->x);
    cr_assert_eq(exec_new(w->sim, &cfg, &w->x, &e), 0, "%s", e.msg);
}

static void add_sessions(world_t *w, int n, toy_t *toys, uint32_t decode_tokens)
{
    for (int i = 0; i < n; i++) {
        toys[i] = w->toy;
        exec_turn_t turn = {.think_s = 0, .arrival_s = -1, .prefill_tokens = 0, .decode_tokens = decode_tokens};
        exec_session_spec_t spec = {.id = (uint64_t)i, .gpu = 0, .arrival_s = 0, .context_tokens = 100,
                                    .final_tokens = 100 + decode_tokens, .turns = &turn, .n_turns = 1,
                                    .provider = {&toy_ops, &toys[i]}};
        err_t e;
        cr_assert_eq(exec_add_session(w->x, &spec, &e), 0, "%s", e.msg);
    }
}

static void world_run(world_t *w)
{
    err_t e;
    cr_assert_eq(sim_run(w->sim, SIM_TIME_NEVER, &e), 0, "%s", e.msg);
}

static void world_free(world_t *w)
{
    exec_free(w->x);
    sim_free(w->sim);
}

/* One session, 3 decode steps of one op moving 1e9 B over a 1e9 B/s link: each step 1 s. */
Test(exec, one_session_closed_form)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    toy_t toys[1];
    add_sessions(&w, 1, toys, 3);
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    cr_assert_eq(st->decode_tokens, 3);
    cr_assert_float_eq(hist_mean(st->step_s), 1.0, 1e-6);
    cr_assert_float_eq(hist_mean(st->ttft_s), 1.0, 1e-6);
    cr_assert_float_eq(st->last_token_s, 3.0, 1e-6);
    cr_assert_float_eq(sim_res_work(w.sim, w.link), 3e9, 1.0);
    world_free(&w);
}

/* A turn with a prefill: its last chunk samples the first token, so TTFT is the prefill (2 chunks of
 * 1024 tokens at 1 s each: 2 s) and the turn's 3 tokens take that and 2 decode steps (last token at
 * 4 s), not 3 steps after the prefill. */
Test(exec, the_prefill_samples_the_first_token)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    toy_t toy = w.toy;
    exec_turn_t turn = {.think_s = 0, .arrival_s = -1, .prefill_tokens = 2048, .decode_tokens = 3};
    exec_session_spec_t spec = {.id = 0, .gpu = 0, .arrival_s = 0, .context_tokens = 100, .final_tokens = 100 + 2048 + 3,
                                .turns = &turn, .n_turns = 1, .provider = {&toy_ops, &toy}};
    err_t e;
    cr_assert_eq(exec_add_session(w.x, &spec, &e), 0, "%s", e.msg);
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    cr_expect_eq(st->decode_tokens, 3);
    cr_expect_eq(hist_count(st->step_s), 2, "decode steps");
    cr_expect_float_eq(hist_mean(st->ttft_s), 2.0, 1e-6);
    cr_expect_float_eq(st->last_token_s, 4.0, 1e-6);
    cr_expect_eq(st->turns_done, 1);
    world_free(&w);
}

/* Turn times (exec_turn_times): one session, two turns of 3 decode steps (1 s each) 2 s of think
 * apart. At 4 s the second turn, ready at 5 s, has not begun: one turn done of 3 s, none open; at
 * 6.5 s the second is open for 1.5 s; at the end two turns of 3 s each, none open. */
static void turn_times_at(sim_t *sim, void *arg)
{
    const exec_t *x = arg;
    uint64_t done, open;
    double done_s, open_s;
    exec_turn_times(x, &done, &done_s, &open, &open_s);
    double t = (double)sim_now(sim) / (double)SIM_PS_PER_S;
    cr_expect_eq(done, 1, "at %g s", t);
    cr_expect_float_eq(done_s, 3.0, 1e-6, "at %g s", t);
    cr_expect_eq(open, t > 5 ? 1 : 0, "at %g s", t);
    cr_expect_float_eq(open_s, t > 5 ? t - 5 : 0, 1e-6, "at %g s", t);
}

Test(exec, turn_times_count_done_and_open_turns)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    toy_t toy = w.toy;
    exec_turn_t turns[2] = {{.arrival_s = -1, .decode_tokens = 3}, {.think_s = 2, .arrival_s = -1, .decode_tokens = 3}};
    exec_session_spec_t spec = {.id = 0, .gpu = 0, .arrival_s = 0, .context_tokens = 100, .final_tokens = 106,
                                .turns = turns, .n_turns = 2, .provider = {&toy_ops, &toy}};
    err_t e;
    cr_assert_eq(exec_add_session(w.x, &spec, &e), 0, "%s", e.msg);
    cr_assert_eq(sim_at(w.sim, 4 * SIM_PS_PER_S, turn_times_at, w.x, &e), 0);
    cr_assert_eq(sim_at(w.sim, 6500 * (SIM_PS_PER_S / 1000), turn_times_at, w.x, &e), 0);
    world_run(&w);
    uint64_t done, open;
    double done_s, open_s;
    exec_turn_times(w.x, &done, &done_s, &open, &open_s);
    cr_expect_eq(done, 2);
    cr_expect_float_eq(done_s, 6.0, 1e-6);
    cr_expect_eq(open, 0);
    exec_stats_window_start(w.x);  /* the window does not reset them */
    cr_expect_eq(exec_stats(w.x)->turns_all, 2);
    world_free(&w);
}

/* N sessions as streams share the link fairly: N·1e9 B at 1e9 B/s, every step takes N s. */
Test(exec, n_sessions_on_one_link_take_n_times_as_long)
{
    for (int n = 2; n <= 8; n *= 2) {
        world_t w;
        world_init(&w, EXEC_STREAMS, 0);
        toy_t toys[8];
        add_sessions(&w, n, toys, 2);
        world_run(&w);
        const exec_stats_t *st = exec_stats(w.x);
        cr_assert_float_eq(hist_mean(st->step_s), (double)n, 1e-6 * n);
        /* Each op alone would take 1 s; sharing cost (n−1) s per op, charged to the link. */
        cr_assert_float_eq(st->lost_ps[w.link] / (double)SIM_PS_PER_S, 2.0 * n * (n - 1), 1e-3);
        world_free(&w);
    }
}

/* Two sessions whose kernels use different resources: as streams they overlap (1 s a step), as
 * separate processes they are time-sliced (each step waits for the other's kernel: 2 s a step
 * once both run). */
Test(exec, processes_time_slice_kernels)
{
    exec_mode_t modes[2] = {EXEC_STREAMS, EXEC_PROCESSES};
    for (int m = 0; m < 2; m++) {
        world_t w;
        world_init(&w, modes[m], 0);
        toy_t toys[2];
        add_sessions(&w, 2, toys, 4);
        toys[1].res = w.other;
        world_run(&w);
        const exec_stats_t *st = exec_stats(w.x);
        /* Time sliced, the kernels of the two contexts alternate: 8 kernels of 1 s back to back end
         * at 8 s, against 4 s when they overlap. */
        if (modes[m] == EXEC_PROCESSES) {
            cr_assert_float_eq(st->last_token_s, 8.0, 1e-6);
            cr_assert_gt(st->lost_ps[sim_res_count(w.sim) + EXEC_LOST_TIMESLICE], 0);
        } else {
            cr_assert_float_eq(st->last_token_s, 4.0, 1e-6);
            cr_assert_float_eq(hist_mean(st->step_s), 1.0, 1e-6);
        }
        world_free(&w);
    }
}

/* Time slices: two processes, each a chain of four 1 s ops on a resource of its own, a 2.5 s slice
 * and a 0.5 s switch. A runs A1..A3 (0..3 s; A4 would start past its slice with B waiting), the
 * switch, B1..B3 (3.5..6.5), the switch, A4 (7..8), the switch, B4 (8.5..9.5). A's step: 8 s; B's:
 * 9.5 s from its beginning, 6 s from its first op's start (an event before it fires then). */
Test(exec, processes_take_time_slices_and_pay_switches)
{
    for (int dev = 0; dev < 2; dev++) {
        world_t w;
        world_init(&w, EXEC_PROCESSES, 0);
        world_config(&w, (exec_config_t){.mode = EXEC_PROCESSES, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                             .timeslice_ps = 2500000 * SIM_PS_PER_US, .ctx_switch_ps = 500000 * SIM_PS_PER_US,
                             .ctx_switch_idle_ps = 500000 * SIM_PS_PER_US, .latency_from_queue = dev});
        w.toy.n_ops = 4;
        toy_t toys[2];
        add_sessions(&w, 2, toys, 1);
        toys[1].res = w.other;
        world_run(&w);
        const exec_stats_t *st = exec_stats(w.x);
        cr_assert_float_eq(st->last_token_s, 9.5, 1e-9);
        cr_assert_float_eq(hist_max(st->step_s), dev ? 8.0 : 9.5, 1e-9);
        cr_assert_float_eq(hist_min(st->step_s), dev ? 6.0 : 8.0, 1e-9);
        world_free(&w);
    }
}

/* The same with a cheaper switch away from a context that idled: A4 (7..8 s) ends within its slice
 * and A has nothing more, so the GPU passes to B after the idle switch of 0.2 s, not the 0.5 s of a
 * preemption at a slice's end: B4 runs 8.2..9.2 s. */
Test(exec, an_idle_context_passes_the_gpu_at_the_idle_switch_cost)
{
    world_t w;
    world_init(&w, EXEC_PROCESSES, 0);
    world_config(&w, (exec_config_t){.mode = EXEC_PROCESSES, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                         .timeslice_ps = 2500000 * SIM_PS_PER_US, .ctx_switch_ps = 500000 * SIM_PS_PER_US,
                         .ctx_switch_idle_ps = 200000 * SIM_PS_PER_US});
    w.toy.n_ops = 4;
    toy_t toys[2];
    add_sessions(&w, 2, toys, 1);
    toys[1].res = w.other;
    world_run(&w);
    cr_assert_float_eq(exec_stats(w.x)->last_token_s, 9.2, 1e-9, "%.9g", exec_stats(w.x)->last_token_s);
    world_free(&w);
}

/* Copy engines have run lists of their own: two processes' copies (each 4 s of 1 s copies on a
 * resource of its own) are not time-sliced and overlap: 4 s in all, where kernels take 8 s. */
Test(exec, processes_copies_are_not_time_sliced)
{
    world_t w;
    world_init(&w, EXEC_PROCESSES, 0);
    world_config(&w, (exec_config_t){.mode = EXEC_PROCESSES, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                         .timeslice_ps = 2500000 * SIM_PS_PER_US, .ctx_switch_ps = 500000 * SIM_PS_PER_US,
                         .ctx_switch_idle_ps = 500000 * SIM_PS_PER_US});
    w.toy.exec = PLAN_EXEC_COPY_H2D;
    toy_t toys[2];
    add_sessions(&w, 2, toys, 4);
    toys[1].res = w.other;
    world_run(&w);
    cr_assert_float_eq(exec_stats(w.x)->last_token_s, 4.0, 1e-9, "%.9g", exec_stats(w.x)->last_token_s);
    world_free(&w);
}

/* What a slice runs past its length comes off the context's next one: two processes, each one step
 * of forty 0.3 s ops on a resource of its own, a 1 s slice and a 0.1 s switch. A slice of 1 s runs
 * ops starting at 0, 0.3, 0.6 and 0.9 s (1.2 s, 0.2 past it); the next, 0.8 s long, three (0.9 s,
 * 0.1 past); the next, 0.9 s, three (0.9 s, none past); then 1 s again: ten ops every three slices,
 * twelve slices a context, 24 in all and 23 switches: the last op ends at 24 + 2.3 = 26.3 s. With
 * every slice at its full length each would run four ops: 20 slices, 19 switches, 25.9 s. */
Test(exec, a_slice_past_its_length_shortens_the_next)
{
    world_t w;
    world_init(&w, EXEC_PROCESSES, 0);
    world_config(&w, (exec_config_t){.mode = EXEC_PROCESSES, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                         .timeslice_ps = 1000000 * SIM_PS_PER_US, .ctx_switch_ps = 100000 * SIM_PS_PER_US,
                         .ctx_switch_idle_ps = 100000 * SIM_PS_PER_US});
    w.toy.n_ops = 40;
    w.toy.bytes = 0.3e9;
    toy_t toys[2];
    add_sessions(&w, 2, toys, 1);
    toys[1].res = w.other;
    world_run(&w);
    cr_assert_float_eq(exec_stats(w.x)->last_token_s, 26.3, 1e-9, "%.9g", exec_stats(w.x)->last_token_s);
    world_free(&w);
}

/* The p50 and p99 of 20000 steps of one op, 0.5 s of latency and 0.5 s of work (1 s alone), run as
 * exec (a kernel or a copy) and moving bytes_host over the host link, under jitter cfg (seed 7). */
static void jitter_steps(exec_config_t cfg, plan_exec_t exec, double bytes_host, double *p50, double *p99, double *min)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    cfg.mode = EXEC_STREAMS;
    cfg.n_gpus = 1;
    cfg.prefill_chunk = 1;
    cfg.host_pool = -1;
    cfg.jitter_seed = 7;
    world_config(&w, cfg);
    w.toy.bytes = 0.5e9;
    w.toy.latency_ps = 500000 * SIM_PS_PER_US;
    w.toy.bytes_host = bytes_host;
    w.toy.exec = exec;
    toy_t toys[1];
    add_sessions(&w, 1, toys, 20000);
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    *p50 = hist_quantile(st->step_s, 0.5);
    *p99 = hist_quantile(st->step_s, 0.99);
    *min = hist_min(st->step_s);
    world_free(&w);
}

/* Jitter 0.02 s + 0.08·1 s = 0.1 s: over 20000 steps the median stays at 1 s and the p99 is 1.1 s
 * (an exponential tail: p99 − median = s·ln 50). The same seed gives the same steps. */
Test(exec, jitter_keeps_the_median_and_sets_the_p99)
{
    double p50[2], p99[2], min;
    for (int again = 0; again < 2; again++) {
        jitter_steps((exec_config_t){.jitter_abs_s = 0.02, .jitter_rel = 0.08}, PLAN_EXEC_GPU, 0, &p50[again], &p99[again], &min);
        cr_expect_float_eq(p50[again], 1.0, 0.01, "p50 %g", p50[again]);
        cr_expect_float_eq(p99[again], 1.1, 0.015, "p99 %g", p99[again]);
        cr_expect_geq(min, 1.0 - 0.1 / log(50.0) * log(2.0) - 1e-9);
    }
    cr_expect_eq(p50[0], p50[1]);
    cr_expect_eq(p99[0], p99[1]);
}

/* Each op takes its class's jitter: the GPU's (0.1 s at the p99), the copy engine's for a copy
 * moving host bytes (0.2 s), the gathers' for a kernel moving host bytes (0.4 s); a kernel moving
 * none takes the GPU's whatever the others. */
Test(exec, host_ops_take_their_paths_jitter)
{
    exec_config_t cfg = {.jitter_abs_s = 0.02, .jitter_rel = 0.08, .jitter_copy_abs_s = 0.1, .jitter_copy_rel = 0.1,
                         .jitter_gather_abs_s = 0.1, .jitter_gather_rel = 0.3};
    static const struct { plan_exec_t exec; double bytes_host, p99; } cases[] = {
        {PLAN_EXEC_GPU, 0, 1.1}, {PLAN_EXEC_COPY_H2D, 0.5e9, 1.2}, {PLAN_EXEC_GPU, 0.5e9, 1.4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double p50, p99, min;
        jitter_steps(cfg, cases[i].exec, cases[i].bytes_host, &p50, &p99, &min);
        cr_expect_float_eq(p50, 1.0, 0.01, "case %zu: p50 %g", i, p50);
        cr_expect_float_eq(p99, cases[i].p99, 0.015 * cases[i].p99, "case %zu: p99 %g", i, p99);
    }
}

/* A copy of 0.5 s (stream 1), then a 1 s kernel waiting on it (on stream `kernel_stream`): a step is
 * 1.5 s and the hand-off. */
static int copy_then_kernel(const world_t *w, uint8_t kernel_stream, plan_t *out, err_t *e)
{
    plan_op_t copy = {.exec = PLAN_EXEC_COPY_H2D, .stream = 1, .n_uses = 1, .uses = {{w->link, 1.0}}, .cost = {.work = 0.5e9}};
    plan_op_t k = {.exec = PLAN_EXEC_GPU, .stream = kernel_stream, .n_uses = 1, .uses = {{w->hbm, 1.0}}, .cost = {.work = 1e9}};
    uint32_t dep = 0;
    int rc = plan_add(out, &copy, NULL, 0, NULL, e);
    return rc ? rc : plan_add(out, &k, &dep, 1, NULL, e);
}

static int copy_then_kernel_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    (void)env;
    (void)req;
    return copy_then_kernel(self, 0, out, e);
}

/* The same with the kernel on the copy's stream: its explicit dependency and the stream's order are
 * one wait, and one hand-off (not the later of two draws). */
static int copy_then_kernel_one_stream_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out,
                                             err_t *e)
{
    (void)env;
    (void)req;
    return copy_then_kernel(self, 1, out, e);
}

/* A hand-off of 0.2 s ± 0.2 (spread 0.4 s): each a uniform draw over [0, 0.4], so over 4000 steps
 * the step's p10, p50, p90 are 1.5 s plus 0.04, 0.2, 0.36 (± 3 standard errors of a quantile,
 * sqrt(p(1−p)/n)·0.4, and the histogram's HIST_REL_ERR) and none is below 1.5 s or above 1.9;
 * without the spread every step is 1.7. The same with the kernel on the copy's stream (the later of
 * two draws would put the median at 1.5 + 0.4·sqrt(1/2) = 1.783). */
Test(exec, a_handoff_with_a_spread_is_uniform)
{
    static const plan_provider_ops_t two = {.name = "copy_then_kernel", .build = copy_then_kernel_build,
                                            .footprint = toy_footprint};
    static const plan_provider_ops_t one = {.name = "copy_then_kernel_one_stream",
                                            .build = copy_then_kernel_one_stream_build, .footprint = toy_footprint};
    for (int run = 0; run < 4; run++) {
        int spread = run % 2;
        const plan_provider_ops_t *ops = run < 2 ? &two : &one;
        world_t w;
        world_init(&w, EXEC_STREAMS, 0);
        world_config(&w, (exec_config_t){.mode = EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                                         .copy_handoff_ps = 200000 * SIM_PS_PER_US,
                                         .copy_handoff_spread_ps = spread ? 400000 * SIM_PS_PER_US : 0,
                                         .jitter_seed = 3});
        exec_turn_t turn = {.arrival_s = -1, .decode_tokens = 4000};
        exec_session_spec_t spec = {.id = 0, .gpu = 0, .context_tokens = 100, .final_tokens = 4100, .turns = &turn,
                                    .n_turns = 1, .provider = {ops, &w}};
        err_t e;
        cr_assert_eq(exec_add_session(w.x, &spec, &e), 0, "%s", e.msg);
        world_run(&w);
        const hist_t *h = exec_stats(w.x)->step_s;
        static const double q[3] = {0.1, 0.5, 0.9};
        for (int i = 0; i < 3; i++) {
            double want = 1.5 + (spread ? 0.4 * q[i] : 0.2), tol = spread ? 3 * sqrt(q[i] * (1 - q[i]) / 4000) * 0.4 : 1e-9;
            cr_expect_float_eq(hist_quantile(h, q[i]), want, tol + HIST_REL_ERR * want, "%s, spread %d, q %g: %.6g",
                               ops->name, spread, q[i], hist_quantile(h, q[i]));
        }
        cr_expect_geq(hist_min(h), 1.5 - 1e-9);
        cr_expect_leq(hist_max(h), 1.9 + 1e-9);
        world_free(&w);
    }
}

/* Lockstep batching: N sessions whose single op carries one merge key read the shared bytes once. */
Test(exec, batch_merge_reads_shared_bytes_once)
{
    world_t w;
    world_init(&w, EXEC_LOCKSTEP, 0);
    w.toy.merge_key = 42;
    toy_t toys[5];
    add_sessions(&w, 5, toys, 3);
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    cr_assert_eq(st->decode_tokens, 15);
    cr_assert_float_eq(sim_res_work(w.sim, w.link), 3e9, 1.0, "three iterations, each read once: %g, steps %g mean %g", sim_res_work(w.sim, w.link), (double)hist_count(st->step_s), hist_mean(st->step_s));
    cr_assert_float_eq(hist_mean(st->step_s), 1.0, 1e-6);
    world_free(&w);
}

/* Without a merge key, batched sessions' ops run one after another on the batch's stream. */
Test(exec, batch_without_key_serialises)
{
    world_t w;
    world_init(&w, EXEC_CONTINUOUS, 0);
    toy_t toys[3];
    add_sessions(&w, 3, toys, 2);
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    cr_assert_float_eq(sim_res_work(w.sim, w.link), 6e9, 1.0);
    cr_assert_float_eq(hist_mean(st->step_s), 3.0, 1e-6);
    world_free(&w);
}

/* Launch costs: 4 ops of zero work, 10 µs launch each: a step is 40 µs; with CUDA graphs one
 * 7 µs graph launch. */
Test(exec, launch_thread_and_graphs)
{
    for (int graphs_on = 0; graphs_on < 2; graphs_on++) {
        world_t w;
        world_init(&w, EXEC_STREAMS, 0);
        world_config(&w, (exec_config_t){.mode = EXEC_STREAMS, .cuda_graphs = graphs_on, .n_gpus = 1, .prefill_chunk = 1,
                             .host_pool = -1, .graph_launch_ps = 7 * SIM_PS_PER_US});
        w.toy.bytes = 0;
        w.toy.n_ops = 4;
        w.toy.launch_ps = 10 * SIM_PS_PER_US;
        toy_t toys[1];
        add_sessions(&w, 1, toys, 1);
        world_run(&w);
        double want = graphs_on ? 7e-6 : 40e-6;
        const exec_stats_t *st = exec_stats(w.x);
        cr_assert_float_eq(hist_mean(st->step_s), want, 1e-12);
        /* Every op was ready when the previous one ended and waited for its own launch. */
        double lost = st->lost_ps[sim_res_count(w.sim) + EXEC_LOST_LAUNCH] / (double)SIM_PS_PER_S;
        cr_assert_float_eq(lost, want, 1e-12, "launch wait %g s", lost);
        world_free(&w);
    }
}

/* Launches overlap execution: 4 chained ops of 1e6 B (1 ms each) with 10 µs launches: the first op
 * waits 10 µs, later launches hide behind execution: step = 10 µs + 4 ms. */
Test(exec, launches_overlap_execution)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    w.toy.bytes = 1e6;
    w.toy.n_ops = 4;
    w.toy.launch_ps = 10 * SIM_PS_PER_US;
    toy_t toys[1];
    add_sessions(&w, 1, toys, 1);
    world_run(&w);
    cr_assert_float_eq(hist_mean(exec_stats(w.x)->step_s), 4e-3 + 10e-6, 1e-12);
    world_free(&w);
}

/* Two sessions as streams, each a chain of two 1 s ops on a resource of its own (nothing shared).
 * The launch thread issues A1 A2 B1 B2 (a plan's launches back to back). With one hardware queue B1
 * waits behind A2 until A2 starts (at 1 s), so B runs 1..3 s; its step is 3 s from its beginning,
 * 2 s from when an event before B1 would fire (latency_from_queue). With two queues, or one per
 * stream (0), both take 2 s. */
Test(exec, hardware_queues_serialise_falsely)
{
    const uint32_t queues[3] = {1, 2, 0};
    for (int q = 0; q < 3; q++)
        for (int dev = 0; dev < 2; dev++) {
            world_t w;
            world_init(&w, EXEC_STREAMS, 0);
            world_config(&w, (exec_config_t){.mode = EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                                 .hw_queues = queues[q], .latency_from_queue = dev});
            w.toy.n_ops = 2;
            toy_t toys[2];
            add_sessions(&w, 2, toys, 1);
            toys[1].res = w.other;
            world_run(&w);
            const exec_stats_t *st = exec_stats(w.x);
            bool shared = queues[q] == 1;
            cr_assert_float_eq(st->last_token_s, shared ? 3.0 : 2.0, 1e-9, "queues %u", queues[q]);
            cr_assert_float_eq(hist_max(st->step_s), shared && !dev ? 3.0 : 2.0, 1e-9, "queues %u dev %d",
                               queues[q], dev);
            /* tokens/s count from the step's beginning whatever the latency window */
            cr_assert_float_eq(1.0 / hist_min(st->session_tps), shared ? 3.0 : 2.0, 1e-9);
            world_free(&w);
        }
}

/* One session, two independent 1 s ops on streams of their own over different resources: they
 * overlap (a 1 s step), unless every op of the session goes on one stream (2 s). */
Test(exec, one_stream_per_session_serialises)
{
    for (int one = 0; one < 2; one++) {
        world_t w;
        world_init(&w, EXEC_STREAMS, 0);
        world_config(&w, (exec_config_t){.mode = EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1, .one_stream = one});
        w.toy.n_ops = 2;
        w.toy.separate_streams = true;
        toy_t toys[1];
        add_sessions(&w, 1, toys, 1);
        world_run(&w);
        cr_assert_float_eq(hist_mean(exec_stats(w.x)->step_s), one ? 2.0 : 1.0, 1e-9);
        world_free(&w);
    }
}

/* Sessions of one 1 s op each, over resources of their own, kinds by session (1: an SM gather, its
 * SMs reading host memory; 0: a kernel; 2: a copy), started together in id order. With gathers
 * exclusive a gather and a kernel take turns (the second ends at 2 s), and a later gather waits
 * behind the kernel that became ready before it (3 s), while gathers among themselves, kernels
 * among themselves and copies with anything overlap (1 s). Without, everything overlaps. The time
 * ops waited for their turn is reported where time went (1 s for the second of a pair). */
static double kinds_last_s(bool exclusive, const int *kinds, int n, double *turns_s)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    world_config(&w, (exec_config_t){.mode = EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                                     .gathers_exclusive = exclusive});
    sim_res_t res[3] = {w.link, w.hbm, w.other};
    toy_t toys[3];
    add_sessions(&w, n, toys, 1);
    for (int i = 0; i < n; i++) {
        toys[i].res = res[i];
        toys[i].bytes_host = kinds[i] == 1 ? 1e9 : 0;
        toys[i].exec = kinds[i] == 2 ? PLAN_EXEC_COPY_H2D : PLAN_EXEC_GPU;
    }
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    double last = st->last_token_s;
    *turns_s = st->lost_ps[sim_res_count(w.sim) + EXEC_LOST_TURNS] / (double)SIM_PS_PER_S;
    world_free(&w);
    return last;
}

Test(exec, gathers_and_kernels_take_turns)
{
    static const int gather_kernel[] = {1, 0}, kernel_gather[] = {0, 1}, gathers[] = {1, 1}, kernels[] = {0, 0},
                     kernel_copy[] = {0, 2}, fifo[] = {1, 0, 1};
    double t;
    for (int ex = 0; ex < 2; ex++) {
        cr_assert_float_eq(kinds_last_s(ex, gather_kernel, 2, &t), ex ? 2.0 : 1.0, 1e-9);
        cr_assert_float_eq(t, ex ? 1.0 : 0.0, 1e-9);
        cr_assert_float_eq(kinds_last_s(ex, kernel_gather, 2, &t), ex ? 2.0 : 1.0, 1e-9);
        cr_assert_float_eq(kinds_last_s(ex, gathers, 2, &t), 1.0, 1e-9);
        cr_assert_float_eq(t, 0.0, 1e-9);
        cr_assert_float_eq(kinds_last_s(ex, kernels, 2, &t), 1.0, 1e-9);
        cr_assert_float_eq(kinds_last_s(ex, kernel_copy, 2, &t), 1.0, 1e-9);
        cr_assert_float_eq(kinds_last_s(ex, fifo, 3, &t), ex ? 3.0 : 1.0, 1e-9);
        cr_assert_float_eq(t, ex ? 3.0 : 0.0, 1e-9);   /* B waits 1 s, C 2 s */
    }
}

/* The launch thread issues one plan's launches back to back: two sessions of two chained 1 s ops
 * with 10 µs launches go A1 (10 µs) A2 (20) B1 (30) B2 (40): B ends at 2 s + 30 µs (interleaved
 * launches, A1 B1 A2 B2, would end it at 2 s + 20 µs). */
Test(exec, launch_thread_issues_a_plan_at_a_time)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    w.toy.n_ops = 2;
    w.toy.launch_ps = 10 * SIM_PS_PER_US;
    toy_t toys[2];
    add_sessions(&w, 2, toys, 1);
    toys[1].res = w.other;
    world_run(&w);
    cr_assert_float_eq(exec_stats(w.x)->last_token_s, 2.0 + 30e-6, 1e-12);
    world_free(&w);
}

/* Reserve admission: a pool for two sessions' final footprint; the third waits for the first to end. */
Test(exec, reserve_admission_waits_for_memory)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 2 * 102.0 + 1.0);
    w.toy.hbm_per_token = 1.0;
    toy_t toys[3];
    add_sessions(&w, 3, toys, 2);
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    cr_assert_eq(st->sessions_done, 3);
    cr_assert_eq(hist_count(st->admit_wait_s), 3);
    /* Two sessions share the link for 2 steps of 2 s; the third starts at 4 s and runs alone. */
    cr_assert_float_eq(hist_max(st->admit_wait_s), 4.0, 1e-6);
    cr_assert_float_eq(st->last_token_s, 6.0, 1e-6);
    cr_assert_float_eq(sim_pool_peak(w.sim, w.pool), 204.0, 1e-9);
    world_free(&w);
}

/* Grow-and-evict: the pool fits the first tokens but not growth; the session is evicted, counted. */
Test(exec, grow_evict_counts)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 101.5);
    world_config(&w, (exec_config_t){.mode = EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 16, .host_pool = -1,
                         .hbm_pool = &w.pool, .admission = EXEC_ADMIT_GROW_EVICT});
    w.toy.hbm_per_token = 1.0;
    toy_t toys[1];
    add_sessions(&w, 1, toys, 5);
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    cr_assert_eq(st->evictions, 1);
    cr_assert_eq(st->decode_tokens, 1, "100 tokens held, the step to 101 fits, the next does not");
    world_free(&w);
}

Test(exec, bad_input_is_an_error)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    err_t e;
    exec_turn_t turn = {.decode_tokens = 0};
    toy_t toy = w.toy;
    exec_session_spec_t spec = {.id = 1, .gpu = 0, .turns = &turn, .n_turns = 1, .provider = {&toy_ops, &toy}};
    cr_assert_eq(exec_add_session(w.x, &spec, &e), ERR_INVAL);
    turn.decode_tokens = 1;
    spec.gpu = 3;
    cr_assert_eq(exec_add_session(w.x, &spec, &e), ERR_INVAL);
    spec.gpu = 0;
    turn.think_s = -1;
    cr_assert_eq(exec_add_session(w.x, &spec, &e), ERR_INVAL);
    exec_config_t cfg = {.mode = EXEC_STREAMS, .n_gpus = 0, .prefill_chunk = 1};
    exec_t *x2;
    cr_assert_eq(exec_new(w.sim, &cfg, &x2, &e), ERR_INVAL);
    world_free(&w);
}

/* A think time past what the clock holds (231 days; trace files allow 100 years) is after the run's
 * end: the second turn never starts (it once wrapped to a negative time and ran at once). */
Test(exec, a_think_time_past_the_clock_is_after_the_end)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    exec_turn_t turns[2] = {{.think_s = 0, .arrival_s = -1, .decode_tokens = 1},
                            {.think_s = 2e7, .arrival_s = -1, .decode_tokens = 1}};
    exec_session_spec_t spec = {.id = 1, .gpu = 0, .arrival_s = 0, .context_tokens = 100, .final_tokens = 102,
                                .turns = turns, .n_turns = 2, .provider = {&toy_ops, &w.toy}};
    err_t e;
    cr_assert_eq(exec_add_session(w.x, &spec, &e), 0, "%s", e.msg);
    cr_assert_eq(sim_run(w.sim, 100 * SIM_PS_PER_S, &e), 0, "%s", e.msg);
    const exec_stats_t *st = exec_stats(w.x);
    cr_assert_eq(st->turns_done, 1);
    cr_assert_eq(st->decode_tokens, 1, "one step of 1 s; the second turn is 2e7 s later");
    world_free(&w);
}

/* A plan with a backward dependency is rejected by the executor through plan_validate. */
static int cyclic_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    (void)env;
    (void)req;
    const toy_t *t = self;
    plan_op_t op = {.n_uses = 1, .uses = {{t->res, 1.0}}, .cost = {.work = 1}};
    uint32_t first = 0;
    int rc = plan_add(out, &op, NULL, 0, NULL, e);
    if (!rc) rc = plan_add(out, &op, &first, 1, NULL, e);
    /* Rewire by hand: op 0 waits for op 1, op 1 for nothing: a cycle with issue order. */
    out->ops[0].n_deps = 1;
    out->ops[0].dep_first = 0;
    out->ops[1].n_deps = 0;
    out->deps[0] = 1;
    return rc;
}
static const plan_provider_ops_t cyclic_ops = {.name = "cyclic", .build = cyclic_build};

Test(exec, cyclic_plan_is_an_error)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 0);
    toy_t toy = w.toy;
    exec_turn_t turn = {.decode_tokens = 1};
    exec_session_spec_t spec = {.id = 1, .gpu = 0, .turns = &turn, .n_turns = 1, .provider = {&cyclic_ops, &toy}};
    err_t e;
    cr_assert_eq(exec_add_session(w.x, &spec, &e), 0);
    plan_t p;
    plan_init(&p);
    cr_assert_eq(cyclic_build(&toy, NULL, NULL, &p, &e), 0);
    cr_assert_eq(plan_validate(&p, &e), ERR_CYCLE);
    plan_free(&p);
    cr_assert_eq(sim_run(w.sim, SIM_TIME_NEVER, &e), ERR_CYCLE, "%s", e.msg);
    world_free(&w);
}

/* Results do not depend on the order sessions are listed in: three sessions of different sizes
 * competing for memory (two fit) and one link give the same statistics whatever the listing order. */
static void order_run(const int *order, double *last, double *wait_max, double *ttft_p99)
{
    world_t w;
    world_init(&w, EXEC_STREAMS, 2 * 110.0 + 1.0);
    toy_t toys[3];
    for (int j = 0; j < 3; j++) {
        int i = order[j];
        toys[i] = w.toy;
        toys[i].hbm_per_token = 1.0;
        toys[i].bytes = 1e9 * (i + 1);
        exec_turn_t turn = {.arrival_s = -1, .decode_tokens = 2};
        exec_session_spec_t spec = {.id = (uint64_t)i, .gpu = 0, .arrival_s = 0, .context_tokens = 100,
                                    .final_tokens = 102 + (uint64_t)i * 4, .turns = &turn, .n_turns = 1,
                                    .provider = {&toy_ops, &toys[i]}};
        err_t e;
        cr_assert_eq(exec_add_session(w.x, &spec, &e), 0, "%s", e.msg);
    }
    world_run(&w);
    const exec_stats_t *st = exec_stats(w.x);
    *last = st->last_token_s;
    *wait_max = hist_max(st->admit_wait_s);
    *ttft_p99 = hist_quantile(st->ttft_s, 0.99);
    world_free(&w);
}

Test(exec, independent_of_listing_order)
{
    static const int orders[3][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}};
    double ref[3];
    order_run(orders[0], &ref[0], &ref[1], &ref[2]);
    cr_assert_gt(ref[1], 0, "the third session must wait for memory");
    for (int k = 1; k < 3; k++) {
        double got[3];
        order_run(orders[k], &got[0], &got[1], &got[2]);
        for (int m = 0; m < 3; m++) cr_assert_eq(got[m], ref[m], "order %d, statistic %d: %.17g vs %.17g", k, m, got[m], ref[m]);
    }
}

/* A copy feeding kernels: op 0 copies 0.5e9 B over the link (0.5 s, stream 1); op 1 is a 1 s kernel
 * on "other" (stream 0); op 2, a 1 s kernel on hbm (stream 2), waits on both. With the copy
 * engine's hand-off h, op 2 starts at max(0.5 + h, 1): h = 0.2 s hides behind op 1 (step 2 s),
 * h = 0.7 s does not (2.2 s). Alone on an idle machine the plan counts the same. */
static int handoff_build(void *self, plan_env_t *env, const plan_request_t *req, plan_t *out, err_t *e)
{
    (void)env;
    (void)req;
    const world_t *w = self;
    plan_op_t copy = {.exec = PLAN_EXEC_COPY_H2D, .stream = 1, .n_uses = 1, .uses = {{w->link, 1.0}}, .cost = {.work = 0.5e9}};
    plan_op_t k1 = {.exec = PLAN_EXEC_GPU, .stream = 0, .n_uses = 1, .uses = {{w->other, 1.0}}, .cost = {.work = 1e9}};
    plan_op_t k2 = {.exec = PLAN_EXEC_GPU, .stream = 2, .n_uses = 1, .uses = {{w->hbm, 1.0}}, .cost = {.work = 1e9}};
    uint32_t deps[2] = {0, 1};
    int rc = plan_add(out, &copy, NULL, 0, NULL, e);
    if (!rc) rc = plan_add(out, &k1, NULL, 0, NULL, e);
    if (!rc) rc = plan_add(out, &k2, deps, 2, NULL, e);
    return rc;
}

Test(exec, a_kernel_waits_out_the_copy_engines_handoff)
{
    static const plan_provider_ops_t ops = {.name = "handoff", .build = handoff_build, .footprint = toy_footprint};
    static const double h_s[3] = {0, 0.2, 0.7}, step_s[3] = {2.0, 2.0, 2.2};
    for (int i = 0; i < 3; i++) {
        world_t w;
        world_init(&w, EXEC_STREAMS, 0);
        sim_ps_t h = (sim_ps_t)(h_s[i] * (double)SIM_PS_PER_S);
        world_config(&w, (exec_config_t){.mode = EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 1, .host_pool = -1,
                                         .copy_handoff_ps = h});
        exec_turn_t turn = {.arrival_s = -1, .decode_tokens = 1};
        exec_session_spec_t spec = {.id = 0, .gpu = 0, .context_tokens = 100, .final_tokens = 101, .turns = &turn,
                                    .n_turns = 1, .provider = {&ops, &w}};
        err_t e;
        cr_assert_eq(exec_add_session(w.x, &spec, &e), 0, "%s", e.msg);
        world_run(&w);
        cr_expect_float_eq(hist_mean(exec_stats(w.x)->step_s), step_s[i], 1e-9, "h = %g", h_s[i]);
        plan_t p;
        plan_init(&p);
        sim_ps_t alone;
        cr_assert_eq(handoff_build(&w, NULL, NULL, &p, &e), 0, "%s", e.msg);
        cr_assert_eq(plan_standalone_ps(&p, w.sim, h, &alone, &e), 0, "%s", e.msg);
        cr_expect_float_eq((double)alone / (double)SIM_PS_PER_S, step_s[i], 1e-9, "alone, h = %g", h_s[i]);
        plan_free(&p);
        world_free(&w);
    }
}
