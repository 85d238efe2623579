/* The bounded-memory distribution of `trace info`: exact percentiles up to its bound, then within its
 * stated bucket error of the brute-force nearest rank; the peak concurrency's order rule. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace_sketch.h"
#include "traces/trace_stats.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A spread of magnitudes (1e-6 .. 1e9) with zeros and repeats, in a scrambled order. */
static double value_at(size_t i)
{
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
    if (z % 97 == 0) return 0;
    return pow(10.0, (double)(z >> 11) / 9007199254740992.0 * 15.0 - 6.0);
}

static void check(size_t n, bool exact)
{
    trace_sketch_t k = {0};
    err_t e;
    double *all = malloc(n * sizeof *all);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        all[i] = value_at(i);
        sum += all[i];
        cr_assert_eq(trace_sketch_add(&k, all[i], &e), 0);
    }
    qsort(all, n, sizeof *all, cmp_d);
    cr_assert_eq(trace_sketch_exact(&k), exact);
    cr_assert_eq(k.min, all[0]);
    cr_assert_eq(k.max, all[n - 1]);
    cr_assert_float_eq(k.sum, sum, 1e-9 * sum);
    const double ps[] = {0.001, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0};
    for (size_t j = 0; j < sizeof ps / sizeof *ps; j++) {
        size_t r = (size_t)((double)n * ps[j] + 0.999999999);
        double want = all[(r < 1 ? 1 : r) - 1], got = trace_sketch_quantile(&k, ps[j]);
        if (exact) cr_assert_eq(got, want, "p%g: %.17g, exact %.17g", ps[j], got, want);
        else cr_assert_leq(fabs(got - want), want / (2.0 * TRACE_SKETCH_SUB), "p%g: %.17g, exact %.17g", ps[j], got, want);
    }
    trace_sketch_free(&k);
    free(all);
}

Test(sketch, exact_up_to_its_bound) { check(TRACE_SKETCH_EXACT, true); }
Test(sketch, within_the_bucket_error_past_it) { check(4 * TRACE_SKETCH_EXACT + 17, false); }

/* The peak is found in one pass over sessions in arrival order; one out of order is an error. */
Test(sketch, peak_needs_arrival_order)
{
    trace_stats_t *st;
    err_t e;
    cr_assert_eq(trace_stats_new(&st, &e), 0);
    int64_t arr[] = {5000000000, 1000000000};
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++) {
        trace_session_t s;
        trace_session_init(&s);
        s.arrival_ns = arr[i];
        trace_turn_t t = trace_turn_blank();
        t.arrival_ns = arr[i];
        t.input_tokens = t.prefill_tokens = 10;
        t.decode_tokens = 1;
        cr_assert_eq(trace_session_add_turn(&s, &t, &e), 0);
        rc = trace_stats_add(st, &s, &e);
        trace_session_free(&s);
    }
    cr_assert_eq(rc, ERR_INVAL);
    cr_assert(strstr(e.msg, "out of order"), "%s", e.msg);
    trace_stats_free(st);
}
