/* The sim API: argument checking, event order, run control, memory pools, re-entrant callbacks and
 * determinism. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/selftest.h"
#include "sim/sim.h"

static sim_t *new_sim(void)
{
    sim_t *s = NULL;
    cr_assert_eq(sim_new(&s, NULL), 0);
    return s;
}

static void nop(sim_t *sim, void *arg) { (void)sim, (void)arg; }

Test(api, bad_input_is_rejected)
{
    sim_t *s = new_sim();
    err_t e;
    sim_res_t r, r2;
    cr_assert_eq(sim_res_add(s, "r", 0, "B/s", &r, &e), ERR_INVAL);
    cr_assert_eq(sim_res_add(s, "r", -5, "B/s", &r, &e), ERR_INVAL);
    cr_assert_eq(sim_res_add(s, "r", NAN, "B/s", &r, &e), ERR_INVAL);
    cr_assert_eq(sim_res_add(s, "r", INFINITY, "B/s", &r, &e), ERR_INVAL);
    cr_assert_eq(sim_res_add(s, "", 1, "B/s", &r, &e), ERR_INVAL);
    cr_assert_eq(sim_res_add(s, "r", 1, "B/s", &r, &e), 0);
    cr_assert_eq(sim_res_add(s, "r", 1, "B/s", &r2, &e), ERR_INVAL, "duplicate name");
    cr_assert_eq(sim_res_add(s, "r2", 1, "B/s", &r2, &e), 0);
    cr_assert_eq(sim_res_count(s), 2);
    cr_assert_eq(sim_res_find(s, "r2"), r2);
    cr_assert_eq(sim_res_find(s, "nope"), -1);
    cr_assert_eq(sim_res_set_capacity(s, r, 0, &e), ERR_INVAL);
    cr_assert_eq(sim_res_set_capacity(s, r, NAN, &e), ERR_INVAL);
    cr_assert_eq(sim_res_set_capacity(s, 7, 1, &e), ERR_INVAL);

    double one[2] = {1, 1}, neg = -1;
    sim_res_t dup[2] = {r, r}, unk = 9;
    sim_flow_spec_t ok = {.work = 10, .weight = 1, .n_uses = 1, .res = &r, .coef = one};
    sim_flow_spec_t b;
    sim_flow_t *f = NULL;
    b = ok, b.work = -1;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL);
    b = ok, b.work = NAN;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL);
    b = ok, b.weight = 0;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL);
    b = ok, b.cap_rate = -1;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL);
    b = ok, b.latency_ps = -1;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL);
    b = ok, b.n_uses = 0;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL, "no resource and no cap");
    b = ok, b.n_uses = 2, b.res = dup;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL, "duplicate resource");
    cr_assert(strstr(e.msg, "twice"));
    b = ok, b.res = &unk;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL);
    b = ok, b.coef = &neg;
    cr_assert_eq(sim_flow_start(s, &b, &f, &e), ERR_INVAL);
    cr_assert_eq(sim_flow_start(s, NULL, &f, &e), ERR_INVAL);
    cr_assert_eq(sim_flow_start(s, &ok, &f, &e), 0);

    cr_assert_eq(sim_at(s, 5, NULL, NULL, &e), ERR_INVAL);
    cr_assert_eq(sim_run(s, 100, &e), 0);
    cr_assert_eq(sim_at(s, 50, nop, NULL, &e), ERR_INVAL, "t < now");
    cr_assert_eq(sim_now(s), 100);

    sim_pool_t p;
    cr_assert_eq(sim_pool_add(s, "hbm", 0, &p, &e), ERR_INVAL);
    cr_assert_eq(sim_pool_add(s, "hbm", 100, &p, &e), 0);
    cr_assert_eq(sim_pool_add(s, "hbm", 100, &p, &e), ERR_INVAL);
    cr_assert_eq(sim_pool_alloc(s, p, -1, &e), ERR_INVAL);
    cr_assert_eq(sim_pool_alloc(s, 5, 1, &e), ERR_INVAL);
    sim_free(s);
}

Test(api, pools_enforce_capacity)
{
    sim_t *s = new_sim();
    sim_pool_t p;
    err_t e;
    cr_assert_eq(sim_pool_add(s, "hbm", 100, &p, NULL), 0);
    cr_assert_eq(sim_pool_find(s, "hbm"), p);
    cr_assert_eq(sim_pool_alloc(s, p, 60, &e), 0);
    cr_assert_eq(sim_pool_alloc(s, p, 50, &e), ERR_CAPACITY);
    cr_assert(strstr(e.msg, "hbm"), "%s", e.msg);
    cr_assert_eq(sim_pool_used(s, p), 60, "nothing taken on error");
    cr_assert_eq(sim_pool_alloc(s, p, 40, &e), 0);
    sim_pool_release(s, p, 70);
    cr_assert_eq(sim_pool_used(s, p), 30);
    cr_assert_eq(sim_pool_peak(s, p), 100);
    sim_pool_release(s, p, 1000);
    cr_assert_eq(sim_pool_used(s, p), 0);
    cr_assert_eq(sim_pool_count(s), 1);
    cr_assert_str_eq(sim_pool_name(s, p), "hbm");
    sim_free(s);
}

typedef struct order {
    int seen[16], n;
    sim_t *sim;
} order_t;

typedef struct tag {
    order_t *o;
    int id;
} tag_t;

static void record(sim_t *sim, void *arg)
{
    tag_t *t = arg;
    t->o->seen[t->o->n++] = t->id;
    if (t->id == 99) sim_stop(sim);
    if (t->id == 98) {
        err_t e;
        err_set(&e, ERR_RANGE, "callback failed");
        sim_fail(sim, &e);
        err_set(&e, ERR_IO, "second failure loses");
        sim_fail(sim, &e);
    }
}

Test(api, events_order_stop_fail_until)
{
    sim_t *s = new_sim();
    order_t o = {0};
    tag_t t[6] = {{&o, 0}, {&o, 1}, {&o, 2}, {&o, 3}, {&o, 99}, {&o, 98}};
    /* Equal times run in scheduling order; earlier times first. */
    cr_assert_eq(sim_at(s, 20, record, &t[0], NULL), 0);
    cr_assert_eq(sim_at(s, 10, record, &t[1], NULL), 0);
    cr_assert_eq(sim_at(s, 20, record, &t[2], NULL), 0);
    cr_assert_eq(sim_at(s, 10, record, &t[3], NULL), 0);
    cr_assert_eq(sim_run(s, 15, NULL), 0);
    cr_assert_eq(o.n, 2);
    cr_assert_eq(sim_now(s), 15, "time ends at until");
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(o.n, 4);
    int want[4] = {1, 3, 0, 2};
    for (int i = 0; i < 4; i++) cr_assert_eq(o.seen[i], want[i]);
    cr_assert_eq(sim_now(s), 20, "time ends at the last event");
    cr_assert_eq(sim_events(s), 4);
    /* sim_stop returns after the current event; sim_fail returns the first error. */
    cr_assert_eq(sim_at(s, 30, record, &t[4], NULL), 0);
    cr_assert_eq(sim_at(s, 30, record, &t[0], NULL), 0);
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(o.n, 5);
    cr_assert_eq(sim_at(s, 40, record, &t[5], NULL), 0);
    cr_assert_eq(sim_at(s, 40, record, &t[1], NULL), 0);
    err_t e;
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, &e), ERR_RANGE);
    cr_assert_str_eq(e.msg, "callback failed");
    sim_free(s);
}

