/* The fluid solver: hand-solvable sharing cases, and the incremental solver against the naive one. */
#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <string.h>

#include "sim/fluid.h"
#include "sim/fluid_ref.h"
#include "sim/sim.h"

#define PS SIM_PS_PER_S

static sim_t *new_sim(void)
{
    sim_t *s = NULL;
    cr_assert_eq(sim_new(&s, NULL), 0);
    return s;
}

static sim_res_t add_res(sim_t *s, const char *name, double cap)
{
    sim_res_t r;
    cr_assert_eq(sim_res_add(s, name, cap, "B/s", &r, NULL), 0);
    return r;
}

typedef struct rec {
    sim_ps_t done_ps;
    int n_done;
} rec_t;

static void on_done(sim_t *sim, void *arg, sim_flow_t *flow)
{
    rec_t *r = arg;
    r->done_ps = sim_now(sim);
    r->n_done++;
    (void)flow;
}

static sim_flow_t *start(sim_t *s, double work, double weight, double cap, size_t n, const sim_res_t *res,
                         const double *coef, double *charge, rec_t *rec)
{
    sim_flow_spec_t spec = {.work = work, .weight = weight, .cap_rate = cap, .n_uses = n, .res = res,
                            .coef = coef, .charge_ps = charge, .done = on_done, .arg = rec};
    sim_flow_t *f = NULL;
    err_t e;
    cr_assert_eq(sim_flow_start(s, &spec, &f, &e), 0, "%s", e.msg);
    return f;
}

static const double ONE[4] = {1, 1, 1, 1};

#define assert_rel(a, b)                                                                          \
    cr_assert(fabs((double)(a) - (double)(b)) <= 1e-12 * fabs((double)(b)), "%.17g vs %.17g", (double)(a), \
              (double)(b))

/* Two flows on one link, C = 100: each gets 50. Works 100 and 200: the first ends at 100/50 = 2 s; the
 * second then has 200 − 2·50 = 100 left at 100/s: it ends at 3 s. */
Test(fluid, two_flows_one_link)
{
    sim_t *s = new_sim();
    sim_res_t l = add_res(s, "link", 100);
    rec_t a = {0}, b = {0};
    sim_flow_t *fa = start(s, 100, 1, 0, 1, &l, ONE, NULL, &a);
    sim_flow_t *fb = start(s, 200, 1, 0, 1, &l, ONE, NULL, &b);
    assert_rel(sim_flow_rate(fa), 50);
    assert_rel(sim_flow_rate(fb), 50);
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(a.done_ps, 2 * PS);
    cr_assert_eq(b.done_ps, 3 * PS);
    cr_assert_eq(a.n_done + b.n_done, 2);
    sim_free(s);
}

/* Three flows over two constraints: A on L1 (10), B on L1 and L2, C on L2 (4).
 * Levels: L1 10/2 = 5, L2 4/2 = 2 → L2 saturates first: B = C = 2. Then L1 has 10 − 2 = 8 for A alone. */
Test(fluid, three_flows_two_constraints)
{
    sim_t *s = new_sim();
    sim_res_t l1 = add_res(s, "l1", 10), l2 = add_res(s, "l2", 4);
    sim_res_t pb[2] = {l1, l2};
    rec_t r = {0};
    sim_flow_t *a = start(s, 1e9, 1, 0, 1, &l1, ONE, NULL, &r);
    sim_flow_t *b = start(s, 1e9, 1, 0, 2, pb, ONE, NULL, &r);
    sim_flow_t *c = start(s, 1e9, 1, 0, 1, &l2, ONE, NULL, &r);
    assert_rel(sim_flow_rate(a), 8);
    assert_rel(sim_flow_rate(b), 2);
    assert_rel(sim_flow_rate(c), 2);
    sim_free(s);
}

