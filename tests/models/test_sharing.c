/* Sharing between paths on the engine's fluid solver, against DESIGN.md's H200 table: copies and SM
 * gathers on one link, both directions at once, a D2H copy during a gather. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/cost.h"

typedef struct probe {
    sim_flow_t *f[2];
    int n;
    double rate[2];
} probe_t;

static void read_rates(sim_t *sim, void *arg)
{
    probe_t *p = arg;
    for (int i = 0; i < p->n; i++) p->rate[i] = sim_flow_rate(p->f[i]) / 1e9;
    sim_stop(sim);
}

static void start(sim_t *sim, const plan_op_t *op, sim_flow_t **out)
{
    sim_res_t res[PLAN_MAX_USES];
    double coef[PLAN_MAX_USES];
    for (int i = 0; i < op->n_uses; i++) res[i] = op->uses[i].res, coef[i] = op->uses[i].coef;
    sim_flow_spec_t s = {.work = 1e15, .cap_rate = op->cost.cap_rate, .weight = op->weight, .n_uses = op->n_uses,
                         .res = res, .coef = coef};
    err_t e;
    cr_assert_eq(sim_flow_start(sim, &s, out, &e), 0, "%s", e.msg);
}

/* Rates (GB/s) of two transfers running together on GPU 0 of h200-1. */
static void together(cost_xfer_t fa, bool h2d_a, double piece_a, double region_a, cost_xfer_t fb, bool h2d_b,
                     double *ga, double *gb)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, NULL);
    cost_t c;
    cost_paths_t p;
    err_t e;
    cr_assert_eq(cost_init(&c, t.cal, &e), 0);
    cr_assert_eq(cost_paths_resolve(&c, &t.hw, t.sim, 0, HWINST_DRAM, &p, &e), 0);
    plan_op_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    double big = 1e12;
    cost_transfer(&c, &p, fa, h2d_a, big, big / piece_a, region_a, COST_GATHER_ALONE, &a);
    cost_transfer(&c, &p, fb, h2d_b, big, 1, 0, COST_GATHER_ALONE, &b);
    probe_t pr = {.n = 2};
    start(t.sim, &a, &pr.f[0]);
    start(t.sim, &b, &pr.f[1]);
    cr_assert_eq(sim_at(t.sim, SIM_PS_PER_S / 1000, read_rates, &pr, &e), 0);
    cr_assert_eq(sim_run(t.sim, SIM_PS_PER_S, &e), 0, "%s", e.msg);
    *ga = pr.rate[0];
    *gb = pr.rate[1];
    th_machine_free(&t);
}

Test(sharing, copy_against_an_uncapped_gather)
{
    double g, ce;
    together(COST_SM_GATHER, true, 512, 64.0 * 1048576, COST_CE, true, &g, &ce);
    cr_expect(fabs(g - 43) < 4, "gather %g GB/s (measured ~43)", g);
    cr_expect(fabs(ce - 10) < 2, "copy %g GB/s (measured ~10)", ce);
}

Test(sharing, copy_takes_the_rest_beside_a_row_capped_gather)
{
    double g, ce;
    together(COST_SM_GATHER, true, 256, 1073741824.0, COST_CE, true, &g, &ce);
    cr_expect(fabs(g - 26.5) < 2, "gather %g GB/s (capped ~26)", g);
    cr_expect(fabs(ce - 27) < 3, "copy %g GB/s (measured ~27)", ce);
}

Test(sharing, both_directions_share_the_duplex_total)
{
    double a, b;
    together(COST_CE, true, 1e12, 0, COST_CE, false, &a, &b);
    cr_expect(fabs(a + b - 97.9) < 0.5, "H2D %g + D2H %g (measured 97.9 together)", a, b);
    cr_expect(fabs(a - b) < 0.5);
}

Test(sharing, d2h_copy_during_a_gather)
{
    double g, d2h;
    together(COST_SM_GATHER, true, 512, 64.0 * 1048576, COST_CE, false, &g, &d2h);
    cr_expect(fabs(d2h - 9) < 2, "D2H %g GB/s (measured ~9)", d2h);
}
