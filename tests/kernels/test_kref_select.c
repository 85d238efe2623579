/* Tests of the selection reference (select.h): against brute force, the
 * planners and quantiser it reuses, and more bits never worse on average. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include "../../kernels/ref/planes.h"
#include "../../kernels/ref/select.h"
#include "../../kernels/ref/wfplan.h"

/* Keys with kref_key's channel profile (first d channels), queries N(0, 1/d)
 * scaled by `sharp`, values N(0, 1). */
static void fill(uint64_t seed, size_t n, int d, int g, float sharp, float *k, float *q, float *v)
{
    for (size_t t = 0; t < n; t++)
        for (int j = 0; j < d; j++) {
            k[t * d + j] = kref_key(seed, t, j);
            v[t * d + j] = kref_normal(seed + 1, t * d + j);
        }
    for (int h = 0; h < g; h++)
        for (int j = 0; j < d; j++)
            q[h * d + j] = sharp * kref_normal(seed + 2, (uint64_t)(h * d + j)) / sqrtf((float)d);
}

/* The metrics by their definitions, head by head, with a sort for the top-k. */
static void brute_metrics(const float *k, const float *v, const float *q, size_t n, int d, int g,
                          int kk, int per_head, const uint32_t *sel, size_t cap, const size_t *nsel,
                          kref_sel_metrics_t *m)
{
    memset(m, 0, sizeof *m);
    for (int h = 0; h < g; h++) {
        double s[64], truth[64], z = 0, kept = 0, o[16] = {0}, os[16] = {0};
        for (size_t t = 0; t < n; t++) {
            s[t] = truth[t] = 0;
            for (int j = 0; j < d; j++)
                s[t] += (double)q[h * d + j] * k[t * d + j];
            for (int h2 = 0; h2 < g; h2++)
                if (per_head ? h2 == h : 1)
                    for (int j = 0; j < d; j++)
                        truth[t] += (double)q[h2 * d + j] * k[t * d + j];
        }
        const uint32_t *S = sel + (per_head ? h * cap : 0);
        size_t ns = nsel[per_head ? h : 0];
        int hit = 0;
        for (size_t t = 0; t < n; t++) {
            int above = 0, chosen = 0;       /* t is in the top-k when fewer than k beat it */
            for (size_t u = 0; u < n; u++)
                above += truth[u] > truth[t];
            for (size_t i = 0; i < ns; i++)
                chosen |= S[i] == t;
            hit += above < kk && chosen;
            double p = exp(s[t]);
            z += p;
            kept += chosen ? p : 0;
            for (int j = 0; j < d; j++) {
                o[j] += p * v[t * d + j];
                os[j] += chosen ? p * v[t * d + j] : 0;
            }
        }
        double num = 0, den = 0;
        for (int j = 0; j < d; j++) {
            num += (os[j] / kept - o[j] / z) * (os[j] / kept - o[j] / z);
            den += (o[j] / z) * (o[j] / z);
        }
        m->recall += (double)hit / kk / g;
        m->kept_mass += kept / z / g;
        m->attn_error += sqrt(num / den) / g;
    }
}

