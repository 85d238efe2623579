/* topk.h: top-k selection by radix select (the algorithm the GPU runs).
 *
 * Scores are mapped to order-preserving 32-bit keys; three digit passes
 * (bits 31..21, 20..10, 9..0) narrow down the key of the k-th largest score,
 * tau; the selection is every score with key > tau plus the first
 * (k - count(key > tau)) with key == tau. The selected indices come out in an
 * unspecified order.
 */
#ifndef KREF_TOPK_H
#define KREF_TOPK_H

#include <stddef.h>
#include <stdint.h>
#include "kref.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Digit passes: shift and width of each. */
#define KREF_TOPK_PASSES 3
#define KREF_TOPK_BINS 2048
static inline KREF_HD int kref_topk_shift(int pass) { return pass == 0 ? 21 : (pass == 1 ? 10 : 0); }
static inline KREF_HD int kref_topk_bits(int pass) { return pass == 2 ? 10 : 11; }

/* Order-preserving key of a float: a > b (as floats, no NaN) iff key(a) > key(b). */
static inline KREF_HD uint32_t kref_topk_key(float f)
{
    uint32_t u = kref_f32_bits(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Select the k largest of x[0..n) (1 <= k <= n); writes k indices to idx.
 * Returns 0, or -1 when out of memory. */
int kref_topk(const float *x, size_t n, int k, uint32_t *idx);

#ifdef __cplusplus
}
#endif
#endif