/* ---- re-entrancy: done callbacks start flows, schedule events and change capacities -------- */

typedef struct reent {
    sim_res_t r;
    int done, started;
    sim_ps_t last_ps;
} reent_t;

static void re_done(sim_t *sim, void *arg, sim_flow_t *flow);

static void re_start(sim_t *sim, reent_t *x, double work, sim_ps_t latency)
{
    double one = 1;
    sim_flow_spec_t spec = {.work = work, .weight = 1, .latency_ps = latency, .n_uses = 1, .res = &x->r,
                            .coef = &one, .done = re_done, .arg = x};
    err_t e;
    if (sim_flow_start(sim, &spec, NULL, &e)) sim_fail(sim, &e);
    x->started++;
}

static void re_event(sim_t *sim, void *arg)
{
    reent_t *x = arg;
    err_t e;
    if (sim_res_set_capacity(sim, x->r, sim_res_capacity(sim, x->r) * 2, &e)) sim_fail(sim, &e);
}

static void re_done(sim_t *sim, void *arg, sim_flow_t *flow)
{
    reent_t *x = arg;
    cr_assert_eq(sim_flow_rate(flow), 0);
    x->done++;
    x->last_ps = sim_now(sim);
    if (x->started < 10) {
        re_start(sim, x, 100, 0);
        re_start(sim, x, 0, 5);
        err_t e;
        if (sim_at(sim, sim_now(sim), re_event, x, &e)) sim_fail(sim, &e);
    }
}

