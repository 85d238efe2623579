/* The Fathom planner: greedy water-filling is optimal; statistics on the default profile. */
#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>

#include "kernels/ref/kref.h"
#include "models/fathom.h"

/* Smallest residual over every allocation of n channels × 0..max bits with Σ ≤ budget. */
static double brute(const double *w, int n, int budget, int max_bits)
{
    uint8_t bits[8] = {0};
    double best = INFINITY;
    int total = 1;
    for (int j = 0; j < n; j++) total *= max_bits + 1;
    for (int code = 0; code < total; code++) {
        int c = code, sum = 0;
        for (int j = 0; j < n; j++) {
            bits[j] = (uint8_t)(c % (max_bits + 1));
            c /= max_bits + 1;
            sum += bits[j];
        }
        if (sum > budget) continue;
        double r = fathom_residual(w, bits, n);
        if (r < best) best = r;
    }
    return best;
}

Test(fathom, greedy_matches_brute_force)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7);
    err_t e;
    for (int trial = 0; trial < 300; trial++) {
        int n = 2 + trial % 5;  /* 2..6 channels */
        double w[8];
        for (int j = 0; j < n; j++) {
            double z = gsl_ran_gaussian(rng, 1.0);
            w[j] = z * z * exp(gsl_ran_gaussian(rng, 1.5));
        }
        if (trial % 7 == 0) w[1] = w[0]; /* ties */
        int budget = (int)gsl_rng_uniform_int(rng, (unsigned long)(4 * n + 2));
        uint8_t bits[8];
        cr_assert_eq(fathom_allocate(w, n, budget, 4, bits, &e), 0, "%s", e.msg);
        int sum = 0;
        for (int j = 0; j < n; j++) {
            cr_assert(bits[j] <= 4);
            sum += bits[j];
        }
        cr_assert(sum <= budget);
        double g = fathom_residual(w, bits, n), b = brute(w, n, budget, 4);
        cr_assert(g <= b * (1 + 1e-12) + 1e-300, "trial %d: greedy %.17g > optimum %.17g", trial, g, b);
    }
    gsl_rng_free(rng);
}

Test(fathom, rejects_bad_input)
{
    err_t e;
    double w[2] = {1, -1};
    uint8_t b[2];
    cr_expect_eq(fathom_allocate(w, 2, 3, 4, b, &e), ERR_INVAL);
    w[1] = NAN;
    cr_expect_eq(fathom_allocate(w, 2, 3, 4, b, &e), ERR_INVAL);
}

Test(fathom, default_profile_48_plane_bits_touch_30_to_34_channels)
{
    double s2[128];
    err_t e;
    cr_assert_eq(fathom_profile_default(128, s2, &e), 0);
    fathom_stats_t st;
    /* plans shared by a KV head's 4 query heads (Qwen3-8B's group) */
    cr_assert_eq(fathom_stats(s2, 128, 4, 48, 4000, 42, &st, &e), 0, "%s", e.msg);
    cr_expect(st.mean_active >= 30 && st.mean_active <= 34, "mean active %g", st.mean_active);
    /* their scales add about 8 bits: the "56-bit" read */
    cr_expect(fabs(st.mean_read_bits - 56) < 1.0, "reads %g bits", st.mean_read_bits);
    double prev = 0, prev_res = 1;
    int budgets[] = {8, 16, 32, 48, 64, 96, 128, 256};
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(fathom_stats(s2, 128, 4, budgets[i], 1000, 42, &st, &e), 0);
        cr_expect(st.mean_active > prev, "active %g at %d after %g", st.mean_active, budgets[i], prev);
        cr_expect(st.mean_rel_residual < prev_res);
        prev = st.mean_active;
        prev_res = st.mean_rel_residual;
    }
}

/* The plane budget is the largest whose mean reads meet the method's: one more plane bit reads past it. */
Test(fathom, plane_budget_meets_method_budget)
{
    double s2[128];
    err_t e;
    cr_assert_eq(fathom_profile_default(128, s2, &e), 0);
    fathom_stats_t st, next;
    double budgets[] = {56, 136};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(fathom_plane_budget(s2, 128, 4, budgets[i], 500, 1, &st, &e), 0, "%s", e.msg);
        cr_expect(st.mean_read_bits <= budgets[i], "%g", st.mean_read_bits);
        cr_assert_eq(fathom_stats(s2, 128, 4, st.plane_bits + 1, 500, 1, &next, &e), 0);
        cr_expect(next.mean_read_bits > budgets[i], "%d plane bits read %g", st.plane_bits + 1, next.mean_read_bits);
    }
    cr_expect_eq(fathom_plane_budget(s2, 128, 4, 0.5, 100, 1, &st, &e), ERR_RANGE);
}

/* A shared plan weighs channel j by σ_j²·Σ_g q_gj²: the statistics against the test's own draws
 * (kbench's hashed normals) of 4 query heads a plan, and against what kbench's plan measured. */
Test(fathom, shared_plans_add_the_group_weights)
{
    double s2[128], w[128];
    uint8_t bits[128];
    err_t e;
    for (int j = 0; j < 128; j++) s2[j] = (double)kref_key_sigma(j) * kref_key_sigma(j);
    fathom_stats_t g4, g1;
    cr_assert_eq(fathom_stats(s2, 128, 4, 48, 4000, 7, &g4, &e), 0, "%s", e.msg);
    cr_assert_eq(fathom_stats(s2, 128, 1, 48, 4000, 7, &g1, &e), 0, "%s", e.msg);
    double act = 0;
    for (int q = 0; q < 4000; q++) {
        for (int j = 0; j < 128; j++) {
            w[j] = 0;
            for (int g = 0; g < 4; g++) {
                double z = kref_normal(1000 + (uint64_t)q, (uint64_t)(g * 128 + j));
                w[j] += z * z * s2[j];
            }
        }
        cr_assert_eq(fathom_allocate(w, 128, 48, 4, bits, &e), 0);
        for (int j = 0; j < 128; j++) act += bits[j] > 0;
    }
    act /= 4000;
    /* Monte Carlo: the active count's sd is ~2.5, so two means of 4000 plans agree to ~0.1 */
    cr_expect(fabs(g4.mean_active - act) < 0.3, "group 4: %g active channels, the test's draws %g", g4.mean_active, act);
    cr_expect(g4.mean_active - g1.mean_active > 1.5, "one query %g, four %g", g1.mean_active, g4.mean_active);
    /* kbench's own plan of its 8 KV heads' groups issued 281 copies, one per active (head, channel):
     * 35.1 a head (validation/data/h200/kernels.csv, index_fetch ce2d) */
    cr_expect(fabs(g4.mean_active - 281.0 / 8) < 1.5, "%g active channels", g4.mean_active);
}

Test(fathom, same_seed_same_statistics)
{
    double s2[128];
    err_t e;
    fathom_profile_default(128, s2, &e);
    fathom_stats_t a, b;
    fathom_stats(s2, 128, 4, 48, 300, 9, &a, &e);
    fathom_stats(s2, 128, 4, 48, 300, 9, &b, &e);
    cr_expect_eq(a.mean_active, b.mean_active);
    cr_expect_eq(a.mean_rel_residual, b.mean_rel_residual);
}
