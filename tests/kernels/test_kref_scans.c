/* Tests of the per-token, Hamming and landmark scans (scans.h). */
#include <stdlib.h>
#include <criterion/criterion.h>
#include "../../kernels/ref/scans.h"
#include "../../kernels/ref/planes.h"

static uint16_t *make_keys(size_t n, uint64_t seed)
{
    uint16_t *k = malloc(n * KREF_D * sizeof *k);
    cr_assert_not_null(k);
    for (size_t t = 0; t < n; t++)
        for (int j = 0; j < KREF_D; j++)
            k[t * KREF_D + j] = kref_f32_to_bf16(kref_key(seed, t, j));
    return k;
}

Test(scans, pertoken_matches_planes_at_full_depth)
{
    /* the per-token index of channels S must score like the plane index read
     * to depth 4 on S and 0 elsewhere: the same quantiser, another layout */
    size_t n = 512;
    int T = 256;
    uint16_t *k = make_keys(n, 60);
    int Cs[2] = {32, 16};
    for (int ci = 0; ci < 2; ci++) {
        int C = Cs[ci], chans[32];
        uint8_t depth[KREF_D] = {0};
        float q[KREF_D] = {0}, qc[32];
        for (int c = 0; c < C; c++) {
            chans[c] = (c * 37 + 3) % KREF_D;
            depth[chans[c]] = 4;
            q[chans[c]] = qc[c] = kref_normal(61, c);
        }
        uint8_t *pt = malloc(n / 64 * kref_pt_block_bytes(C));
        uint8_t *pl = malloc(n / T * kref_chunk_bytes(T));
        kref_pt_build(k, n, chans, C, pt);
        kref_planes_quantize(k, n, T, pl);
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        kref_pt_scan(pt, n, C, qc, a);
        kref_fathom_scan(pl, n, T, q, depth, b);
        for (size_t i = 0; i < n; i++)
            cr_assert_float_eq(a[i], b[i], 1e-5f * (fabsf(b[i]) + 1.0f), "C %d token %zu", C, i);
        free(a);
        free(b);
        free(pt);
        free(pl);
    }
    free(k);
}

Test(scans, hamming_against_bitwise_count)
{
    size_t n = 4096;
    uint32_t *sig = malloc(n * sizeof *sig);
    for (size_t i = 0; i < n; i++)
        sig[i] = (uint32_t)kref_mix64(70 + i);
    uint32_t qs = (uint32_t)kref_mix64(999);
    float *sc = malloc(n * sizeof *sc);
    kref_hash_scan(sig, n, qs, sc);
    for (size_t i = 0; i < n; i++) {
        int same = 0;
        for (int b = 0; b < 32; b++)
            same += ((sig[i] >> b) & 1) == ((qs >> b) & 1);
        cr_assert_float_eq(sc[i], (float)same, 0.0f);
    }
    free(sc);
    free(sig);
}

Test(scans, landmark_bounds_dominate_true_scores)
{
    int Ps[3] = {1, 8, 16};
    size_t n = 1024;
    uint16_t *k = make_keys(n, 80);
    float q[KREF_D];
    for (int j = 0; j < KREF_D; j++)
        q[j] = kref_normal(81, j);
    for (int pi = 0; pi < 3; pi++) {
        int P = Ps[pi];
        uint8_t *lm = malloc(n / P * KREF_LM_PAGE_BYTES);
        kref_lm_build(k, n, P, lm);
        float *sc = malloc(n / P * sizeof *sc);
        kref_lm_scan(lm, n / P, q, sc);
        for (size_t pg = 0; pg < n / P; pg++) {
            float best = -1e30f;
            for (int i = 0; i < P; i++) {
                double s = 0.0;
                for (int j = 0; j < KREF_D; j++)
                    s += (double)q[j] * kref_bf16_to_f32(k[(pg * P + i) * KREF_D + j]);
                cr_assert_geq(sc[pg], (float)s - 1e-3f, "page %zu token %d", pg, i);
                best = fmaxf(best, (float)s);
            }
            if (P == 1)                            /* one-token pages: the bound is exact */
                cr_assert_float_eq(sc[pg], best, 1e-3f * (fabsf(best) + 1.0f), "page %zu", pg);
        }
        free(sc);
        free(lm);
    }
    free(k);
}