/* Duplex: h2d 55, d2h 55, duplex total 98. Two H2D copies (h2d + duplex) and one D2H (d2h + duplex).
 * Levels: h2d 55/2 = 27.5, d2h 55/1, duplex 98/3 = 32.67 → h2d saturates: the copies get 27.5 each.
 * Duplex has 98 − 55 = 43 left for the D2H copy alone, below d2h's 55: it gets 43, bound by duplex.
 * With one copy each way: duplex 98/2 = 49 < 55: both 49. */
Test(fluid, duplex)
{
    sim_t *s = new_sim();
    sim_res_t h = add_res(s, "h2d", 55), d = add_res(s, "d2h", 55), x = add_res(s, "duplex", 98);
    sim_res_t ph[2] = {h, x}, pd[2] = {d, x};
    rec_t r = {0};
    sim_flow_t *c1 = start(s, 1e9, 1, 0, 2, ph, ONE, NULL, &r);
    sim_flow_t *y = start(s, 1e9, 1, 0, 2, pd, ONE, NULL, &r);
    assert_rel(sim_flow_rate(c1), 49);
    assert_rel(sim_flow_rate(y), 49);
    sim_flow_t *c2 = start(s, 1e9, 1, 0, 2, ph, ONE, NULL, &r);
    assert_rel(sim_flow_rate(c1), 27.5);
    assert_rel(sim_flow_rate(c2), 27.5);
    assert_rel(sim_flow_rate(y), 43);
    assert_rel(sim_res_capacity(s, x), 98);
    sim_free(s);
}

/* A capped flow: link 100, F1 capped at 20, F2 uncapped. Level 100/2 = 50 > F1's cap 20 → F1 = 20,
 * F2 = 100 − 20 = 80. F2 (work 800) runs 10 s where alone it would take 8 s (standalone 100): 2 s lost,
 * charged to the link. F1 runs at its standalone rate (its cap): nothing lost. A flow with only a cap
 * (work 10, cap 5) ends at 2 s. */
Test(fluid, capped_flow_and_charges)
{
    sim_t *s = new_sim();
    sim_res_t l = add_res(s, "link", 100);
    double ch1[2] = {0}, ch2[2] = {0};
    rec_t r1 = {0}, r2 = {0}, r3 = {0};
    sim_flow_t *f1 = start(s, 1e6, 1, 20, 1, &l, ONE, ch1, &r1);
    sim_flow_t *f2 = start(s, 800, 1, 0, 1, &l, ONE, ch2, &r2);
    start(s, 10, 1, 5, 0, NULL, NULL, NULL, &r3);
    assert_rel(sim_flow_rate(f1), 20);
    assert_rel(sim_flow_rate(f2), 80);
    assert_rel(sim_flow_standalone_rate(f2), 100);
    assert_rel(sim_flow_standalone_rate(f1), 20);
    cr_assert_eq(sim_run(s, 20 * PS, NULL), 0);
    cr_assert_eq(r2.done_ps, 10 * PS);
    cr_assert_eq(r3.done_ps, 2 * PS);
    cr_assert(fabs(ch2[0] - 2.0 * PS) < 2, "charge %g", ch2[0]);
    cr_assert(fabs(ch2[1]) < 1e-3);
    cr_assert(fabs(ch1[0]) < 1e-3 && fabs(ch1[1]) < 1e-3);
    /* F1 alone after 10 s: the link binds no more, its cap does; it is at its standalone rate. */
    assert_rel(sim_flow_rate(f1), 20);
    cr_assert_eq(sim_now(s), 20 * PS);
    sim_free(s);
}

/* Weighted shares: link 90, weights 1 and 2: level 90/3 = 30 → 30 and 60. */
Test(fluid, weighted)
{
    sim_t *s = new_sim();
    sim_res_t l = add_res(s, "link", 90);
    rec_t r = {0};
    sim_flow_t *a = start(s, 1e9, 1, 0, 1, &l, ONE, NULL, &r);
    sim_flow_t *b = start(s, 1e9, 2, 0, 1, &l, ONE, NULL, &r);
    assert_rel(sim_flow_rate(a), 30);
    assert_rel(sim_flow_rate(b), 60);
    sim_free(s);
}

