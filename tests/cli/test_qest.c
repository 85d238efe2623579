/* Tests of the quality estimator (cli/qest.h): its rows from method specs, and its averages over a
 * source against the selection reference run step by step here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/qest.h"

Test(qest, rows_from_specs)
{
    qest_row_t rows[QEST_MAX_ROWS];
    size_t n = 0;
    err_t e;
    cr_assert_eq(qest_add_rows("fathom:48,56.5", rows, &n, &e), 0, "%s", e.msg);
    cr_assert_eq(qest_add_rows("landmark:16", rows, &n, &e), 0, "%s", e.msg);
    cr_assert_eq(qest_add_rows("hashattn", rows, &n, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 4);
    cr_assert(rows[0].kind == KREF_SEL_FATHOM && rows[0].budget_bits == 48 && rows[1].budget_bits == 56.5);
    cr_assert(rows[2].kind == KREF_SEL_LANDMARK && rows[2].page == 16);
    cr_assert(rows[3].kind < 0 && strstr(rows[3].why, "learned"));
    const char *bad[] = {"nosuch", "dense:4", "fathom:", "fathom:4,,8", "fathom:-1", "landmark:8.5", "lsh:3x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(qest_add_rows(bad[i], rows, &n, &e), ERR_INVAL, "'%s' accepted", bad[i]);
        cr_assert(strstr(e.msg, bad[i]), "%s", e.msg);
    }
}

/* Every row's mean over the source's steps is the mean of kref_sel_measure over the same steps. */
Test(qest, averages_the_reference_over_every_step)
{
    kvsynth_params_t p;
    err_t e;
    cr_assert_eq(kvsynth_bind(NULL, &p, &e), 0);
    p.tokens = 256;
    p.layers = 2;
    p.kv_heads = 1;
    p.steps = 3;
    qest_row_t rows[QEST_MAX_ROWS];
    size_t n = 0;
    const char *specs[] = {"exact", "dense", "sparq:68", "lsh:64"};
    for (int i = 0; i < 4; i++) cr_assert_eq(qest_add_rows(specs[i], rows, &n, &e), 0);
    qest_opts_t o = {0, 16, 0, 3};
    qest_source_t src = {&p, NULL, 2};
    qest_summary_t sm;
    cr_assert_eq(qest_run(&src, &o, rows, n, &sm, &e), 0, "%s", e.msg);
    cr_assert(sm.entries == 2 && sm.steps == 6 && sm.k_min == 16 && sm.k_max == 16 && sm.dim == 128);
    double m, se;
    qest_mean_se(&rows[0], &rows[0].recall, &m, &se);
    cr_assert_float_eq(m, 1.0, 1e-12);
    qest_mean_se(&rows[1], &rows[1].attn_error, &m, &se);
    cr_assert_float_eq(m, 0.0, 1e-12);
    /* sparq and lsh by hand */
    int d = 128, G = 4;
    double want_rec[2] = {0}, want_err[2] = {0}, want_entry[2][2] = {{0}};
    float *k = malloc(4 * 256 * d), *v = malloc(4 * 256 * d), *q = malloc(4 * 3 * G * d);
    for (int en = 0; en < 2; en++) {
        cr_assert_eq(kvsynth_head(&p, en, 0, k, q, v, &e), 0);
        for (int i = 0; i < 3 * G * d; i++) q[i] /= sqrtf((float)d);
        kref_sel_keys_t kk;
        cr_assert_eq(kref_sel_keys_init(&kk, k, 256, d, q, 3 * G), 0);
        for (int s = 0; s < 3; s++) {
            kref_sel_truth_t tr;
            cr_assert_eq(kref_sel_truth(&kk, v, q + s * G * d, G, 16, 0, &tr), 0);
            for (int r = 0; r < 2; r++) {
                kref_sel_cfg_t c = {r ? KREF_SEL_LSH : KREF_SEL_SPARQ, 16, r ? 64 : 68, 0, 0, 3};
                uint32_t sel[16];
                size_t nsel;
                kref_sel_metrics_t met;
                cr_assert_eq(kref_sel_select(&kk, q + s * G * d, G, &c, sel, &nsel, NULL), 0);
                cr_assert_eq(kref_sel_measure(&tr, sel, 16, &nsel, &met), 0);
                want_rec[r] += met.recall / 6;
                want_err[r] += met.attn_error / 6;
                want_entry[r][en] += met.attn_error / 3;
            }
            kref_sel_truth_free(&tr);
        }
        kref_sel_keys_free(&kk);
    }
    for (int r = 0; r < 2; r++) {
        qest_mean_se(&rows[2 + r], &rows[2 + r].recall, &m, &se);
        cr_assert_float_eq(m, want_rec[r], 1e-12, "%s recall %g vs %g", rows[2 + r].method, m, want_rec[r]);
        qest_mean_se(&rows[2 + r], &rows[2 + r].attn_error, &m, &se);
        cr_assert_float_eq(m, want_err[r], 1e-12);
        for (int en = 0; en < 2; en++) cr_assert_float_eq(rows[2 + r].entry_error[en], want_entry[r][en], 1e-12);
    }
    cr_assert_float_eq(rows[2].read_bits, 68, 1e-12);
    free(k), free(v), free(q);
    qest_rows_free(rows, n);
}
