/* Queueing theory through the sim API, each within a confidence interval from batch means.
 *
 * Batch means: the run is cut into B batches of equal job counts (after a warm-up batch); the batch
 * averages are nearly independent, so mean ± t·s/√B is a confidence interval for E[T]. We use a 99.9%
 * interval (t ≈ 3.88 for 19 degrees of freedom) so a fixed seed is far from the edge; a broken engine
 * (wrong sharing, wrong order, lost work) lands many intervals away. */
#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>

#include "sim/sim.h"

#define BATCHES 20
#define T_999_19 3.883

typedef struct batch {
    int per_batch, n;      /* jobs per batch, jobs done */
    double sum[BATCHES + 1];
} batch_t;

static void batch_add(batch_t *b, double t)
{
    int k = b->n++ / b->per_batch;
    if (k <= BATCHES) b->sum[k] += t;
}

/* Checks that `expect` lies in the interval from batches 1..BATCHES (batch 0 is the warm-up). */
static void batch_check(const batch_t *b, double expect, const char *what)
{
    double m[BATCHES], mean = 0, var = 0;
    for (int k = 0; k < BATCHES; k++) {
        m[k] = b->sum[k + 1] / b->per_batch;
        mean += m[k] / BATCHES;
    }
    for (int k = 0; k < BATCHES; k++) var += (m[k] - mean) * (m[k] - mean) / (BATCHES - 1);
    double half = T_999_19 * sqrt(var / BATCHES);
    cr_assert(fabs(mean - expect) <= half, "%s: E[T] %.6g, run %.6g ± %.3g", what, expect, mean, half);
    /* The interval must be informative too: within 10% of the value. */
    cr_assert(half < 0.1 * expect, "%s: interval ±%.3g too wide", what, half);
}

/* ---- M/M/1 processor sharing: one constraint shared equally by the jobs present ------------- */

typedef struct ps {
    gsl_rng *rng;
    sim_res_t r;
    double lambda, mean_work;
    int arrivals, max_jobs;
    batch_t b;
} ps_t;

static void ps_done(sim_t *sim, void *arg, sim_flow_t *flow)
{
    ps_t *ps = arg;
    batch_add(&ps->b, (double)(sim_now(sim) - sim_flow_start_time(flow)) / SIM_PS_PER_S);
}

static void ps_arrival(sim_t *sim, void *arg)
{
    ps_t *ps = arg;
    double one = 1;
    sim_flow_spec_t spec = {.work = gsl_ran_exponential(ps->rng, ps->mean_work), .weight = 1, .n_uses = 1,
                            .res = &ps->r, .coef = &one, .done = ps_done, .arg = ps};
    err_t e;
    if (sim_flow_start(sim, &spec, NULL, &e)) sim_fail(sim, &e);
    if (++ps->arrivals < ps->max_jobs) {
        sim_ps_t dt = (sim_ps_t)llround(gsl_ran_exponential(ps->rng, 1.0 / ps->lambda) * SIM_PS_PER_S);
        if (sim_at(sim, sim_now(sim) + dt, ps_arrival, ps, &e)) sim_fail(sim, &e);
    }
}

/* Capacity 1e9 B/s, mean size 1e6 B: E[S] = 1 ms; λ = 600/s: ρ = 0.6, E[T] = E[S]/(1 − ρ) = 2.5 ms. */
Test(queue, mm1_processor_sharing)
{
    sim_t *s;
    cr_assert_eq(sim_new(&s, NULL), 0);
    ps_t ps = {.rng = gsl_rng_alloc(gsl_rng_mt19937), .lambda = 600, .mean_work = 1e6};
    ps.b.per_batch = 2500;
    ps.max_jobs = ps.b.per_batch * (BATCHES + 1);
    gsl_rng_set(ps.rng, 42);
    cr_assert_eq(sim_res_add(s, "server", 1e9, "B/s", &ps.r, NULL), 0);
    cr_assert_eq(sim_at(s, 0, ps_arrival, &ps, NULL), 0);
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(ps.b.n, ps.max_jobs);
    batch_check(&ps.b, 1e-3 / (1 - 0.6), "M/M/1-PS");
    /* The server was busy a fraction ρ of the time. */
    cr_assert(fabs(sim_res_utilisation(s, ps.r) - 0.6) < 0.03, "utilisation %g", sim_res_utilisation(s, ps.r));
    gsl_rng_free(ps.rng);
    sim_free(s);
}

/* ---- M/D/1 FIFO with events only ----------------------------------------------------------- */

typedef struct md1 {
    gsl_rng *rng;
    sim_ps_t service_ps;
    double lambda;
    sim_ps_t *queue;   /* arrival times waiting, FIFO */
    int head, tail, busy, arrivals, max_jobs;
    batch_t b;
} md1_t;

static void md1_departure(sim_t *sim, void *arg);

static void md1_serve(sim_t *sim, md1_t *q)
{
    err_t e;
    q->busy = 1;
    if (sim_at(sim, sim_now(sim) + q->service_ps, md1_departure, q, &e)) sim_fail(sim, &e);
}

static void md1_departure(sim_t *sim, void *arg)
{
    md1_t *q = arg;
    batch_add(&q->b, (double)(sim_now(sim) - q->queue[q->head++]) / SIM_PS_PER_S);
    q->busy = 0;
    if (q->head < q->tail) md1_serve(sim, q);
}

static void md1_arrival(sim_t *sim, void *arg)
{
    md1_t *q = arg;
    q->queue[q->tail++] = sim_now(sim);
    if (!q->busy) md1_serve(sim, q);
    if (++q->arrivals < q->max_jobs) {
        err_t e;
        sim_ps_t dt = (sim_ps_t)llround(gsl_ran_exponential(q->rng, 1.0 / q->lambda) * SIM_PS_PER_S);
        if (sim_at(sim, sim_now(sim) + dt, md1_arrival, q, &e)) sim_fail(sim, &e);
    }
}

/* D = 1 ms, λ = 700/s: ρ = 0.7. Pollaczek–Khinchine: W_q = ρ·D/(2(1 − ρ)) = 1.1667 ms, E[T] = D + W_q. */
Test(queue, md1_pollaczek_khinchine)
{
    sim_t *s;
    cr_assert_eq(sim_new(&s, NULL), 0);
    md1_t q = {.rng = gsl_rng_alloc(gsl_rng_mt19937), .service_ps = SIM_PS_PER_S / 1000, .lambda = 700};
    q.b.per_batch = 5000;
    q.max_jobs = q.b.per_batch * (BATCHES + 1);
    q.queue = malloc((size_t)q.max_jobs * sizeof *q.queue);
    gsl_rng_set(q.rng, 4242);
    cr_assert_eq(sim_at(s, 0, md1_arrival, &q, NULL), 0);
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(q.b.n, q.max_jobs);
    double rho = 0.7, d = 1e-3;
    batch_check(&q.b, d + rho * d / (2 * (1 - rho)), "M/D/1");
    free(q.queue);
    gsl_rng_free(q.rng);
    sim_free(s);
}