/* Coefficients: link 100; A consumes 2 units per unit of progress, B 1. Σ coef·w = 3 → level 100/3:
 * both progress at 33.3/s, A using 66.7 of the link and B 33.3 (the link is full). A's standalone is
 * 100/2 = 50. */
Test(fluid, coefficient)
{
    sim_t *s = new_sim();
    sim_res_t l = add_res(s, "link", 100);
    double two = 2;
    rec_t r = {0};
    sim_flow_t *a = start(s, 1e6, 1, 0, 1, &l, &two, NULL, &r);
    sim_flow_t *b = start(s, 1e6, 1, 0, 1, &l, ONE, NULL, &r);
    assert_rel(sim_flow_rate(a), 100.0 / 3);
    assert_rel(sim_flow_rate(b), 100.0 / 3);
    assert_rel(sim_flow_standalone_rate(a), 50);
    cr_assert_eq(sim_run(s, PS, NULL), 0);
    assert_rel(sim_res_utilisation(s, l), 1.0);
    cr_assert(fabs(sim_res_work(s, l) - 100) < 1e-9);
    sim_free(s);
}

/* A capacity change re-solves: two flows on 100 (50 each), capacity to 40 → 20 each. */
Test(fluid, capacity_change)
{
    sim_t *s = new_sim();
    sim_res_t l = add_res(s, "link", 100);
    rec_t r = {0};
    sim_flow_t *a = start(s, 1e6, 1, 0, 1, &l, ONE, NULL, &r);
    sim_flow_t *b = start(s, 1e6, 1, 0, 1, &l, ONE, NULL, &r);
    cr_assert_eq(sim_run(s, PS, NULL), 0);
    cr_assert_eq(sim_res_set_capacity(s, l, 40, NULL), 0);
    assert_rel(sim_flow_rate(a), 20);
    assert_rel(sim_flow_rate(b), 20);
    cr_assert(fabs(sim_flow_remaining(a) - (1e6 - 50)) < 1e-6);
    cr_assert_eq(sim_run(s, 2 * PS, NULL), 0);
    cr_assert(fabs(sim_flow_remaining(a) - (1e6 - 70)) < 1e-6);
    /* Utilisation: full both seconds. */
    assert_rel(sim_res_utilisation(s, l), 1.0);
    sim_free(s);
}

/* ---- differential: incremental fluid vs naive progressive filling ---------------------------- */

#define DMAX_RES 10
#define DMAX_FLOWS 24
#define RAND_RES 6     /* random topologies: up to 6 constraints, 14 flows */
#define RAND_FLOWS 14
#define BLOCAL 2       /* boxes: 2 local constraints per group */

/* A topology: any (groups 0), or a box of groups of BLOCAL local constraints ("GPUs") followed by
 * shared ones ("host DRAM", "a switch") that bind in some cases and not in others. */
typedef struct dtopo {
    int nres, groups, shared;
    double capacity[DMAX_RES];
} dtopo_t;

typedef struct dflow {
    int live;
    int32_t id, id2;          /* id2: in a second fluid (the box without its shared constraints) */
    int32_t res[DMAX_RES];
    double coef[DMAX_RES];
    size_t n_local;           /* in a box, its first n_local uses are local constraints */
    fluid_ref_flow_t ref;
    double rem;  /* expected remaining work */
} dflow_t;

static void dflow_finish(gsl_rng *rng, dflow_t *d, size_t n, double cap)
{
    d->ref = (fluid_ref_flow_t){gsl_rng_uniform(rng) < 0.3 ? 1.0 : 0.1 + 9.9 * gsl_rng_uniform(rng), cap, n,
                                d->res, d->coef};
    d->rem = 1e6;
}

