/* Tests of the water-filling and SparQ planners (wfplan.h). */
#include <criterion/criterion.h>
#include "../../kernels/ref/wfplan.h"

static double objective(const float *e, const uint8_t *depth, int nch)
{
    double s = 0.0;
    for (int j = 0; j < nch; j++)
        s += ldexp((double)e[j], -2 * depth[j]);
    return s;
}

/* Smallest remaining error over every allocation with sum of depths == budget. */
static double brute_force(const float *e, int nch, int budget)
{
    int total = 1;
    for (int j = 0; j < nch; j++)
        total *= 5;
    double best = 1e300;
    for (int code = 0; code < total; code++) {
        uint8_t d[8];
        int c = code, sum = 0;
        for (int j = 0; j < nch; j++) {
            d[j] = (uint8_t)(c % 5);
            c /= 5;
            sum += d[j];
        }
        if (sum == budget) {
            double o = objective(e, d, nch);
            best = o < best ? o : best;
        }
    }
    return best;
}

Test(wfplan, greedy_is_exact_against_brute_force)
{
    for (int trial = 0; trial < 200; trial++) {
        int nch = 2 + trial % 5;                       /* 2..6 channels */
        float e[8];
        for (int j = 0; j < nch; j++) {
            float z = kref_normal(20 + trial, j);
            e[j] = expf(3.0f * z);                     /* wide spread of gains */
        }
        if (trial % 7 == 0)
            e[0] = e[1];                               /* ties */
        for (int budget = 0; budget <= 4 * nch; budget++) {
            uint8_t d[8];
            kref_wf_plan(e, nch, budget, 4, d);
            int sum = 0;
            for (int j = 0; j < nch; j++) {
                cr_assert_leq(d[j], 4);
                sum += d[j];
            }
            cr_assert_eq(sum, budget);
            double got = objective(e, d, nch), want = brute_force(e, nch, budget);
            cr_assert_leq(got, want * (1.0 + 1e-9), "trial %d budget %d: %g vs %g", trial,
                          budget, got, want);
        }
    }
}

Test(wfplan, larger_gain_never_gets_fewer_bits)
{
    float e[KREF_D];
    for (int j = 0; j < KREF_D; j++)
        e[j] = expf(2.0f * kref_normal(31, j));
    uint8_t d[KREF_D];
    kref_wf_plan(e, KREF_D, 48, 4, d);
    for (int a = 0; a < KREF_D; a++)
        for (int b = 0; b < KREF_D; b++)
            if (e[a] > e[b])
                cr_assert_geq(d[a], d[b]);
}

Test(wfplan, sparq_takes_top_r_channels_at_full_depth)
{
    float e[KREF_D];
    for (int j = 0; j < KREF_D; j++)
        e[j] = kref_unif(41, j);
    uint8_t d[KREF_D];
    int r = 16;
    kref_wf_plan(e, KREF_D, 4 * r, 1, d);
    int chosen = 0;
    float min_in = 1e30f, max_out = -1.0f;
    for (int j = 0; j < KREF_D; j++) {
        cr_assert(d[j] == 0 || d[j] == 4);
        if (d[j]) {
            chosen++;
            min_in = fminf(min_in, e[j]);
        } else {
            max_out = fmaxf(max_out, e[j]);
        }
    }
    cr_assert_eq(chosen, r);
    cr_assert_gt(min_in, max_out);
}

Test(wfplan, gains_weight_query_by_key_variance)
{
    float q[2 * KREF_D], s2[KREF_D], e[KREF_D];
    for (int j = 0; j < KREF_D; j++) {
        q[j] = kref_normal(50, j);
        q[KREF_D + j] = kref_normal(51, j);
        s2[j] = kref_key_sigma(j) * kref_key_sigma(j);
    }
    kref_wf_gains(q, 2, s2, e);
    for (int j = 0; j < KREF_D; j++) {
        double want = ((double)q[j] * q[j] + (double)q[KREF_D + j] * q[KREF_D + j]) * s2[j];
        cr_assert_float_eq(e[j], want, 1e-5 * want);
    }
}
