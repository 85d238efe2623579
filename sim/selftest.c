#include "sim/selftest.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <inttypes.h>
#include <stdlib.h>

#include "sim/sim.h"

#define ST_RES 6
#define ST_FLOWS 300

typedef struct st_flow {
    struct st *st;
    int id;
    double charge_ps[ST_RES + 1];
} st_flow_t;

typedef struct st {
    sim_t *sim;
    gsl_rng *rng;
    FILE *out;
    st_flow_t flows[2 * ST_FLOWS];
    int n_started, n_arrived;
} st_t;

static void st_start(st_t *st);

static void st_done(sim_t *sim, void *arg, sim_flow_t *flow)
{
    st_flow_t *f = arg;
    st_t *st = f->st;
    fprintf(st->out, "%" PRId64 " flow %d", sim_now(sim), f->id);
    for (int r = 0; r <= ST_RES; r++) fprintf(st->out, " %.17g", f->charge_ps[r]);
    fputc('\n', st->out);
    (void)flow;
    if (gsl_rng_uniform(st->rng) < 0.3) st_start(st);  /* a follow-up, from inside the callback */
}

static void st_start(st_t *st)
{
    if (st->n_started >= 2 * ST_FLOWS) return;
    st_flow_t *f = &st->flows[st->n_started];
    f->st = st;
    f->id = st->n_started++;
    sim_res_t res[ST_RES];
    double coef[ST_RES];
    size_t n = 0;
    for (int r = 0; r < ST_RES; r++)
        if (gsl_rng_uniform(st->rng) < 0.4) {
            res[n] = r;
            coef[n++] = 0.5 + 1.5 * gsl_rng_uniform(st->rng);
        }
    double cap = gsl_rng_uniform(st->rng) < 0.3 || !n ? 1e8 * (0.5 + gsl_rng_uniform(st->rng)) : 0;
    sim_flow_spec_t spec = {
        .work = gsl_rng_uniform(st->rng) < 0.05 ? 0.5 : gsl_ran_exponential(st->rng, 1e6),
        .cap_rate = cap,
        .weight = 0.2 + 3 * gsl_rng_uniform(st->rng),
        .latency_ps = gsl_rng_uniform(st->rng) < 0.5 ? 0 : (sim_ps_t)gsl_rng_uniform_int(st->rng, 5000000),
        .n_uses = n, .res = res, .coef = coef, .charge_ps = f->charge_ps, .done = st_done, .arg = f};
    err_t e;
    if (sim_flow_start(st->sim, &spec, NULL, &e)) sim_fail(st->sim, &e);
}

static void st_arrival(sim_t *sim, void *arg)
{
    st_t *st = arg;
    st_start(st);
    err_t e;
    if (++st->n_arrived < ST_FLOWS &&
        sim_at(sim, sim_now(sim) + (sim_ps_t)gsl_ran_exponential(st->rng, 4e6), st_arrival, st, &e))
        sim_fail(sim, &e);
}

static void st_slice(sim_t *sim, void *arg)
{
    st_t *st = arg;
    err_t e;
    sim_res_t r = (sim_res_t)gsl_rng_uniform_int(st->rng, ST_RES);
    if (sim_res_set_capacity(sim, r, 1e9 * (0.2 + gsl_rng_uniform(st->rng)), &e) ||
        (st->n_arrived < ST_FLOWS && sim_at(sim, sim_now(sim) + 20000000, st_slice, st, &e)))
        sim_fail(sim, &e);
}

int selftest_trace(FILE *out, unsigned long seed, err_t *e)
{
    st_t *st = calloc(1, sizeof *st);
    if (!st) return err_set(e, ERR_NOMEM, "selftest: out of memory");
    st->out = out;
    int rc = sim_new(&st->sim, e);
    if (!rc && !(st->rng = gsl_rng_alloc(gsl_rng_mt19937))) rc = err_set(e, ERR_NOMEM, "selftest: out of memory");
    if (!rc) {
        gsl_rng_set(st->rng, seed);
        for (int r = 0; r < ST_RES && !rc; r++) {
            char name[16];
            snprintf(name, sizeof name, "r%d", r);
            rc = sim_res_add(st->sim, name, 1e9 * (0.2 + gsl_rng_uniform(st->rng)), "B/s", NULL, e);
        }
    }
    if (!rc) rc = sim_at(st->sim, 0, st_arrival, st, e);
    if (!rc) rc = sim_at(st->sim, 10000000, st_slice, st, e);
    if (!rc) rc = sim_run(st->sim, SIM_TIME_NEVER, e);
    if (!rc)
        fprintf(out, "end %" PRId64 " events %" PRIu64 " flows %d\n", sim_now(st->sim), sim_events(st->sim),
                st->n_started);
    gsl_rng_free(st->rng);
    sim_free(st->sim);
    free(st);
    return rc;
}