static void dflow_random(gsl_rng *rng, int nres, dflow_t *d)
{
    size_t n = 0;
    while (!n || (n < (size_t)nres && gsl_rng_uniform(rng) < 0.5)) {
        int32_t r = (int32_t)gsl_rng_uniform_int(rng, (unsigned long)nres);
        int dup = 0;
        for (size_t k = 0; k < n; k++) dup |= d->res[k] == r;
        if (dup) continue;
        d->res[n] = r;
        d->coef[n++] = gsl_rng_uniform(rng) < 0.5 ? 1.0 : 0.5 + 1.5 * gsl_rng_uniform(rng);
    }
    double cap = gsl_rng_uniform(rng) < 0.4 ? 0.2 + 6 * gsl_rng_uniform(rng) : 0;
    if (gsl_rng_uniform(rng) < 0.1) n = 0, cap = 1 + gsl_rng_uniform(rng); /* a cap-only flow */
    d->n_local = n;
    dflow_finish(rng, d, n, cap);
}

/* A random box: 2–4 groups, 1–2 shared constraints, each slack (never binds), tight (binds often) or
 * comparable to one group's constraints (binds now and then). */
static void box_random(gsl_rng *rng, dtopo_t *t)
{
    t->groups = 2 + (int)gsl_rng_uniform_int(rng, 3);
    t->shared = 1 + (int)gsl_rng_uniform_int(rng, 2);
    t->nres = t->groups * BLOCAL + t->shared;
    for (int r = 0; r < t->groups * BLOCAL; r++) t->capacity[r] = 1 + 9 * gsl_rng_uniform(rng);
    for (int s = 0; s < t->shared; s++) {
        double u = gsl_rng_uniform(rng);
        t->capacity[t->groups * BLOCAL + s] = u < 0.3 ? 1e3 : u < 0.6 ? 0.5 + 2 * gsl_rng_uniform(rng)
                                                                     : 4 + 12 * gsl_rng_uniform(rng);
    }
}

/* A flow of a box: on one group's local constraints (one or both), often on shared ones too, now and
 * then on a second group's (joining the two while it runs); some capped. */
static void box_flow(gsl_rng *rng, const dtopo_t *t, dflow_t *d)
{
    size_t n = 0;
    int g = (int)gsl_rng_uniform_int(rng, (unsigned long)t->groups);
    int first = (int)gsl_rng_uniform_int(rng, BLOCAL);
    d->res[n] = g * BLOCAL + first;
    d->coef[n++] = 1;
    if (gsl_rng_uniform(rng) < 0.5) {
        d->res[n] = g * BLOCAL + (1 - first);
        d->coef[n++] = 0.5 + 1.5 * gsl_rng_uniform(rng);
    }
    if (gsl_rng_uniform(rng) < 0.05) {
        d->res[n] = (g + 1) % t->groups * BLOCAL;
        d->coef[n++] = 1;
    }
    d->n_local = n;
    for (int s = 0; s < t->shared; s++)
        if (gsl_rng_uniform(rng) < 0.6) {
            d->res[n] = t->groups * BLOCAL + s;
            d->coef[n++] = gsl_rng_uniform(rng) < 0.5 ? 1.0 : 0.5 + gsl_rng_uniform(rng);
        }
    dflow_finish(rng, d, n, gsl_rng_uniform(rng) < 0.3 ? 0.2 + 6 * gsl_rng_uniform(rng) : 0);
}

static void add_dflow(fluid_t *fl, int64_t now, dflow_t *d, size_t n_uses, int32_t *id)
{
    fluid_flow_req_t req = {d->rem, d->ref.weight, d->ref.cap_rate, n_uses, d->res, d->coef, NULL, 0, NULL};
    cr_assert_eq(fluid_flow_add(fl, now, &req, id), 0);
}

/* Rates, remaining work and usage against the naive solver. In a box, counts the shared constraints
 * at capacity (*binding) and those crossed by several groups' flows with room to spare (*slack). */
