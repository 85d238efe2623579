/* Tests of the Fathom / SparQ bit-plane index (planes.h). */
#include <stdlib.h>
#include <criterion/criterion.h>
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

/* The t-bit mid-rise quantiser over [-8s, 8s], written independently. */
static float tbit_quant(float x, float s, int t)
{
    if (t == 0 || s == 0.0f)
        return 0.0f;
    float step = s * (float)(1 << (4 - t));
    float y = floorf((x / s + 8.0f) / (float)(1 << (4 - t)));
    float top = (float)((1 << t) - 1);
    y = y < 0.0f ? 0.0f : (y > top ? top : y);
    return (y + 0.5f) * step - 8.0f * s;
}

static float block_scale(const uint16_t *k, size_t token, int j)
{
    size_t t0 = token / 64 * 64;
    float m = 0.0f;
    for (size_t t = t0; t < t0 + 64; t++)
        m = fmaxf(m, fabsf(kref_bf16_to_f32(k[t * KREF_D + j])));
    return kref_f16_to_f32(kref_f32_to_f16(m / 8.0f));
}

Test(planes, prefix_read_is_tbit_quantiser)
{
    int Ts[] = {128, 256, 1024};
    for (int ti = 0; ti < 3; ti++) {
        int T = Ts[ti];
        size_t n = 2 * (size_t)T;
        uint16_t *k = make_keys(n, 100 + ti);
        uint8_t *idx = malloc(n / T * kref_chunk_bytes(T));
        kref_planes_quantize(k, n, T, idx);
        for (size_t tok = 0; tok < n; tok += 7)
            for (int j = 0; j < KREF_D; j += 3)
                for (int t = 0; t <= 4; t++) {
                    float x = kref_bf16_to_f32(k[tok * KREF_D + j]);
                    float want = tbit_quant(x, block_scale(k, tok, j), t);
                    float got = kref_planes_read(idx, T, tok, j, t);
                    cr_assert_float_eq(got, want, 1e-6f * fabsf(want) + 1e-30f,
                                       "T %d token %zu chan %d depth %d: %g vs %g", T, tok, j, t,
                                       got, want);
                }
        free(idx);
        free(k);
    }
}

Test(planes, full_depth_error_within_half_step)
{
    int T = 256;
    size_t n = 512;
    uint16_t *k = make_keys(n, 7);
    uint8_t *idx = malloc(n / T * kref_chunk_bytes(T));
    kref_planes_quantize(k, n, T, idx);
    for (size_t tok = 0; tok < n; tok++)
        for (int j = 0; j < KREF_D; j++) {
            float x = kref_bf16_to_f32(k[tok * KREF_D + j]);
            float s = block_scale(k, tok, j);
            float err = fabsf(kref_planes_read(idx, T, tok, j, 4) - x);
            cr_assert_leq(err, 0.5f * s * 1.01f + 1e-6f, "err %g scale %g", err, s);
        }
    free(idx);
    free(k);
}

Test(planes, scan_matches_direct_sum_and_compact_copy)
{
    int T = 256;
    size_t n = 1024;
    uint16_t *k = make_keys(n, 9);
    uint8_t *idx = malloc(n / T * kref_chunk_bytes(T));
    kref_planes_quantize(k, n, T, idx);
    float q[KREF_D];
    uint8_t depth[KREF_D];
    for (int j = 0; j < KREF_D; j++) {
        q[j] = kref_normal(10, j);
        depth[j] = (uint8_t)(j % 5);
    }
    float *sc = malloc(n * sizeof *sc);
    kref_fathom_scan(idx, n, T, q, depth, sc);
    for (size_t i = 0; i < n; i += 13) {
        double want = 0.0;
        for (int j = 0; j < KREF_D; j++)
            want += (double)q[j] * tbit_quant(kref_bf16_to_f32(k[i * KREF_D + j]),
                                              block_scale(k, i, j), depth[j]);
        cr_assert_float_eq(sc[i], (float)want, 1e-4 * (fabs(want) + 1.0), "token %zu", i);
    }
    /* the compact copy holds exactly the prefixes, at the plan's offsets */
    kref_plan_t plan;
    kref_plan_from_depth(depth, T, &plan);
    cr_assert_eq(plan.n_active, 128 - 26);                  /* j % 5 == 0 are skipped */
    uint8_t *cmp = malloc(n / T * plan.chunk_prefix_bytes);
    kref_planes_compact(idx, n, T, &plan, cmp);
    for (int a = 0; a < plan.n_active; a++) {
        size_t pb = kref_prefix_bytes(T, plan.depth[a]);
        for (size_t c = 0; c < n / T; c++)
            cr_assert_eq(memcmp(cmp + n / T * plan.cum[a] + c * pb,
                                idx + c * kref_chunk_bytes(T) + plan.chan[a] * kref_chan_bytes(T),
                                pb), 0);
    }
    free(cmp);
    free(sc);
    free(idx);
    free(k);
}

Test(planes, zero_block_reads_zero)
{
    int T = 128;
    uint16_t *k = calloc(T * KREF_D, sizeof *k);
    uint8_t *idx = malloc(kref_chunk_bytes(T));
    kref_planes_quantize(k, T, T, idx);
    for (int t = 0; t <= 4; t++)
        cr_assert_float_eq(kref_planes_read(idx, T, 17, 3, t), 0.0f, 0.0f);
    free(idx);
    free(k);
}
