/* lsq: the nonlinear solver against closed forms and against the linear one. */
#include <criterion/criterion.h>
#include <math.h>

#include "validation/lsq.h"

/* y = A·exp(−k·x) + b, θ = (A, k, b). */
static double decay(const void *ctx, size_t i, const double *th, double *g)
{
    double x = ((const double *)ctx)[i], ex = exp(-th[1] * x);
    g[0] = ex;
    g[1] = -th[0] * x * ex;
    g[2] = 1;
    return th[0] * ex + th[2];
}

/* Exact data from A = 5, k = 0.3, b = 1: found from (1, 1, 0), residual 0. */
Test(lsq, nonlinear_recovers_an_exact_decay)
{
    double x[12], y[12], g[3], truth[3] = {5, 0.3, 1}, start[3] = {1, 1, 0};
    for (int i = 0; i < 12; i++) {
        x[i] = i;
        y[i] = decay(x, (size_t)i, truth, g);
    }
    lsq_fit_t f;
    err_t e;
    cr_assert_eq(lsq_nlinear("decay", decay, x, y, NULL, 12, 3, start, &f, &e), 0, "%s", e.msg);
    for (int j = 0; j < 3; j++) cr_expect_float_eq(f.coef[j], truth[j], 1e-7, "theta %d = %g", j, f.coef[j]);
    cr_expect_lt(f.chi2, 1e-16);
}

/* y = c0 + c1·x. */
static double line(const void *ctx, size_t i, const double *th, double *g)
{
    g[0] = 1;
    g[1] = ((const double *)ctx)[i];
    return th[0] + th[1] * g[1];
}

/* A model linear in θ: the nonlinear solver lands where weighted linear least squares does, with the
 * same standard errors (both scaled by χ²/(n−p)). */
Test(lsq, nonlinear_matches_linear_on_a_line)
{
    double x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, y[8] = {1.1, 2.9, 5.2, 7.1, 8.8, 11.2, 12.9, 15.1}, w[8], X[16];
    for (int i = 0; i < 8; i++) {
        w[i] = 1.0 / (1 + i);
        X[2 * i] = 1;
        X[2 * i + 1] = x[i];
    }
    lsq_fit_t lin, nl;
    err_t e;
    double start[2] = {0, 0};
    cr_assert_eq(lsq_wlinear("line", X, y, w, 8, 2, &lin, &e), 0, "%s", e.msg);
    cr_assert_eq(lsq_nlinear("line", line, x, y, w, 8, 2, start, &nl, &e), 0, "%s", e.msg);
    for (int j = 0; j < 2; j++) {
        cr_expect_float_eq(nl.coef[j], lin.coef[j], 1e-9, "coef %d", j);
        cr_expect_float_eq(nl.se[j], lin.se[j], 1e-9, "se %d: %g vs %g", j, nl.se[j], lin.se[j]);
    }
    cr_expect_float_eq(nl.chi2, lin.chi2, 1e-12);
}

Test(lsq, nonlinear_rejects_bad_sizes_and_points)
{
    double x[3] = {0, 1, 2}, y[3] = {1, NAN, 3}, start[2] = {0, 0};
    lsq_fit_t f;
    err_t e;
    cr_expect_eq(lsq_nlinear("line", line, x, y, NULL, 3, 2, start, &f, &e), ERR_INVAL);
    y[1] = 2;
    cr_expect_eq(lsq_nlinear("line", line, x, y, NULL, 2, 2, start, &f, &e), ERR_INVAL);
}