static void check_against_ref(fluid_t *fl, const dtopo_t *t, dflow_t *d, int64_t now, int *binding, int *slack)
{
    fluid_ref_flow_t rf[DMAX_FLOWS];
    double rate[DMAX_FLOWS];
    int map[DMAX_FLOWS], n = 0, groups_on[DMAX_RES] = {0};
    for (int i = 0; i < DMAX_FLOWS; i++)
        if (d[i].live) {
            rf[n] = d[i].ref;
            map[n++] = i;
        }
    cr_assert_eq(fluid_ref_solve((size_t)t->nres, t->capacity, (size_t)n, rf, rate), 0);
    double used[DMAX_RES] = {0};
    for (int k = 0; k < n; k++) {
        dflow_t *f = &d[map[k]];
        double got = fluid_flow_rate(fl, f->id);
        cr_assert(fabs(got - rate[k]) <= 1e-9 * rate[k], "flow %d: rate %.17g, reference %.17g", map[k], got,
                  rate[k]);
        double rem = fluid_flow_remaining(fl, f->id, now);
        cr_assert(fabs(rem - f->rem) <= 1e-9 * 1e6, "flow %d: remaining %.17g, expected %.17g", map[k], rem, f->rem);
        for (size_t u = 0; u < f->ref.n_uses; u++) {
            used[f->res[u]] += f->coef[u] * rate[k];
            if (t->groups) groups_on[f->res[u]] |= 1 << (f->res[0] / BLOCAL);
        }
    }
    for (int r = 0; r < t->nres; r++) {
        cr_assert(fabs(fluid_res_used(fl, r) - used[r]) <= 1e-9 * t->capacity[r], "res %d used %g vs %g", r,
                  fluid_res_used(fl, r), used[r]);
        if (!t->groups || r < t->groups * BLOCAL) continue;
        if (used[r] >= (1 - 1e-9) * t->capacity[r]) (*binding)++;
        else if (groups_on[r] & (groups_on[r] - 1)) (*slack)++;
    }
}

/* Random events on a fresh fluid of topology t (capacity changes, time passing, flows leaving and
 * joining, over nflows slots), each checked against the naive solver. */
static void differential_run(gsl_rng *rng, dtopo_t *t, int nflows, int ops, int *binding, int *slack)
{
    fluid_t *fl = fluid_new();
    for (int r = 0; r < t->nres; r++) {
        int32_t id;
        cr_assert_eq(fluid_res_add(fl, t->capacity[r], &id), 0);
    }
    dflow_t d[DMAX_FLOWS] = {0};
    int64_t now = 0;
    for (int op = 0; op < ops; op++) {
        double u = gsl_rng_uniform(rng);
        int i = (int)gsl_rng_uniform_int(rng, (unsigned long)nflows);
        if (u < (t->groups ? 0.1 : 0.15)) {
            /* In a box, mostly a shared constraint: a coupler turns binding or slack under running flows. */
            int r = t->groups && gsl_rng_uniform(rng) < 0.7
                        ? t->groups * BLOCAL + (int)gsl_rng_uniform_int(rng, (unsigned long)t->shared)
                        : (int)gsl_rng_uniform_int(rng, (unsigned long)t->nres);
            t->capacity[r] = t->groups ? 0.5 + 15 * gsl_rng_uniform(rng) : 1 + 9 * gsl_rng_uniform(rng);
            cr_assert_eq(fluid_res_set_capacity(fl, r, t->capacity[r], now), 0);
        } else if (u < (t->groups ? 0.25 : 0.3)) {
            /* Time passes: every flow progresses at its (checked) rate; none finishes. */
            int64_t dt = (int64_t)gsl_rng_uniform_int(rng, 100000) * 1000000;  /* up to 100 s */
            for (int k = 0; k < nflows; k++)
                if (d[k].live) d[k].rem -= fluid_flow_rate(fl, d[k].id) * (double)dt / (double)SIM_PS_PER_S;
            now += dt;
        } else if (d[i].live) {
            cr_assert_eq(fluid_flow_remove(fl, d[i].id, now), 0);
            d[i].live = 0;
        } else {
            if (t->groups) box_flow(rng, t, &d[i]);
            else dflow_random(rng, t->nres, &d[i]);
            add_dflow(fl, now, &d[i], d[i].ref.n_uses, &d[i].id);
            d[i].live = 1;
        }
        check_against_ref(fl, t, d, now, binding, slack);
    }
    fluid_free(fl);
}

