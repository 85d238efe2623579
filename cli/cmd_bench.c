/* odsim bench — engine benchmarks: the event queue in a hold model, and the fluid engine under load.
 *
 * Hold model: the queue holds N pending events; each step pops the earliest and pushes one at that
 * time plus an exponential increment (from a precomputed table, so the RNG is not measured).
 * Fluid: n flows run concurrently over 4 constraints in series (random coefficients, weights and,
 * for a quarter of them, caps); each completion starts a replacement from its done callback, so every
 * flow costs one start and one finish through the whole engine (events, solver, callbacks). Rates are
 * checked against the naive progressive-filling solver in a separate untimed run. Each figure is the
 * median of several repetitions, timed in CPU seconds of the benchmarking thread. End to end: the
 * stress profile (scenarios/bench_stress.yaml) simulated for a fixed span in the fine engine, once,
 * as simulated seconds per CPU second and per wall second. `--trace SEED` prints the engine
 * self-test trace instead (for comparing builds byte for byte). */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cmd.h"
#include "cli/study.h"
#include "common/version.h"
#include "sim/evq.h"
#include "sim/fluid_ref.h"
#include "sim/selftest.h"
#include "sim/sim.h"

#define BENCH_RES 4
#define BENCH_REPS_MAX 7
#define INC_TABLE 4096
#define STRESS_SCENARIO "scenarios/bench_stress.yaml"

extern const cmd_t cmd_bench;

static const char bench_usage[] =
    "usage: odsim bench [--json] [--quick]\n"
    "       odsim bench --trace SEED\n"
    "\n"
    "Engine benchmarks (medians over repetitions, per CPU second of one thread):\n"
    "  queue   events/s of the event queue alone, hold model with 10^3 and 10^6 pending events\n"
    "  fluid   flow start+finish events/s with 1, 8, 64 and 512 concurrent flows over 4 constraints\n"
    "          in series, with caps and weights; rates checked against the naive solver\n"
    "  end to end  simulated seconds per CPU and per wall second of the stress profile\n"
    "          (" STRESS_SCENARIO ", 20 s simulated; 5 s with --quick), fine engine, one run\n"
    "  --json   print the results as JSON\n"
    "  --quick  fewer repetitions and shorter runs\n"
    "  --trace SEED  print the engine self-test completion trace for SEED (compares builds)\n";

/* CPU time of this thread: on a shared machine, wall time would measure the neighbours too. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- queue: hold model --------------------------------------------------------------------- */

static void hold_fn(void) {}

/* Events per second of pop + push with `pending` events held, over `steps` steps; < 0 on failure. */
static double bench_hold(size_t pending, long steps, const int64_t *inc)
{
    evq_t *q = evq_new();
    if (!q) return -1;
    for (size_t i = 0; i < pending; i++)
        if (evq_push(q, inc[i % INC_TABLE] * (int64_t)(1 + i % 7), hold_fn, NULL)) {
            evq_free(q);
            return -1;
        }
    evq_entry_t e;
    double t0 = now_s();
    for (long s = 0; s < steps; s++) {
        evq_pop(q, &e);
        evq_push(q, e.t_ps + inc[s & (INC_TABLE - 1)], hold_fn, NULL);
    }
    double dt = now_s() - t0;
    evq_free(q);
    return (double)steps / dt;
}

/* ---- fluid: n concurrent flows in series --------------------------------------------------- */

typedef struct bslot {
    struct bfluid *b;
    sim_flow_t *flow;
    int live;
    sim_res_t res[BENCH_RES];
    double coef[BENCH_RES];
    double weight, cap;
} bslot_t;

typedef struct bfluid {
    sim_t *sim;
    gsl_rng *rng;
    sim_res_t res[BENCH_RES];
    double capacity[BENCH_RES];
    bslot_t *slots;
    int n;
    long started, limit;
    long check_every;   /* 0: no checks (timed run) */
    double max_rel;     /* worst relative rate difference seen against the naive solver */
} bfluid_t;

static void bf_done(sim_t *sim, void *arg, sim_flow_t *flow);

static void bf_start(bfluid_t *b, bslot_t *s)
{
    s->b = b;
    for (int r = 0; r < BENCH_RES; r++) {
        s->res[r] = b->res[r];
        s->coef[r] = 0.8 + 0.45 * gsl_rng_uniform(b->rng);
    }
    s->weight = 0.5 + 1.5 * gsl_rng_uniform(b->rng);
    /* A quarter are capped somewhere around their fair share. */
    s->cap = gsl_rng_uniform(b->rng) < 0.25 ? b->capacity[0] / b->n * (0.3 + gsl_rng_uniform(b->rng)) : 0;
    sim_flow_spec_t spec = {.work = gsl_ran_exponential(b->rng, 1e6) + 1e3, .weight = s->weight,
                            .cap_rate = s->cap, .n_uses = BENCH_RES, .res = s->res, .coef = s->coef,
                            .done = bf_done, .arg = s};
    err_t e;
    if (sim_flow_start(b->sim, &spec, &s->flow, &e)) sim_fail(b->sim, &e);
    s->live = 1;
    b->started++;
}

