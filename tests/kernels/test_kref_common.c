/* Tests of kref.h: half/bf16 conversions and the synthetic key generator. */
#include <criterion/criterion.h>
#include "../../kernels/ref/kref.h"

Test(kref, f16_known_values)
{
    cr_assert_eq(kref_f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(kref_f32_to_f16(-2.0f), 0xc000);
    cr_assert_eq(kref_f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(kref_f32_to_f16(65520.0f), 0x7c00);          /* rounds to inf */
    cr_assert_eq(kref_f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00); /* tie to even */
    cr_assert_eq(kref_f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02); /* tie to even, up */
    cr_assert_eq(kref_f32_to_f16(5.9604645e-8f), 0x0001);     /* 2^-24 */
    cr_assert_eq(kref_f32_to_f16(2.9802322e-8f), 0x0000);     /* 2^-25: tie to 0 */
}

Test(kref, f16_roundtrip_every_half)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if (((h >> 10) & 0x1f) == 0x1f)
            continue;                                          /* inf / NaN */
        float f = kref_f16_to_f32((uint16_t)h);
        cr_assert_eq(kref_f32_to_f16(f), h, "half 0x%04x", h);
    }
}

Test(kref, f16_rounding_is_nearest)
{
    for (int i = 0; i < 100000; i++) {
        float f = (kref_unif(3, i) - 0.5f) * 1000.0f * kref_unif(4, i);
        float r = kref_f16_to_f32(kref_f32_to_f16(f));
        /* relative error at most half an ulp of an 11-bit mantissa */
        cr_assert_leq(fabsf(r - f), fabsf(f) * (1.0f / 2048.0f) + 3e-8f, "%g -> %g", f, r);
    }
}

Test(kref, bf16_roundtrip_and_rounding)
{
    cr_assert_eq(kref_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_float_eq(kref_bf16_to_f32(kref_f32_to_bf16(3.140625f)), 3.140625f, 0.0f);
    for (int i = 0; i < 100000; i++) {
        float f = kref_normal(5, i) * 100.0f;
        float r = kref_bf16_to_f32(kref_f32_to_bf16(f));
        cr_assert_leq(fabsf(r - f), fabsf(f) * (1.0f / 256.0f), "%g -> %g", f, r);
    }
}

Test(kref, synthetic_keys_heavy_tailed)
{
    double var[KREF_D] = {0};
    int n = 4000;
    for (int t = 0; t < n; t++)
        for (int j = 0; j < KREF_D; j++) {
            double x = kref_key(11, t, j);
            var[j] += x * x / n;
        }
    /* the outlier channels carry several times the median channel's variance */
    double med_sigma = 1.0;                                    /* exp(0.75 * 0) */
    for (int j = 5; j < KREF_D; j += 32)
        cr_assert_gt(var[j], 16.0 * med_sigma * med_sigma * 0.05, "channel %d var %g", j, var[j]);
    for (int j = 0; j < KREF_D; j++) {
        double s2 = (double)kref_key_sigma(j) * kref_key_sigma(j);
        cr_assert_lt(fabs(var[j] - s2), 0.15 * s2, "channel %d: %g vs %g", j, var[j], s2);
    }
}