Test(fluid, differential_random_topologies)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 12345);
    int unused = 0;
    for (int topo = 0; topo < 3000; topo++) {
        dtopo_t t = {.nres = 1 + (int)gsl_rng_uniform_int(rng, RAND_RES)};
        for (int r = 0; r < t.nres; r++) t.capacity[r] = 1 + 9 * gsl_rng_uniform(rng);
        differential_run(rng, &t, RAND_FLOWS, 30, &unused, &unused);
    }
    gsl_rng_free(rng);
}

/* Boxes: the solver keeps a shared constraint out of the components until it binds, then merges them
 * and splits them when they empty; the rates stay those of the naive solver throughout. */
Test(fluid, differential_coupled_groups)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 4242);
    int binding = 0, slack = 0;
    for (int topo = 0; topo < 1500; topo++) {
        dtopo_t t;
        box_random(rng, &t);
        differential_run(rng, &t, DMAX_FLOWS, 60, &binding, &slack);
    }
    /* Both cases were met often: couplers binding, and couplers between groups with room to spare. */
    cr_assert(binding > 5000 && slack > 5000, "binding %d, slack %d", binding, slack);
    gsl_rng_free(rng);
}

/* Takes out the flows done at now in both fluids (the same ones, in the same order). */
static void collect_both(fluid_t *with, fluid_t *without, dflow_t *d, int64_t now)
{
    const int32_t *ids1, *ids2;
    size_t n1, n2;
    int32_t got[DMAX_FLOWS];
    cr_assert_eq(fluid_collect_done(with, now, &ids1, &n1), 0);
    memcpy(got, ids1, n1 * sizeof *ids1);
    cr_assert_eq(fluid_collect_done(without, now, &ids2, &n2), 0);
    cr_assert_eq(n1, n2);
    for (size_t k = 0; k < n1; k++) {
        int j = 0;
        while (j < DMAX_FLOWS && !(d[j].live && d[j].id == got[k])) j++;
        cr_assert(j < DMAX_FLOWS && d[j].id2 == ids2[k]);
        fluid_flow_release(with, d[j].id);
        fluid_flow_release(without, d[j].id2);
        d[j].live = 0;
    }
}

/* A shared constraint that never binds is invisible: the same events on a box with it and on one
 * without it give the same rates, bottlenecks, remaining work, usage and busy time of the local
 * constraints, and completions, bit for bit, whatever flows cross it. */