Test(select, metrics_match_brute_force)
{
    enum { N = 60, D = 12, G = 3 };
    float k[N * D], v[N * D], q[G * D];
    const kref_sel_method_t ms[] = {KREF_SEL_EXACT, KREF_SEL_PERTOKEN, KREF_SEL_SPARQ,
                                    KREF_SEL_FATHOM, KREF_SEL_LANDMARK, KREF_SEL_LSH};
    for (int trial = 0; trial < 12; trial++) {
        fill(100 + trial, N, D, G, 3.0f, k, q, v);
        kref_sel_keys_t kk;
        cr_assert_eq(kref_sel_keys_init(&kk, k, N, D, q, G), 0);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            kref_sel_cfg_t c = {ms[mi], 7, ms[mi] == KREF_SEL_LSH ? 16 : 17, 4, trial % 2, 9};
            uint32_t sel[G * N];
            size_t nsel[G];
            size_t cap = kref_sel_cap(&kk, &c);
            cr_assert_eq(kref_sel_select(&kk, q, G, &c, sel, nsel, NULL), 0);
            kref_sel_metrics_t got, want;
            kref_sel_truth_t tr;
            cr_assert_eq(kref_sel_truth(&kk, v, q, G, 7, c.per_head, &tr), 0);
            cr_assert_eq(kref_sel_measure(&tr, sel, cap, nsel, &got), 0);
            kref_sel_truth_free(&tr);
            brute_metrics(k, v, q, N, D, G, 7, c.per_head, sel, cap, nsel, &want);
            cr_assert_float_eq(got.recall, want.recall, 1e-9, "method %d: recall", ms[mi]);
            cr_assert_float_eq(got.kept_mass, want.kept_mass, 1e-9, "method %d: mass", ms[mi]);
            cr_assert_float_eq(got.attn_error, want.attn_error, 1e-9, "method %d: error", ms[mi]);
        }
        kref_sel_keys_free(&kk);
    }
}

Test(select, exact_has_recall_one_and_dense_no_error)
{
    enum { N = 512, D = 64, G = 4 };
    float *k = malloc(sizeof(float) * N * D), *v = malloc(sizeof(float) * N * D), q[G * D];
    uint32_t *sel = malloc(sizeof(uint32_t) * G * N);
    size_t nsel[G];
    fill(7, N, D, G, 4.0f, k, q, v);
    kref_sel_keys_t kk;
    cr_assert_eq(kref_sel_keys_init(&kk, k, N, D, NULL, 0), 0);
    for (int per_head = 0; per_head < 2; per_head++) {
        kref_sel_cfg_t c = {KREF_SEL_EXACT, 32, 0, 0, per_head, 0};
        kref_sel_metrics_t m;
        kref_sel_truth_t tr;
        cr_assert_eq(kref_sel_truth(&kk, v, q, G, 32, per_head, &tr), 0);
        cr_assert_eq(kref_sel_select(&kk, q, G, &c, sel, nsel, NULL), 0);
        cr_assert_eq(kref_sel_measure(&tr, sel, 32, nsel, &m), 0);
        cr_assert_float_eq(m.recall, 1.0, 1e-12);
        cr_assert(m.kept_mass < 1.0 && m.attn_error > 0.0);
        c.method = KREF_SEL_DENSE;
        cr_assert_eq(kref_sel_select(&kk, q, G, &c, sel, nsel, NULL), 0);
        cr_assert_eq(nsel[0], (size_t)N);
        cr_assert_eq(kref_sel_measure(&tr, sel, N, nsel, &m), 0);
        cr_assert_float_eq(m.recall, 1.0, 1e-12);
        cr_assert_float_eq(m.kept_mass, 1.0, 1e-12);
        cr_assert_float_eq(m.attn_error, 0.0, 1e-12);
        kref_sel_truth_free(&tr);
    }
    kref_sel_keys_free(&kk);
    free(k), free(v), free(sel);
}

/* The codes read at every depth are planes.h's index read at that depth. */
Test(select, quantiser_is_the_planes_index)
{
    enum { N = 128 };
    uint16_t *kb = malloc(sizeof(uint16_t) * N * KREF_D);
    float *k = malloc(sizeof(float) * N * KREF_D);
    uint8_t *idx = malloc(kref_chunk_bytes(N));
    for (size_t i = 0; i < (size_t)N * KREF_D; i++) {
        kb[i] = kref_f32_to_bf16(kref_key(3, i / KREF_D, (int)(i % KREF_D)));
        k[i] = kref_bf16_to_f32(kb[i]);
    }
    kref_planes_quantize(kb, N, N, idx);
    kref_sel_keys_t kk;
    cr_assert_eq(kref_sel_keys_init(&kk, k, N, KREF_D, NULL, 0), 0);
    for (size_t t = 0; t < N; t++)
        for (int j = 0; j < KREF_D; j++)
            for (int depth = 0; depth <= 4; depth++)
                cr_assert_eq(kref_sel_read(&kk, t, j, depth), kref_planes_read(idx, N, t, j, depth));
    kref_sel_keys_free(&kk);
    free(kb), free(k), free(idx);
}