static void bf_check(bfluid_t *b)
{
    fluid_ref_flow_t rf[512] = {{0}};
    double rate[512];
    int map[512], n = 0;
    for (int i = 0; i < b->n && n < 512; i++)
        if (b->slots[i].live) {
            bslot_t *s = &b->slots[i];
            rf[n] = (fluid_ref_flow_t){s->weight, s->cap, BENCH_RES, s->res, s->coef};
            map[n++] = i;
        }
    if (fluid_ref_solve(BENCH_RES, b->capacity, (size_t)n, rf, rate)) return;
    for (int k = 0; k < n; k++) {
        double got = sim_flow_rate(b->slots[map[k]].flow), d = fabs(got - rate[k]) / rate[k];
        if (d > b->max_rel) b->max_rel = d;
    }
}

static void bf_done(sim_t *sim, void *arg, sim_flow_t *flow)
{
    bslot_t *s = arg;
    bfluid_t *b = s->b;
    (void)flow;
    s->live = 0;
    if (b->started >= b->limit) {
        sim_stop(sim);
        return;
    }
    bf_start(b, s);
    if (b->check_every && b->started % b->check_every == 0) bf_check(b);
}

/* Runs n concurrent flows until `limit` have started; returns start+finish events per second (the
 * run stops at the limit: each start after the first n is paired with a finish), or < 0 on failure.
 * With check_every > 0, compares rates with the naive solver (untimed use) into *max_rel. */
static double bench_fluid(int n, long limit, long check_every, unsigned long seed, double *max_rel)
{
    bfluid_t b = {.n = n, .limit = limit, .check_every = check_every};
    double result = -1;
    b.slots = calloc((size_t)n, sizeof *b.slots);
    b.rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!b.slots || !b.rng || sim_new(&b.sim, NULL)) goto out;
    gsl_rng_set(b.rng, seed);
    const char *names[BENCH_RES] = {"dram", "link", "duplex", "hbm"};
    const double caps[BENCH_RES] = {100e9, 55e9, 98e9, 4000e9};
    for (int r = 0; r < BENCH_RES; r++) {
        b.capacity[r] = caps[r];
        if (sim_res_add(b.sim, names[r], caps[r], "B/s", &b.res[r], NULL)) goto out;
    }
    for (int i = 0; i < n; i++) bf_start(&b, &b.slots[i]);
    double t0 = now_s();
    if (sim_run(b.sim, SIM_TIME_NEVER, NULL)) goto out;
    double dt = now_s() - t0;
    result = 2.0 * (double)(b.started - n) / dt;
    if (check_every) bf_check(&b);
    if (max_rel) *max_rel = b.max_rel;
out:
    sim_free(b.sim);
    gsl_rng_free(b.rng);
    free(b.slots);
    return result;
}

/* ---- driver -------------------------------------------------------------------------------- */

/* Runs the stress profile for duration (a scenario value, "20s") into *o; 0 or the error (e set). */
static int bench_end_to_end(const char *duration, json_t *o, err_t *e)
{
    char set[64];
    snprintf(set, sizeof set, "run.duration_s=%s", duration);
    const char *sets[1] = {set};
    study_t *s;
    int rc = study_open(STRESS_SCENARIO, sets, 1, &s, e);
    if (rc) return rc;
    study_opts_t opts = {0};
    study_result_t *r = NULL;
    double t0 = now_s();
    rc = study_run(s, 0, &opts, &r, e);
    double cpu_s = now_s() - t0;
    if (!rc) {
        double sim_s = r->simulated_s;
        json_object_set_new(o, "scenario", json_string(STRESS_SCENARIO));
        json_object_set_new(o, "engine", json_string("fine"));
        json_object_set_new(o, "simulated_s", json_real(sim_s));
        json_object_set_new(o, "cpu_s", json_real(cpu_s));
        json_object_set_new(o, "wall_s", json_real(r->wall_s));
        json_object_set_new(o, "sim_s_per_cpu_s", json_real(sim_s / cpu_s));
        json_object_set_new(o, "sim_s_per_wall_s", json_real(sim_s / r->wall_s));
        json_object_set_new(o, "events", json_integer((json_int_t)r->events));
    }
    study_result_free(r);
    study_free(s);
    return rc;
}

static int run_trace(const char *arg)
{
    char *end;
    unsigned long seed = strtoul(arg, &end, 10);
    if (!*arg || *end) return cmd_fail("bench", "--trace: not a seed: %s", arg);
    err_t e;
    if (selftest_trace(stdout, seed, &e)) return cmd_fail("bench", "%s", e.msg);
    return 0;
}