Test(fluid, slack_coupler_changes_nothing)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 99);
    for (int topo = 0; topo < 400; topo++) {
        dtopo_t t;
        box_random(rng, &t);
        int local = t.groups * BLOCAL;
        for (int s = 0; s < t.shared; s++) t.capacity[local + s] = 1e6;
        fluid_t *with = fluid_new(), *without = fluid_new();
        for (int r = 0; r < t.nres; r++) {
            int32_t id;
            cr_assert_eq(fluid_res_add(with, t.capacity[r], &id), 0);
            if (r < local) cr_assert_eq(fluid_res_add(without, t.capacity[r], &id), 0);
        }
        dflow_t d[DMAX_FLOWS] = {0};
        int64_t now = 0;
        for (int op = 0; op < 80; op++) {
            double u = gsl_rng_uniform(rng);
            int i = (int)gsl_rng_uniform_int(rng, DMAX_FLOWS);
            if (u < 0.3) {
                /* Run to the next completion. */
                int64_t next = fluid_next_ps(with);
                cr_assert_eq(next, fluid_next_ps(without));
                if (next == SIM_TIME_NEVER) continue;
                now = next > now ? next : now;
                collect_both(with, without, d, now);
            } else if (u < 0.4) {
                int r = (int)gsl_rng_uniform_int(rng, (unsigned long)local);
                double c = 1 + 9 * gsl_rng_uniform(rng);
                cr_assert_eq(fluid_res_set_capacity(with, r, c, now), 0);
                cr_assert_eq(fluid_res_set_capacity(without, r, c, now), 0);
            } else if (d[i].live) {
                cr_assert_eq(fluid_flow_remove(with, d[i].id, now), 0);
                cr_assert_eq(fluid_flow_remove(without, d[i].id2, now), 0);
                d[i].live = 0;
            } else {
                box_flow(rng, &t, &d[i]);
                d[i].rem = 1 + 99 * gsl_rng_uniform(rng);
                add_dflow(with, now, &d[i], d[i].ref.n_uses, &d[i].id);
                add_dflow(without, now, &d[i], d[i].n_local, &d[i].id2);
                d[i].live = 1;
            }
            for (int k = 0; k < DMAX_FLOWS; k++) {
                if (!d[k].live) continue;
                cr_assert(fluid_flow_rate(with, d[k].id) == fluid_flow_rate(without, d[k].id2), "topology %d flow %d", topo, k);
                cr_assert(fluid_flow_remaining(with, d[k].id, now) == fluid_flow_remaining(without, d[k].id2, now));
                cr_assert_eq(fluid_flow_bottleneck(with, d[k].id), fluid_flow_bottleneck(without, d[k].id2));
            }
            for (int r = 0; r < local; r++) {
                cr_assert(fluid_res_used(with, r) == fluid_res_used(without, r), "topology %d res %d", topo, r);
                cr_assert(fluid_res_busy_ps(with, r, now) == fluid_res_busy_ps(without, r, now));
            }
        }
        fluid_free(with);
        fluid_free(without);
    }
    gsl_rng_free(rng);
}

/* Completion times through the sim API against a naive event loop that re-solves everything with the
 * reference solver at each start or end (in continuous time). The engine rounds each completion up to
 * the picosecond, so times agree to 1e-9 relative plus a few ps per earlier event. */
Test(fluid, differential_completions)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 777);
    for (int scen = 0; scen < 200; scen++) {
        sim_t *s = new_sim();
        int nres = 1 + (int)gsl_rng_uniform_int(rng, 4);
        double capacity[DMAX_RES];
        for (int r = 0; r < nres; r++) {
            char name[8];
            snprintf(name, sizeof name, "r%d", r);
            capacity[r] = 1e6 * (1 + 9 * gsl_rng_uniform(rng));
            add_res(s, name, capacity[r]);
        }
        dflow_t d[DMAX_FLOWS] = {0};
        rec_t rec[DMAX_FLOWS] = {0};
        double charge[DMAX_FLOWS][DMAX_RES + 1] = {{0}}, work[DMAX_FLOWS], standalone[DMAX_FLOWS];
        for (int i = 0; i < RAND_FLOWS; i++) {
            dflow_random(rng, nres, &d[i]);
            d[i].ref.cap_rate *= 1e6;  /* works ≫ SIM_WORK_EPSILON, so no flow ends early */
            d[i].rem = 1e6 * (10 + 100 * gsl_rng_uniform(rng));
            work[i] = d[i].rem;
            sim_flow_t *f = start(s, d[i].rem, d[i].ref.weight, d[i].ref.cap_rate, d[i].ref.n_uses, d[i].res,
                                  d[i].coef, charge[i], &rec[i]);
            standalone[i] = sim_flow_standalone_rate(f);
            d[i].live = 1;
        }
        cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
        /* Naive reference: continuous time, all flows re-solved at each completion. */
        double t = 0, expect[DMAX_FLOWS];
        for (int left = RAND_FLOWS; left > 0;) {
            fluid_ref_flow_t rf[DMAX_FLOWS];
            double rate[DMAX_FLOWS];
            int map[DMAX_FLOWS], n = 0;
            for (int i = 0; i < RAND_FLOWS; i++)
                if (d[i].live) rf[n] = d[i].ref, map[n++] = i;
            cr_assert_eq(fluid_ref_solve((size_t)nres, capacity, (size_t)n, rf, rate), 0);
            double dt = INFINITY;
            for (int k = 0; k < n; k++) dt = fmin(dt, d[map[k]].rem / rate[k]);
            t += dt;
            for (int k = 0; k < n; k++) {
                dflow_t *f = &d[map[k]];
                f->rem -= rate[k] * dt;
                if (f->rem <= 1e-9 * rate[k]) {
                    f->live = 0;
                    expect[map[k]] = t;
                    left--;
                }
            }
        }
        for (int i = 0; i < RAND_FLOWS; i++) {
            double got = (double)rec[i].done_ps / (double)SIM_PS_PER_S;
            cr_assert_eq(rec[i].n_done, 1);
            cr_assert(fabs(got - expect[i]) <= 1e-9 * expect[i] + 50e-12, "scenario %d flow %d: %.15g s vs %.15g s",
                      scen, i, got, expect[i]);
            /* Lost time over all epochs adds up to actual − standalone time, wherever it was charged. */
            double lost = 0;
            for (int r = 0; r <= nres; r++) lost += charge[i][r];
            double want = (double)rec[i].done_ps - work[i] / standalone[i] * SIM_PS_PER_S;
            cr_assert(fabs(lost - want) <= 1e-9 * (double)rec[i].done_ps + 10,
                      "scenario %d flow %d: lost %.15g ps, want %.15g", scen, i, lost, want);
        }
        sim_free(s);
    }
    gsl_rng_free(rng);
}