/* Fathom's plan is kref_wf_plan at its plane bits, the most whose reads (scales
 * included) fit the budget; SparQ's is floor(B / 4.25) channels at depth 4. */
Test(select, plans_meet_the_budget_exactly)
{
    enum { N = 64, D = KREF_D, G = 4 };
    float *k = malloc(sizeof(float) * N * D), *v = malloc(sizeof(float) * N * D), q[G * D];
    for (int trial = 0; trial < 20; trial++) {
        fill(40 + trial, N, D, G, 1.0f, k, q, v);
        kref_sel_keys_t kk;
        cr_assert_eq(kref_sel_keys_init(&kk, k, N, D, NULL, 0), 0);
        float e[KREF_D];
        kref_wf_gains(q, G, kk.sigma2, e);
        double budget = 5 + trial * 7.3;
        kref_sel_cfg_t c = {KREF_SEL_FATHOM, 8, budget, 0, 0, 0};
        uint8_t depth[KREF_D], want[KREF_D];
        int planes, active, a = 0;
        kref_sel_plan(&kk, q, G, &c, depth, &planes, &active);
        kref_wf_plan(e, D, planes, 4, want);
        for (int j = 0; j < D; j++) {
            cr_assert_eq(depth[j], want[j], "trial %d channel %d", trial, j);
            a += depth[j] > 0;
        }
        cr_assert_eq(a, active);
        cr_assert_leq(planes + 0.25 * active, budget);
        kref_wf_plan(e, D, planes + 1, 4, want);    /* one more plane would not fit */
        a = 0;
        for (int j = 0; j < D; j++)
            a += want[j] > 0;
        cr_assert_gt(planes + 1 + 0.25 * a, budget);
        c.method = KREF_SEL_SPARQ;
        kref_sel_plan(&kk, q, G, &c, depth, &planes, &active);
        int r = (int)(budget / 4.25);
        a = 0;
        for (int j = 0; j < D; j++) {
            cr_assert(depth[j] == 0 || depth[j] == 4);
            a += depth[j] == 4;
        }
        cr_assert_eq(a, r);
        kref_sel_keys_free(&kk);
    }
    free(k), free(v);
}

/* Landmark takes the pages of the largest bounds, and each bound is at least
 * every q.k of its page. */
Test(select, landmark_pages_against_brute_force)
{
    enum { N = 50, D = 8, P = 8 };
    float k[N * D], v[N * D], q[D];
    fill(5, N, D, 1, 2.0f, k, q, v);
    kref_sel_keys_t kk;
    cr_assert_eq(kref_sel_keys_init(&kk, k, N, D, NULL, 0), 0);
    kref_sel_cfg_t c = {KREF_SEL_LANDMARK, 12, 0, P, 0, 0};
    uint32_t sel[N];
    size_t nsel;
    cr_assert_eq(kref_sel_select(&kk, q, 1, &c, sel, &nsel, NULL), 0);
    double bound[7];
    for (int pg = 0; pg < 7; pg++) {
        bound[pg] = 0;
        for (int j = 0; j < D; j++) {
            double lo = HUGE_VAL, hi = -HUGE_VAL;
            for (int t = pg * P; t < (pg + 1) * P && t < N; t++) {
                lo = fmin(lo, k[t * D + j]);
                hi = fmax(hi, k[t * D + j]);
            }
            bound[pg] += fmax(q[j] * lo, q[j] * hi);
        }
        for (int t = pg * P; t < (pg + 1) * P && t < N; t++) {
            double s = 0;
            for (int j = 0; j < D; j++)
                s += (double)q[j] * k[t * D + j];
            cr_assert_leq(s, bound[pg] + 1e-9);
        }
    }
    int first = -1, second = -1;   /* ceil(12 / 8) = 2 pages */
    for (int pg = 0; pg < 7; pg++)
        if (first < 0 || bound[pg] > bound[first]) second = first, first = pg;
        else if (second < 0 || bound[pg] > bound[second]) second = pg;
    size_t want = (size_t)(first == 6 ? 2 : P) + (second == 6 ? 2 : P);
    cr_assert_eq(nsel, want);
    for (size_t i = 0; i < nsel; i++)
        cr_assert((int)sel[i] / P == first || (int)sel[i] / P == second);
    kref_sel_keys_free(&kk);
}

