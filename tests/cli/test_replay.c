/* Replay workloads predicted (models/replay.h, cli/replay_pred.h): the translation of each op kind,
 * and closed forms of the engine's step times from the committed profile's parameters (one op alone,
 * two streams joined by `after`, time-sliced processes, a batched loop, windows and idle time), with
 * the calibration's jitter off. Run from the repo root. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/replay_pred.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/hwinst.h"
#include "models/opkind.h"
#include "models/platform.h"
#include "models/replay.h"
#include "sim/hist.h"

/* The committed profile on box h200-1, as rpred_run resolves it, and an engine built from it. */
typedef struct fix {
    hwcat_t *cat;
    hw_t hw;
    calib_t *cal;
    cost_t cost;
    sim_t *sim;
} fix_t;

static void fix_open(fix_t *f)
{
    err_t e;
    memset(f, 0, sizeof *f);
    hw_select_t sel = {.box = "h200-1"};
    cr_assert_eq(hwcat_load("models/catalog", &f->cat, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_resolve(f->cat, &sel, NULL, &f->hw, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_load("models/calib/h200.yaml", &f->cal, &e), 0, "%s", e.msg);
    cr_assert_eq(platform_apply(f->cal, f->cat, &f->hw, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_seed(f->cal, &f->hw, &e), 0, "%s", e.msg);
    cr_assert_eq(cost_init(&f->cost, f->cal, &e), 0, "%s", e.msg);
    cr_assert_eq(sim_new(&f->sim, &e), 0);
    cr_assert_eq(hwinst_build(&f->hw, f->cal, f->sim, &e), 0, "%s", e.msg);
}

static void fix_close(fix_t *f)
{
    sim_free(f->sim);
    calib_free(f->cal);
    hw_free(&f->hw);
    hwcat_free(f->cat);
}

/* A profile parameter's value (seconds for _us, B/s for _GBps, as is otherwise). */
static double par(const fix_t *f, const char *name)
{
    double v = 0;
    err_t e;
    cr_assert_eq(calib_get(f->cal, name, &v, &e), 0, "%s", e.msg);
    size_t n = strlen(name);
    if (n > 3 && !strcmp(name + n - 3, "_us")) return v * 1e-6;
    if (n > 5 && !strcmp(name + n - 5, "_GBps")) return v * 1e9;
    return v;
}

static rf_workload_t *parse(const char *text)
{
    rf_workload_t *w = malloc(sizeof *w);
    char msg[512];
    cr_assert(w);
    cr_assert_eq(rf_parse(text, strlen(text), "test.replay", w, msg, sizeof msg), 0, "%s", msg);
    return w;
}

static void predict(const char *text, rpred_t *r)
{
    rf_workload_t *w = parse(text);
    rpred_opts_t o = {.no_jitter = true};
    err_t e;
    cr_assert_eq(rpred_run(w, &o, r, &e), 0, "%s", e.msg);
    free(w);
}

static void near(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= 1e-9 + 1e-7 * fabs(want), "%s: %.9g, want %.9g", what, got, want);
}

/* A quantile: the engine's histograms hold them within HIST_REL_ERR (sim/hist.h). */
static void near_q(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= HIST_REL_ERR * fabs(want), "%s: %.9g, want %.9g", what, got, want);
}

/* The time of an hbm op of `bytes` alone: the kernel's fixed time and its bytes at kernel_mem_eff of
 * the HBM (hbm_stream has no parameters of its own). */
static double hbm_s(const fix_t *f, double bytes)
{
    return par(f, "kernel_latency_us") + bytes / (par(f, "kernel_mem_eff") * par(f, "hbm_GBps"));
}

/* Each op kind's plan op: its executor, stream, kind, launch; a chain's other calls as a host op; a
 * sync making the next op wait, on the host, for every stream's last op; `after` as dependencies. */
Test(replay, translation)
{
    fix_t f;
    fix_open(&f);
    rf_workload_t *w = parse("odsim-replay 1\nworkload t\nmode streams\nwindow_ms 10\nsession\nregion 1073741824\n"
                             "op 0 h2d pieces=4 piece_bytes=4096 span=65536 stream=1\n"
                             "op 1 hbm bytes=1048576 stream=2\n"
                             "op 2 gather pieces=16 piece_bytes=4096 span=1048576 stream=3 after=0\n"
                             "op 3 sync\n"
                             "op 4 compute flops=1000000 after=3,1\n"
                             "op 5 host us=7\n"
                             "op 6 spin us=9 stream=4\n"
                             "op 7 h2d2d pieces=8 piece_bytes=512 span=65536\n"
                             "op 8 h2dbatch pieces=8 piece_bytes=512 span=65536 stream=5\n"
                             "op 9 d2h pieces=1 piece_bytes=65536 span=65536 stream=6\nend\n");
    replay_prov_t *p;
    err_t e;
    cr_assert_eq(replay_new(w, 0, &f.hw, &f.cost, &p, &e), 0, "%s", e.msg);
    plan_t pl;
    plan_init(&pl);
    cr_assert_eq(replay_build(p, f.sim, 0, &pl, &e), 0, "%s", e.msg);
    cr_assert_eq(pl.n_ops, 10, "10 ops less the sync, plus the chain's other calls: %u", pl.n_ops);
    static const int kinds[] = {OPKIND_H2D_COPY, OPKIND_LAUNCH, OPKIND_HBM_STREAM, OPKIND_SM_GATHER, OPKIND_COMPUTE,
                                OPKIND_HOST_BUSY, OPKIND_SPIN, OPKIND_H2D_COPY2D, OPKIND_H2D_BATCH, OPKIND_D2H_COPY};
    static const uint8_t execs[] = {PLAN_EXEC_COPY_H2D, PLAN_EXEC_CPU, PLAN_EXEC_GPU, PLAN_EXEC_GPU, PLAN_EXEC_GPU,
                                    PLAN_EXEC_CPU, PLAN_EXEC_GPU, PLAN_EXEC_COPY_H2D, PLAN_EXEC_COPY_H2D, PLAN_EXEC_COPY_D2H};
    static const uint8_t streams[] = {1, REPLAY_HOST_STREAM, 2, 3, 0, REPLAY_HOST_STREAM, 4, 0, 5, 6};
    for (uint32_t i = 0; i < 10; i++) {
        cr_expect_eq(pl.ops[i].kind, kinds[i], "plan op %u: kind %s", i, opkind_name(pl.ops[i].kind));
        cr_expect_eq(pl.ops[i].exec, execs[i], "plan op %u: exec %u", i, pl.ops[i].exec);
        cr_expect_eq(pl.ops[i].stream, streams[i], "plan op %u: stream %u", i, pl.ops[i].stream);
    }
    static const uint32_t plan_of[] = {0, 2, 3, REPLAY_NO_OP, 4, 5, 6, 7, 8, 9};
    for (uint32_t i = 0; i < 10; i++) cr_expect_eq(replay_plan_op(p, i), plan_of[i], "replay op %u", i);
    /* the chain: ce_latency, then its bytes capped at the rate that takes them and its 3 gaps as long
     * as the link alone would (the gaps hold the copy engine: its use is the inverse of that rate);
     * the first call's launch; the host op holds the other three calls */
    double chain_Bps = 4 * 4096.0 / (3 * par(&f, "ce_b2b_gap_us") + 4 * 4096.0 / par(&f, "h2d_GBps"));
    cr_expect_eq(pl.ops[0].cost.latency_ps, cost_ps(par(&f, "ce_latency_us")));
    cr_expect_float_eq(pl.ops[0].cost.cap_rate, chain_Bps, 1e-9 * chain_Bps);
    cr_expect_eq(pl.ops[0].uses[pl.ops[0].n_uses - 1].res, sim_res_find(f.sim, "gpu0.ce_h2d"));
    cr_expect_float_eq(pl.ops[0].uses[pl.ops[0].n_uses - 1].coef, 1 / chain_Bps, 1e-9 / chain_Bps);
    cr_expect_eq(pl.ops[0].launch_ps, cost_ps(par(&f, "copy_launch_us")));
    cr_expect_eq(pl.ops[1].launch_ps, cost_ps(3 * par(&f, "copy_launch_us")));
    cr_expect_float_eq(pl.ops[0].cost.work, 4 * 4096.0, 1e-9);
    /* gather after op 0 */
    cr_expect_eq(pl.ops[3].n_deps, 1);
    cr_expect_eq(pl.deps[pl.ops[3].dep_first], 0);
    cr_expect_float_eq(pl.ops[3].bytes_host, 16 * 4096.0, 1e-9);
    /* compute: its `after` 1 (the hbm op, plan op 2) and, after the sync, host_sync on every stream's
     * last op: 0 (h2d), 1 (the chain's calls), 2 (hbm), 3 (gather), each once */
    const plan_op_t *cmp = &pl.ops[4];
    cr_expect(cmp->host_sync);
    cr_expect_float_eq(cmp->cost.work, 1e6, 1e-9);
    cr_expect_float_eq(cmp->cost.cap_rate, par(&f, "fp32_TFLOPS") * 1e12, 1);
    bool waits[4] = {false};
    for (uint32_t k = 0; k < cmp->n_deps; k++) waits[pl.deps[cmp->dep_first + k]] = true;
    for (int i = 0; i < 4; i++) cr_expect(waits[i], "compute waits for plan op %d", i);
    cr_expect_eq(cmp->n_deps, 4);
    cr_expect(!pl.ops[5].host_sync, "one sync, one host_sync");
    cr_expect_eq(pl.ops[5].launch_ps, cost_ps(7e-6));
    cr_expect_eq(pl.ops[6].cost.latency_ps, cost_ps(9e-6));
    cr_expect_eq(pl.ops[6].launch_ps, cost_ps(par(&f, "launch_us")));
    /* the 2D copy's pitch (8 KiB) is a host page or more: a strided copy, a row per page */
    sim_ps_t t2d, tb;
    cr_assert_eq(plan_op_alone_ps(&pl.ops[7], f.sim, &t2d, &e), 0, "%s", e.msg);
    cr_assert_eq(plan_op_alone_ps(&pl.ops[8], f.sim, &tb, &e), 0, "%s", e.msg);
    double bytes = 8 * 512.0;
    near((double)t2d * 1e-12, par(&f, "ce_latency_us") + 8 * par(&f, "ce2d_page_row_ns") * 1e-9 + bytes / par(&f, "h2d_GBps"),
         "2D copy alone");
    near((double)tb * 1e-12, par(&f, "ce_latency_us") + 8 * par(&f, "cebatch_piece_us") + bytes / par(&f, "h2d_GBps"),
         "batched copy alone");
    double hbm, host;
    replay_footprint(&w->sessions[0], &hbm, &host);
    cr_expect_float_eq(host, 1073741824.0, 1e-9);
    cr_expect_float_eq(hbm, 4 * 4096.0 + 1048576 + 16 * 4096 + 8 * 512 * 2 + 65536, 1e-9);
    plan_free(&pl);
    replay_free(p);
    free(w);
    fix_close(&f);
}

/* One session, one op: each step is the op alone plus its launch. An hbm op of 256 MiB; a chain of 4
 * copies of 1 MiB (its other calls' host time, 3 copy_launch, hidden under the copies). The windows
 * start after the 3 warm-up steps (3 steps' time) and count the steps begun within 10 ms. */
Test(replay, one_op_alone_plus_launch)
{
    fix_t f;
    fix_open(&f);
    rpred_t r;
    predict("odsim-replay 1\nworkload one\nmode streams\nwindow_ms 10\nsession\nregion 268435456\n"
            "op 0 hbm bytes=268435456\nend\n", &r);
    double t = par(&f, "launch_us") + hbm_s(&f, 268435456.0);
    near(r.session[0].mean_s, t, "hbm step");
    near_q(r.session[0].p50_s, t, "hbm step p50");
    near_q(r.session[0].p99_s, t, "hbm step p99");
    near(r.start_s, 3 * t, "start after the warm-up");
    cr_expect_eq(r.session[0].steps, (uint64_t)fmax(ceil(10e-3 / t), 10));
    near(r.session[0].per_s, (double)r.session[0].steps / ((double)r.session[0].steps * t), "steps per second");
    cr_expect_str_eq(r.profile, "h200-pcie5-vm");
    rpred_free(&r);

    predict("odsim-replay 1\nworkload chain\nmode procs\nwindow_ms 10\nsession\nregion 268435456\n"
            "op 0 h2d pieces=4 piece_bytes=1048576 span=4194304\nend\n", &r);
    t = par(&f, "copy_launch_us") + par(&f, "ce_latency_us") + 3 * par(&f, "ce_b2b_gap_us") + 4194304.0 / par(&f, "h2d_GBps");
    near(r.session[0].mean_s, t, "chain step");
    rpred_free(&r);
    fix_close(&f);
}

/* Two streams: stream 0 an hbm op (T), stream 1 spins of 100 and 50 us. Launched one after another
 * (l each), the 50 us spin waits only for the 100 us one: the step is the hbm op's, l + T. With
 * `after=0` it also waits for the hbm op: l + T + 50 us, the critical path. */
Test(replay, two_streams_after_is_the_critical_path)
{
    fix_t f;
    fix_open(&f);
    char text[512];
    double t = par(&f, "launch_us") + hbm_s(&f, 1073741824.0);
    for (int after = 0; after < 2; after++) {
        snprintf(text, sizeof text,
                 "odsim-replay 1\nworkload two\nmode streams\nwindow_ms 10\nsession\nregion 4096\n"
                 "op 0 hbm bytes=1073741824\nop 1 spin us=100 stream=1\nop 2 spin us=50 stream=1%s\nend\n",
                 after ? " after=0" : "");
        rpred_t r;
        predict(text, &r);
        near(r.session[0].mean_s, t + (after ? 50e-6 : 0), after ? "with after" : "without");
        rpred_free(&r);
    }
    fix_close(&f);
}

/* Separate processes take the GPU in turns: one session's step of a 1 ms spin is l + 1 ms; with two,
 * each step waits for the other's spin and two context switches, each away from a context that
 * idled within its slice (the slice, 2 ms, outlasts a spin): 2 (1 ms + ctx_switch_idle), and the two
 * together never run more than one spin at a time. */
Test(replay, processes_time_slice)
{
    fix_t f;
    fix_open(&f);
    const char *one = "odsim-replay 1\nworkload p1\nmode procs\nwindow_ms 20\nsession\nregion 4096\nop 0 spin us=1000\nend\n";
    const char *two = "odsim-replay 1\nworkload p2\nmode procs\nwindow_ms 20\nsession\nregion 4096\nop 0 spin us=1000\n"
                      "session\nregion 4096\nop 0 spin us=1000\nend\n";
    rpred_t r1, r2;
    predict(one, &r1);
    predict(two, &r2);
    near(r1.session[0].mean_s, par(&f, "launch_us") + 1e-3, "alone");
    for (int s = 0; s < 2; s++) near_q(r2.session[s].p50_s, 2 * (1e-3 + par(&f, "ctx_switch_idle_us")), "time-sliced");
    cr_expect_leq(r2.pooled.per_s * 1e-3, 1.0 + 1e-9, "the GPU busy more than all the time");
    cr_expect_lt(r2.pooled.per_s, r1.pooled.per_s);
    rpred_free(&r1);
    rpred_free(&r2);
    fix_close(&f);
}

/* A batched loop: one thread launches both sessions' spins (100 us, each on its own stream 0), which
 * overlap: every session's step is 2 l + 100 us. Session 1 idles 400 us after each step, so the
 * batch does: steps S + 400 us apart, a window of n of them n (S + 400 us) long. */
Test(replay, batched_loop_and_idle)
{
    fix_t f;
    fix_open(&f);
    rpred_t r;
    predict("odsim-replay 1\nworkload b\nmode batched\nwindow_ms 10\nsession\nregion 4096\nop 0 spin us=100\n"
            "session\nregion 4096\nidle_us 400\nop 0 spin us=100\nend\n", &r);
    double step = 2 * par(&f, "launch_us") + 100e-6;
    for (int s = 0; s < 2; s++) {
        near(r.session[s].mean_s, step, "batched step");
        near(r.session[s].per_s, 1 / (step + 400e-6), "batched steps per second");
    }
    cr_expect_eq(r.session[1].steps, r.session[0].steps);
    near(r.start_s, 3 * (step + 400e-6), "start after the warm-ups and their idle time");
    rpred_free(&r);
    fix_close(&f);
}

static void expect_fails(const char *text, int code, const char *want)
{
    rf_workload_t *w = parse(text);
    rpred_opts_t o = {.no_jitter = true};
    rpred_t r;
    err_t e;
    cr_expect_eq(rpred_run(w, &o, &r, &e), code);
    cr_expect(strstr(e.msg, want) != NULL, "message: %s", e.msg);
    free(w);
}

/* A step of nothing but a sync never advances the clock; device buffers beyond the GPU's HBM never
 * fit. */
Test(replay, errors)
{
    expect_fails("odsim-replay 1\nworkload nothing\nmode streams\nwindow_ms 10\nsession\nregion 4096\nop 0 sync\nend\n",
                 ERR_INVAL, "takes no time");
    expect_fails("odsim-replay 1\nworkload big\nmode streams\nwindow_ms 10\nsession\nregion 4096\n"
                 "op 0 hbm bytes=68719476736\nop 1 hbm bytes=68719476736\nop 2 hbm bytes=68719476736\nend\n",
                 ERR_CAPACITY, "device buffers");
}
