/* Predicted-vs-measured statistics: error signs, pooled medians and maxima, failed cases. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "validation/compare.h"
#include "validation/vreport.h"

static kbrow_t mk(double p50, double p99, double per_s)
{
    kbrow_t r;
    memset(&r, 0, sizeof r);
    r.file = "x.csv";
    r.op_name = "layer_step";
    r.t_med_us = p50;
    r.t_p99_us = p99;
    r.t_p10_us = r.t_p90_us = NAN;
    r.per_s = per_s;
    return r;
}

Test(compare, errors_and_group_summaries)
{
    cmp_t *c = NULL;
    err_t e;
    cr_assert_eq(cmp_new(&c, &e), 0);
    kbrow_t a = mk(100, 200, NAN), b = mk(100, 100, 10), d = mk(50, 60, NAN);
    cmp_pred_t pa = {110, 190, NAN}, pb = {97, 100, 12};
    cr_assert_eq(cmp_add(c, "step", &a, &pa, NULL, "", "s", &e), 0);
    cr_assert_eq(cmp_add(c, "step", &b, &pb, NULL, "x\n", "s", &e), 0);
    cr_assert_eq(cmp_add(c, "other", &d, NULL, "boom", NULL, "s", &e), 0);
    const cmp_case_t *ca = cmp_case_at(c, 0);
    cr_assert_float_eq(ca->err_p50_pct, 10, 1e-9);
    cr_assert_float_eq(ca->err_p99_pct, -5, 1e-9);
    cr_assert(isnan(ca->err_tput_pct));
    cr_assert_eq(cmp_n_groups(c), 2);
    const cmp_group_t *g = cmp_group_at(c, 0);
    cr_assert_str_eq(g->name, "step");
    /* pooled |errors|: 10, 5, 3, 0, 20 → median 5, max 20 */
    cr_assert_eq(g->all.n, 5);
    cr_assert_float_eq(g->all.median_abs_err_pct, 5, 1e-9);
    cr_assert_float_eq(g->all.max_abs_err_pct, 20, 1e-9);
    cr_assert_float_eq(g->p50.median_abs_err_pct, 6.5, 1e-9);
    cr_assert_eq(g->n_flagged, 0);   /* flags alone flag nothing: clamping decides */
    /* clamped, case b moves 5% in p50 (flagged), case a 0.5% in p99 (not) */
    cmp_pred_t qb = {pb.p50_us * 1.05, 100, 12}, qa = {110, 190 * 1.005, NAN};
    cr_assert_eq(cmp_set_clamp(c, 1, "x,y", &qb, "x", &e), 0);
    cr_assert_eq(cmp_set_clamp(c, 0, "y", &qa, "", &e), 0);
    cr_assert(cmp_case_at(c, 1)->flagged);
    cr_assert_float_eq(cmp_case_at(c, 1)->clamp_shift_pct, 5, 1e-9);
    cr_assert_str_eq(cmp_case_at(c, 1)->flagged_by, "x");
    cr_assert_not(cmp_case_at(c, 0)->flagged);
    cr_assert_float_eq(cmp_case_at(c, 0)->clamp_shift_pct, 0.5, 1e-9);
    cr_assert_str_eq(cmp_case_at(c, 0)->flagged_by, "");
    g = cmp_group_at(c, 0);
    cr_assert_eq(g->n_flagged, 1);
    cr_assert_neq(cmp_set_clamp(c, 2, "x", &qb, NULL, &e), 0);   /* case 2 has no prediction */
    g = cmp_group_at(c, 1);
    cr_assert_eq(g->n_failed, 1);
    cr_assert(isnan(g->all.median_abs_err_pct));
    char why[256];
    cr_assert_not(cmp_within(c, 5, 15, why, sizeof why));
    cr_assert(strstr(why, "step") && strstr(why, "max 20.00%"), "%s", why);
    cmp_free(c);
}

