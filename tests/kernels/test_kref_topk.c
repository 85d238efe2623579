/* Tests of the radix-select top-k (topk.h) against sorting. */
#include <stdlib.h>
#include <criterion/criterion.h>
#include "../../kernels/ref/topk.h"

static int desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static void check_topk(const float *x, size_t n, int k)
{
    uint32_t *idx = malloc(k * sizeof *idx);
    cr_assert_eq(kref_topk(x, n, k, idx), 0);
    float *sorted = malloc(n * sizeof *sorted), *got = malloc(k * sizeof *got);
    memcpy(sorted, x, n * sizeof *x);
    qsort(sorted, n, sizeof *sorted, desc);
    char *seen = calloc(n, 1);
    for (int i = 0; i < k; i++) {
        cr_assert_lt(idx[i], n);
        cr_assert_eq(seen[idx[i]], 0, "index %u twice", idx[i]);
        seen[idx[i]] = 1;
        got[i] = x[idx[i]];
    }
    qsort(got, k, sizeof *got, desc);
    for (int i = 0; i < k; i++)
        cr_assert_float_eq(got[i], sorted[i], 0.0f, "n %zu k %d rank %d", n, k, i);
    free(seen);
    free(got);
    free(sorted);
    free(idx);
}

Test(topk, against_sort_random)
{
    size_t ns[] = {1, 100, 5000, 65536};
    int ks[] = {1, 7, 256, 4096};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            size_t n = ns[a];
            int k = ks[b] < (int)n ? ks[b] : (int)n;
            float *x = malloc(n * sizeof *x);
            for (size_t i = 0; i < n; i++)
                x[i] = kref_normal(90 + a, i) * 10.0f;
            check_topk(x, n, k);
            free(x);
        }
}

Test(topk, heavy_ties_and_negative_values)
{
    size_t n = 20000;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(kref_mix64(i) % 33) - 16.0f;     /* Hamming-like integer scores */
    check_topk(x, n, 1000);
    check_topk(x, n, 1);
    check_topk(x, n, (int)n);
    free(x);
}

Test(topk, keys_preserve_order)
{
    float v[] = {-1e30f, -3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f, 2.0f, 1e30f};
    for (int i = 0; i + 1 < 8; i++)
        cr_assert_leq(kref_topk_key(v[i]), kref_topk_key(v[i + 1]));
}