Test(select, bad_configurations)
{
    float k[64 * 8] = {0};
    kref_sel_keys_t kk;
    cr_assert_eq(kref_sel_keys_init(&kk, k, 64, KREF_D + 1, NULL, 0), -2);
    cr_assert_eq(kref_sel_keys_init(&kk, k, 64, 8, NULL, 0), 0);
    uint32_t sel[64];
    size_t nsel;
    float q[8] = {1};
    kref_sel_cfg_t bad[] = {{KREF_SEL_EXACT, 0, 0, 0, 0, 0},       {KREF_SEL_EXACT, 65, 0, 0, 0, 0},
                            {KREF_SEL_PERTOKEN, 4, 4.0, 0, 0, 0},  {KREF_SEL_SPARQ, 4, 8 * 4.25 + 5, 0, 0, 0},
                            {KREF_SEL_FATHOM, 4, 1.0, 0, 0, 0},    {KREF_SEL_LANDMARK, 4, 0, 0, 0, 0},
                            {KREF_SEL_LSH, 4, KREF_SEL_LSH_MAX_BITS + 1, 0, 0, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(kref_sel_select(&kk, q, 1, &bad[i], sel, &nsel, NULL), -2, "case %zu", i);
    kref_sel_keys_free(&kk);
}

/* Mean recall over seeds and queries at each budget; the next budget's mean is
 * never below the last by more than 2.5 standard errors of the difference. */
static void more_bits_never_worse(kref_sel_method_t method, const double *budgets, int nb)
{
    enum { N = 1024, D = KREF_D, G = 4, SEEDS = 6, Q = 4, K = 64 };
    float *k = malloc(sizeof(float) * N * D), *v = malloc(sizeof(float) * N * D), q[G * D];
    uint32_t *sel = malloc(sizeof(uint32_t) * N);
    double rec[8][SEEDS * Q];
    for (int s = 0; s < SEEDS; s++) {
        fill(1000 + s, N, D, G, 8.0f, k, q, v);
        kref_sel_keys_t kk;
        cr_assert_eq(kref_sel_keys_init(&kk, k, N, D, NULL, 0), 0);
        for (int qi = 0; qi < Q; qi++) {
            for (int i = 0; i < G * D; i++)
                q[i] = 8.0f * kref_normal(5000 + s * Q + qi, (uint64_t)i) / sqrtf((float)D);
            kref_sel_truth_t tr;
            cr_assert_eq(kref_sel_truth(&kk, v, q, G, K, 0, &tr), 0);
            for (int b = 0; b < nb; b++) {
                kref_sel_cfg_t c = {method, K, budgets[b], 0, 0, (uint64_t)s};
                size_t nsel;
                kref_sel_metrics_t m;
                cr_assert_eq(kref_sel_select(&kk, q, G, &c, sel, &nsel, NULL), 0);
                cr_assert_eq(kref_sel_measure(&tr, sel, K, &nsel, &m), 0);
                rec[b][s * Q + qi] = m.recall;
            }
            kref_sel_truth_free(&tr);
        }
        kref_sel_keys_free(&kk);
    }
    for (int b = 1; b < nb; b++) {
        double md = 0, m2 = 0, n = SEEDS * Q;
        for (int i = 0; i < SEEDS * Q; i++) {
            double dlt = rec[b][i] - rec[b - 1][i];
            md += dlt / n;
            m2 += dlt * dlt / n;
        }
        double se = sqrt(fmax(m2 - md * md, 0) / (n - 1));
        cr_assert_geq(md, -2.5 * se - 1e-12, "method %d: %g bits -> %g bits: recall changes by %g (se %g)",
                      method, budgets[b - 1], budgets[b], md, se);
    }
    /* and the budgets span something: the last is better than the first */
    double first = 0, last = 0;
    for (int i = 0; i < SEEDS * Q; i++)
        first += rec[0][i], last += rec[nb - 1][i];
    cr_assert_gt(last, first, "method %d: recall %g at %g bits, %g at %g", method, first / (SEEDS * Q),
                 budgets[0], last / (SEEDS * Q), budgets[nb - 1]);
    free(k), free(v), free(sel);
}

Test(select, more_bits_pertoken) { more_bits_never_worse(KREF_SEL_PERTOKEN, (double[]){17, 34, 68, 136}, 4); }
Test(select, more_bits_sparq) { more_bits_never_worse(KREF_SEL_SPARQ, (double[]){17, 34, 68, 136}, 4); }
Test(select, more_bits_fathom) { more_bits_never_worse(KREF_SEL_FATHOM, (double[]){12, 24, 48, 96}, 4); }
Test(select, more_bits_lsh) { more_bits_never_worse(KREF_SEL_LSH, (double[]){16, 64, 256}, 3); }

/* LSH selects the top-k of B - Hamming over signatures computed here from
 * the projections' definition, whether its signatures were built at B bits or
 * at more (a prefix is reused). */
Test(select, lsh_against_brute_force_and_prefix_reuse)
{
    enum { N = 200, D = 16, G = 2, K = 10 };
    float k[N * D], v[N * D], q[G * D];
    fill(77, N, D, G, 2.0f, k, q, v);
    for (int bits = 8; bits <= 96; bits += 44) {
        double score[N] = {0};
        for (int h = 0; h < G; h++)
            for (int i = 0; i < bits; i++) {
                float aq = 0.0f;
                for (int j = 0; j < D; j++)
                    aq += kref_normal(5, (uint64_t)i * D + j) * q[h * D + j];
                for (int t = 0; t < N; t++) {
                    float ak = 0.0f;
                    for (int j = 0; j < D; j++)
                        ak += kref_normal(5, (uint64_t)i * D + j) * k[t * D + j];
                    score[t] += (ak >= 0.0f) == (aq >= 0.0f);
                }
            }
        for (int pre = 0; pre < 2; pre++) {
            kref_sel_keys_t kk;
            cr_assert_eq(kref_sel_keys_init(&kk, k, N, D, NULL, 0), 0);
            if (pre)
                cr_assert_eq(kref_sel_lsh_build(&kk, 200, 5), 0);
            kref_sel_cfg_t c = {KREF_SEL_LSH, K, bits, 0, 0, 5};
            uint32_t sel[K];
            size_t nsel;
            cr_assert_eq(kref_sel_select(&kk, q, G, &c, sel, &nsel, NULL), 0);
            double kth = HUGE_VAL;   /* every selected score is >= every unselected one */
            int in[N] = {0};
            for (int i = 0; i < K; i++) {
                in[sel[i]] = 1;
                kth = fmin(kth, score[sel[i]]);
            }
            for (int t = 0; t < N; t++)
                cr_assert(in[t] || score[t] <= kth, "bits %d prefix %d: token %d scores %g > %g", bits, pre, t,
                          score[t], kth);
            kref_sel_keys_free(&kk);
        }
    }
}
