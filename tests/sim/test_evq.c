/* The event queue against a sort by (time, push order). */
#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <stdint.h>

#include "sim/evq.h"

static void dummy(void) {}

Test(evq, pops_in_time_then_push_order)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 5);
    evq_t *q = evq_new();
    /* Interleaved pushes and pops with many equal times; every pop is the minimum (t, seq) and
     * equal times come out in push order. */
    uint64_t pushed = 0, popped = 0;
    int64_t now = 0;
    int64_t last_t = -1;
    uintptr_t last_id = 0;
    for (int round = 0; round < 200000; round++) {
        if (evq_size(q) < 5 || gsl_rng_uniform(rng) < 0.5) {
            int64_t t = now + (int64_t)gsl_rng_uniform_int(rng, 8);
            cr_assert_eq(evq_push(q, t, dummy, (void *)(uintptr_t)++pushed), 0);
        } else {
            evq_entry_t e;
            cr_assert_eq(evq_pop(q, &e), 1);
            uintptr_t id = (uintptr_t)e.arg;
            cr_assert(e.t_ps > last_t || (e.t_ps == last_t && id > last_id), "order broken at pop %llu",
                      (unsigned long long)popped);
            cr_assert_geq(e.t_ps, now);
            now = last_t = e.t_ps;
            last_id = id;
            popped++;
        }
        /* peek is the next pop's time */
        if (evq_size(q)) cr_assert_geq(evq_peek_ps(q), now);
    }
    evq_entry_t e;
    while (evq_pop(q, &e)) popped++;
    cr_assert_eq(popped, pushed);
    cr_assert_eq(evq_peek_ps(q), INT64_MAX);
    cr_assert_eq(evq_pop(q, &e), 0);
    evq_free(q);
    gsl_rng_free(rng);
}
