/* Tests of the decode attention reference (attn.h). */
#include <stdlib.h>
#include <criterion/criterion.h>
#include "../../kernels/ref/attn.h"

Test(attn, split_and_combine_equals_whole)
{
    int g = 4;
    size_t n = 1000, stride = 2 * KREF_D;                /* interleaved K|V rows */
    uint16_t *kv = malloc(n * stride * sizeof *kv);
    for (size_t i = 0; i < n * stride; i++)
        kv[i] = kref_f32_to_bf16(kref_normal(100, i));
    float q[4 * KREF_D];
    for (int i = 0; i < g * KREF_D; i++)
        q[i] = kref_normal(101, i) * 0.2f;
    float whole[4 * KREF_D], split[4 * KREF_D];
    kref_attn(q, g, kv, kv + KREF_D, stride, n, whole);
    int ns = 7;
    kref_attn_part_t parts[7 * 4];
    for (int s = 0; s < ns; s++)
        kref_attn_partial(q, g, kv, kv + KREF_D, stride, n * s / ns, n * (s + 1) / ns,
                          parts + s * g);
    kref_attn_combine(parts, ns, g, split);
    for (int i = 0; i < g * KREF_D; i++)
        cr_assert_float_eq(split[i], whole[i], 1e-5f * (fabsf(whole[i]) + 1e-2f), "%d", i);
    free(kv);
}

Test(attn, output_is_convex_combination_weighted_to_best_row)
{
    size_t n = 64;
    uint16_t *k = malloc(n * KREF_D * sizeof *k), *v = malloc(n * KREF_D * sizeof *v);
    for (size_t i = 0; i < n * KREF_D; i++) {
        k[i] = kref_f32_to_bf16(kref_normal(110, i));
        v[i] = kref_f32_to_bf16(kref_normal(111, i));
    }
    float q[KREF_D], out[KREF_D];
    for (int j = 0; j < KREF_D; j++)
        q[j] = 8.0f * kref_bf16_to_f32(k[17 * KREF_D + j]);   /* row 17 dominates */
    kref_attn(q, 1, k, v, KREF_D, n, out);
    for (int j = 0; j < KREF_D; j++)
        cr_assert_float_eq(out[j], kref_bf16_to_f32(v[17 * KREF_D + j]), 1e-3f, "%d", j);
    free(k);
    free(v);
}
