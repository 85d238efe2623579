/* Histograms: the stated relative error bound against exact sorted percentiles; merging. */
#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>

#include "common/err.h"
#include "sim/hist.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define N 100000

Test(hist, relative_error_bound_and_merge)
{
    static double v[N];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 99);
    hist_t *all = hist_new(), *a = hist_new(), *b = hist_new();
    double sum = 0;
    for (int i = 0; i < N; i++) {
        /* Latency-like: lognormal over ~6 decades, a few zeros. */
        v[i] = i % 997 == 0 ? 0.0 : gsl_ran_lognormal(rng, 10, 3);
        sum += v[i];
        cr_assert_eq(hist_add(all, v[i]), 0);
        cr_assert_eq(hist_add(i % 3 ? a : b, v[i]), 0);
    }
    cr_assert_eq(hist_add(all, NAN), ERR_INVAL);
    cr_assert_eq(hist_merge(a, b), 0);
    qsort(v, N, sizeof *v, cmp_double);
    const double qs[] = {0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1};
    for (size_t k = 0; k < sizeof qs / sizeof *qs; k++) {
        size_t rank = (size_t)ceil(qs[k] * N);
        double exact = v[rank ? rank - 1 : 0];
        double got = hist_quantile(all, qs[k]);
        cr_assert(fabs(got - exact) <= (HIST_REL_ERR + 1e-12) * exact, "q %g: %.17g vs exact %.17g", qs[k], got,
                  exact);
        cr_assert_eq(hist_quantile(a, qs[k]), got, "merged histogram differs at q %g", qs[k]);
    }
    cr_assert_eq(hist_count(all), N);
    cr_assert_eq(hist_count(a), N);
    cr_assert_eq(hist_min(a), v[0]);
    cr_assert_eq(hist_max(a), v[N - 1]);
    cr_assert(fabs(hist_mean(all) - sum / N) <= 1e-12 * sum / N);
    cr_assert(fabs(hist_mean(a) - sum / N) <= 1e-12 * sum / N);
    hist_t *empty = hist_new();
    cr_assert_eq(hist_quantile(empty, 0.5), 0);
    cr_assert_eq(hist_merge(empty, a), 0);
    cr_assert_eq(hist_quantile(empty, 0.99), hist_quantile(all, 0.99));
    hist_free(empty);
    hist_free(all);
    hist_free(a);
    hist_free(b);
    gsl_rng_free(rng);
}

Test(hist, time_weighted_mean)
{
    hist_tw_t tw = {0};
    hist_tw_set(&tw, 10, 1.0);  /* 0 over [0,10), 1 over [10,30), 0.5 over [30,40) */
    hist_tw_set(&tw, 30, 0.5);
    cr_assert_float_eq(hist_tw_mean(&tw, 40), (20 + 5) / 40.0, 1e-15);
    cr_assert_float_eq(hist_tw_integral(&tw, 40), 25, 1e-12);
    cr_assert_eq(hist_tw_mean(&tw, 0), 0);
}
