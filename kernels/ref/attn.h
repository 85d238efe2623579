/* attn.h: decode attention reference, whole and split-K (flash decoding).
 *
 * G query heads share one KV head's rows. Row r's key is k + r * stride and
 * its value v + r * stride (KREF_D bf16 each). Scores are q . k (the caller
 * folds 1/sqrt(d) into q). A split computes, per query head, the running max
 * m, the sum l = sum exp(s - m) and acc = sum exp(s - m) * v over its rows;
 * combining splits rescales each to the global max.
 */
#ifndef KREF_ATTN_H
#define KREF_ATTN_H

#include <stddef.h>
#include <stdint.h>
#include "kref.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Partial state of one split for one query head. */
typedef struct {
    float m, l;
    float acc[KREF_D];
} kref_attn_part_t;

/* Attention of g query heads (q: g x KREF_D) over rows [0, n): out g x KREF_D,
 * computed in double. Contract: n >= 1. */
void kref_attn(const float *q, int g, const uint16_t *k, const uint16_t *v, size_t stride,
               size_t n, float *out);

/* One split over rows [r0, r1) (r1 > r0): part[h] for each query head. */
void kref_attn_partial(const float *q, int g, const uint16_t *k, const uint16_t *v,
                       size_t stride, size_t r0, size_t r1, kref_attn_part_t *part);

/* Combine nsplit partials per query head (parts[s * g + h]) into out (g x KREF_D). */
void kref_attn_combine(const kref_attn_part_t *parts, int nsplit, int g, float *out);

#ifdef __cplusplus
}
#endif
#endif