static int bench_main(int argc, char **argv)
{
    int json = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) return run_trace(argv[i + 1]);
        else return cmd_usage_error(&cmd_bench, "unknown argument '%s'", argv[i]);
    }
    int reps = quick ? 3 : BENCH_REPS_MAX;

    /* Exponential increments, mean 1 µs, in ps. */
    int64_t inc[INC_TABLE];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng) return cmd_fail("bench", "out of memory");
    gsl_rng_set(rng, 1);
    for (int i = 0; i < INC_TABLE; i++) inc[i] = 1 + (int64_t)gsl_ran_exponential(rng, 1e6);
    gsl_rng_free(rng);

    json_t *root = json_object(), *jq = json_array(), *jf = json_array();
    json_object_set_new(root, "version", json_string(ODSIM_VERSION));
    json_object_set_new(root, "git", json_string(odsim_git_rev));
    json_object_set_new(root, "repetitions", json_integer(reps));
    json_object_set_new(root, "timing", json_string("CPU time of the benchmarking thread"));
    json_object_set_new(root, "target_queue_events_per_s_at_1000", json_real(20e6));
    json_object_set_new(root, "target_flow_events_per_s_at_64", json_real(2e6));
    json_object_set_new(root, "queue", jq);
    json_object_set_new(root, "fluid", jf);

    const size_t pending[2] = {1000, 1000000};
    const long hold_steps[2] = {quick ? 2000000 : 20000000, quick ? 1000000 : 5000000};
    if (!json) printf("event queue, hold model (events/s, median of %d)\n", reps);
    for (int k = 0; k < 2; k++) {
        double v[BENCH_REPS_MAX];
        for (int r = 0; r < reps; r++)
            if ((v[r] = bench_hold(pending[k], hold_steps[k], inc)) < 0) {
                json_decref(root);
                return cmd_fail("bench", "out of memory");
            }
        double m = median(v, reps);
        json_t *o = json_object();
        json_object_set_new(o, "pending", json_integer((json_int_t)pending[k]));
        json_object_set_new(o, "steps", json_integer(hold_steps[k]));
        json_object_set_new(o, "events_per_s", json_real(m));
        json_array_append_new(jq, o);
        if (!json) printf("  %8zu pending  %7.2f M events/s\n", pending[k], m / 1e6);
    }

    const int nflows[4] = {1, 8, 64, 512};
    if (!json) printf("fluid engine, %d constraints in series, caps and weights (flow events/s, median of %d)\n",
                      BENCH_RES, reps);
    for (int k = 0; k < 4; k++) {
        long limit = (nflows[k] >= 512 ? 20000 : 200000) / (quick ? 10 : 1) + nflows[k];
        double v[BENCH_REPS_MAX], max_rel = 0;
        for (int r = 0; r < reps; r++)
            if ((v[r] = bench_fluid(nflows[k], limit, 0, 100 + (unsigned long)r, NULL)) < 0) {
                json_decref(root);
                return cmd_fail("bench", "fluid benchmark failed");
            }
        double m = median(v, reps);
        long checked = nflows[k] >= 512 ? 300 : 3000;
        if (bench_fluid(nflows[k], checked + nflows[k], nflows[k] >= 512 ? 10 : 1, 7, &max_rel) < 0) {
            json_decref(root);
            return cmd_fail("bench", "fluid check failed");
        }
        json_t *o = json_object();
        json_object_set_new(o, "flows", json_integer(nflows[k]));
        json_object_set_new(o, "flow_events_per_s", json_real(m));
        json_object_set_new(o, "max_rel_rate_diff_vs_naive", json_real(max_rel));
        json_array_append_new(jf, o);
        if (!json)
            printf("  %4d flows  %7.3f M flow events/s   max rel. rate diff vs naive %.2g\n", nflows[k], m / 1e6,
                   max_rel);
    }
    json_t *je = json_object();
    json_object_set_new(root, "end_to_end", je);
    err_t e;
    if (bench_end_to_end(quick ? "5s" : "20s", je, &e)) {
        json_decref(root);
        return cmd_fail("bench", "stress profile: %s", e.msg);
    }
    if (!json)
        printf("end to end, %s, fine engine: %.3g s simulated in %.3g CPU s (%.3gx real time), %.3g wall s (%.3gx)\n",
               STRESS_SCENARIO, json_real_value(json_object_get(je, "simulated_s")),
               json_real_value(json_object_get(je, "cpu_s")), json_real_value(json_object_get(je, "sim_s_per_cpu_s")),
               json_real_value(json_object_get(je, "wall_s")), json_real_value(json_object_get(je, "sim_s_per_wall_s")));
    if (json) {
        char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        json_decref(root);
        if (!s) return cmd_fail("bench", "out of memory");
        puts(s);
        free(s);
        return 0;
    } else {
        printf("targets: queue >= 20 M events/s at 10^3 pending; fluid >= 2 M flow events/s at 64 flows\n");
    }
    json_decref(root);
    return 0;
}

const cmd_t cmd_bench = {
    .name = "bench",
    .summary = "engine benchmarks (event queue, fluid solver); --trace SEED for build comparison",
    .usage = bench_usage,
    .main = bench_main,
};