/* ---- rounding: the loop always terminates -------------------------------------------------- */

/* 10 units at 1e14/s take 1e-13 s = 0.1 ps: rounded up, done at 1 ps. Huge capacity: done at 1 ps.
 * A flow of 1e10 units at 1e-6/s would take 1e16 s, past the end of time: it never completes and
 * sim_run still returns. */
Test(fluid, rounding_terminates)
{
    sim_t *s = new_sim();
    sim_res_t fast = add_res(s, "fast", 1e14), huge = add_res(s, "huge", 1e300), slow = add_res(s, "slow", 1e-6);
    rec_t a = {0}, b = {0}, c = {0}, d = {0};
    start(s, 10, 1, 0, 1, &fast, ONE, NULL, &a);
    start(s, 1e3, 1, 0, 1, &huge, ONE, NULL, &b);
    start(s, 1e10, 1, 0, 1, &slow, ONE, NULL, &c);
    start(s, 1.0000001, 1, 0, 1, &fast, ONE, NULL, &d);
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(a.n_done, 1);
    cr_assert_eq(a.done_ps, 1);
    cr_assert_eq(b.done_ps, 1);
    cr_assert_eq(d.n_done, 1);
    cr_assert_eq(c.n_done, 0);
    cr_assert(sim_events(s) < 10);
    sim_free(s);
}

typedef struct chain {
    sim_res_t r;
    int left;
    double work;
} chain_t;

static void chain_next(sim_t *sim, void *arg, sim_flow_t *flow)
{
    chain_t *c = arg;
    (void)flow;
    if (--c->left <= 0) return;
    sim_flow_spec_t spec = {.work = c->work, .weight = 1, .n_uses = 1, .res = &c->r, .coef = ONE,
                            .done = chain_next, .arg = c};
    err_t e;
    if (sim_flow_start(sim, &spec, NULL, &e)) sim_fail(sim, &e);
}

/* Chains of flows started from done callbacks, below epsilon (done after zero latency) and of a few
 * units on a huge capacity: each completes in finite steps, time advances at most 1 ps per flow. */
Test(fluid, tiny_flow_chains_terminate)
{
    sim_t *s = new_sim();
    sim_res_t r = add_res(s, "r", 1e20);
    chain_t a = {r, 1000, 0.5}, b = {r, 1000, 3};
    chain_next(s, &a, NULL);
    chain_next(s, &b, NULL);
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(a.left, 0);
    cr_assert_eq(b.left, 0);
    cr_assert(sim_now(s) <= 1000);
    sim_free(s);
}