/* The text report's breakdown by op: the signed median keeps the direction the model errs in. */
Test(compare, text_report_breaks_errors_down_by_op)
{
    cmp_t *c = NULL;
    err_t e;
    cr_assert_eq(cmp_new(&c, &e), 0);
    kbrow_t r[3] = {mk(100, 100, NAN), mk(100, 100, NAN), mk(100, 100, NAN)};
    for (int i = 0; i < 3; i++) r[i].policy = "fetch:sm";
    r[2].op_name = "scan";
    cmp_pred_t p[3] = {{90, 100, NAN}, {70, 100, NAN}, {104, 100, NAN}};
    for (int i = 0; i < 3; i++) cr_assert_eq(cmp_add(c, "step", &r[i], &p[i], NULL, "", "s", &e), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    vreport_info_t info = {"d", "h", "c", 0, 0, NULL, NAN};
    vreport_text(fp, c, &info);
    fclose(fp);
    /* layer_step: errors -10 and -30 → median -20, |median| 20, max 30; scan: +4 */
    cr_assert(strstr(buf, "layer_step     fetch:sm                    2        -20.0           20.0        30.0"), "%s", buf);
    cr_assert(strstr(buf, "scan           fetch:sm                    1         +4.0            4.0         4.0"), "%s", buf);
    free(buf);
    cmp_free(c);
}

/* Issue 31: the groups that extrapolate in context (context, whole*) report their errors by the
 * case's context over the fit set's largest, every compared value of the cases pooled; other groups
 * and unknown fit contexts give no such table. */
Test(compare, extrapolating_groups_by_context_ratio)
{
    cmp_t *c = NULL;
    err_t e;
    cr_assert_eq(cmp_new(&c, &e), 0);
    kbrow_t r[4] = {mk(100, 100, 10), mk(100, 200, NAN), mk(100, 100, NAN), mk(100, 100, NAN)};
    r[0].n_tokens = r[1].n_tokens = 524288;
    r[2].n_tokens = 32768;
    r[3].n_tokens = 524288;
    for (int i = 0; i < 4; i++) r[i].policy = "streams:1";
    cmp_pred_t p[4] = {{110, 97, 11}, {99, 150, NAN}, {102, 100, NAN}, {150, 150, NAN}};
    /* whole_dev at 512K: |errors| 10, 3, 10; 1, 25 → median 10, max 25; at 32K: 2, 0 */
    for (int i = 0; i < 3; i++) cr_assert_eq(cmp_add(c, "whole_dev", &r[i], &p[i], NULL, "", "s", &e), 0);
    cr_assert_eq(cmp_add(c, "step", &r[3], &p[3], NULL, "", "s", &e), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    vreport_info_t info = {"d", "h", "c", 0, 0, NULL, 262144};
    vreport_text(fp, c, &info);
    info.fit_max_n_tokens = NAN;
    vreport_text(fp, c, &info);
    fclose(fp);
    cr_assert(strstr(buf, "whole_dev                 524288            2      2          10.00       25.00"), "%s", buf);
    cr_assert(strstr(buf, "whole_dev                  32768        0.125      1           1.00        2.00"), "%s", buf);
    cr_assert_null(strstr(buf, "step                      524288"), "%s", buf);
    const char *t = strstr(buf, "by context");
    cr_assert(t && !strstr(t + 1, "by context"), "one table, from the first report only: %s", buf);
    free(buf);
    cmp_free(c);
}

/* The run-to-run floor: a compared value counts beyond it when its |error| is larger; values with
 * no floor (NAN) or no comparison take no part; a failed case none. */
Test(compare, errors_beyond_their_run_to_run_floor)
{
    cmp_t *c = NULL;
    err_t e;
    cr_assert_eq(cmp_new(&c, &e), 0);
    kbrow_t a = mk(100, 200, NAN), b = mk(100, 100, 10), d = mk(50, 60, NAN);
    cmp_pred_t pa = {110, 190, NAN}, pb = {97, 100, 12};   /* errors: +10, -5; -3, 0, +20 */
    cr_assert_eq(cmp_add(c, "step", &a, &pa, NULL, "", "s", &e), 0);
    cr_assert_eq(cmp_add(c, "step", &b, &pb, NULL, "", "s", &e), 0);
    cr_assert_eq(cmp_add(c, "step", &d, NULL, "boom", NULL, "s", &e), 0);
    cr_assert_eq(cmp_group_at(c, 0)->n_floored, 0);
    cr_assert(isnan(cmp_case_at(c, 0)->floor_p50_pct));
    /* other runs: a's p50 96 or 104 (floor 4), p99 188 (6), per_s measured but tput not compared; b's
     * p50 102 (2), p99 100 (0), no per_s (no tput floor); the failed case's take no part */
    kbrow_t oa1 = mk(96, 200, 5), oa2 = mk(104, 188, 5), ob = mk(102, 100, NAN), od = mk(10, 10, NAN);
    const kbrow_t *for_a[3] = {&oa1, NULL, &oa2}, *for_b[1] = {&ob}, *for_d[1] = {&od};
    /* a: p50 10 > 4 beyond, p99 5 < 6 within; b: p50 3 > 2 beyond, p99 0 = 0 within, tput 20: no floor */
    cr_assert_eq(cmp_set_floor(c, 0, for_a, 3, &e), 0);
    cr_assert_eq(cmp_set_floor(c, 1, for_b, 1, &e), 0);
    cr_assert_eq(cmp_set_floor(c, 2, for_d, 1, &e), 0);
    cr_assert(isnan(cmp_case_at(c, 0)->floor_tput_pct), "a throughput not compared got a floor");
    cr_assert(isnan(cmp_case_at(c, 1)->floor_tput_pct));
    const cmp_group_t *g = cmp_group_at(c, 0);
    cr_assert_eq(g->n_floored, 4);
    cr_assert_eq(g->n_beyond, 2);
    cr_assert_float_eq(cmp_case_at(c, 1)->floor_p50_pct, 2, 1e-12);
    cr_assert_neq(cmp_set_floor(c, 3, for_b, 1, &e), 0, "a floor for a case that is not there");
    cmp_free(c);
}