/* Capacity 100, 2 units each... the first flow (100 units) takes 1 s; each done starts a 100-unit flow
 * and an empty flow (done after 5 ps), and doubles the capacity: chains of 1 s, 0.5 s, 0.25 s... */
Test(api, done_callbacks_may_start_flows)
{
    sim_t *s = new_sim();
    reent_t x = {0};
    cr_assert_eq(sim_res_add(s, "r", 100, "B/s", &x.r, NULL), 0);
    re_start(s, &x, 100, 0);
    cr_assert_eq(sim_run(s, SIM_TIME_NEVER, NULL), 0);
    cr_assert_eq(x.done, x.started);
    cr_assert_eq(x.started, 11);
    cr_assert_eq(sim_res_capacity(s, x.r), 100 * 32);
    sim_free(s);
}

/* ---- determinism --------------------------------------------------------------------------- */

static char *trace(unsigned long seed, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    err_t e;
    cr_assert_eq(selftest_trace(f, seed, &e), 0, "%s", e.msg);
    fclose(f);
    return buf;
}

Test(api, same_seed_same_trace)
{
    size_t n1, n2, n3;
    char *a = trace(7, &n1), *b = trace(7, &n2), *c = trace(8, &n3);
    cr_assert_gt(n1, 1000);
    cr_assert_eq(n1, n2);
    cr_assert(!memcmp(a, b, n1), "two runs of one seed differ");
    cr_assert(n1 != n3 || memcmp(a, c, n1), "two seeds gave the same trace");
    /* Every flow completed: as many "flow" lines as flows started. */
    const char *end = strstr(a, "end ");
    cr_assert(end);
    int flows = atoi(strstr(end, "flows ") + 6), lines = 0;
    for (const char *p = a; (p = strstr(p, " flow ")); p++) lines++;
    cr_assert_eq(lines, flows);
    free(a);
    free(b);
    free(c);
}

/* Seconds to engine time: exact where the clock holds it, refused past INT64_MAX ps (106.7 days),
 * saturating where "never" is the meaning. */
Test(api, seconds_convert_within_what_the_clock_holds)
{
    sim_ps_t t = -1;
    cr_assert(sim_ps_of_s(9.2e6, SIM_ROUND_UP, &t));
    cr_assert_eq(t, 9200000000000000000LL);
    cr_assert(sim_ps_of_s(1.5e-12, SIM_ROUND_UP, &t));
    cr_assert_eq(t, 2);
    cr_assert(sim_ps_of_s(1.5e-12, SIM_ROUND_DOWN, &t));
    cr_assert_eq(t, 1);
    t = 7;
    cr_assert_not(sim_ps_of_s(1e7, SIM_ROUND_DOWN, &t), "1e7 s is 1e19 ps, past INT64_MAX");
    cr_assert_not(sim_ps_of_s(SIM_MAX_S, SIM_ROUND_DOWN, &t), "INT64_MAX rounds to 2^63 as a double");
    cr_assert_not(sim_ps_of_s(-1e7, SIM_ROUND_DOWN, &t));
    cr_assert_not(sim_ps_of_s(NAN, SIM_ROUND_DOWN, &t));
    cr_assert_not(sim_ps_of_s(INFINITY, SIM_ROUND_UP, &t));
    cr_assert_eq(t, 7, "a refused conversion leaves *out alone");
    cr_assert_eq(sim_ps_or_never(3.2e9), SIM_TIME_NEVER, "100 years");
    cr_assert_eq(sim_ps_or_never(2.0), 2 * SIM_PS_PER_S);
    cr_assert_eq(sim_ps_add(SIM_TIME_NEVER - 5, 5), SIM_TIME_NEVER);
    cr_assert_eq(sim_ps_add(SIM_TIME_NEVER - 5, 6), SIM_TIME_NEVER, "no wrap to negative");
    cr_assert_eq(sim_ps_add(5, SIM_TIME_NEVER), SIM_TIME_NEVER);
    cr_assert_eq(sim_ps_add(5, 6), 11);
}
