/* scans.h: the per-token, HashAttention and page-landmark indexes and scans.
 *
 * Per-token packed index (Loki / Double Sparsity style, channels fixed
 * offline): C channels (32 -> 136 bits per token, 16 -> 68 bits), 4-bit codes
 * under an fp16 scale per channel and 64-token block (the Fathom quantiser).
 * One 64-token block is 34*C bytes, contiguous, blocks in token order:
 *     [C fp16 scales][64 tokens x C/2 bytes of codes]
 * token-major, channel c's nibble in byte c/2 (low nibble for even c).
 *
 * HashAttention: one 32-bit signature per token per query head, [head][n];
 * score = 32 - popcount(sig ^ query_sig).
 *
 * Page landmarks (Quest style): per page of P tokens, 512 bytes:
 *     [min over the page of each channel: 128 bf16][max: 128 bf16]
 * score = sum_j max(q_j * min_j, q_j * max_j), an upper bound of q.k for
 * every key of the page.
 */
#ifndef KREF_SCANS_H
#define KREF_SCANS_H

#include <stddef.h>
#include <stdint.h>
#include "kref.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of one 64-token block of a per-token index with C channels. */
static inline KREF_HD size_t kref_pt_block_bytes(int C) { return (size_t)34 * C; }
/* Bytes of one landmark page entry. */
#define KREF_LM_PAGE_BYTES (4 * KREF_D)

/* Build a per-token index of keys k (n rows of KREF_D bf16) over the C
 * channels chans[0..C). Contract: n % 64 == 0, C even; out holds
 * n / 64 * kref_pt_block_bytes(C) bytes. */
void kref_pt_build(const uint16_t *k, size_t n, const int *chans, int C, uint8_t *out);

/* Per-token scan: scores[i] = sum_c qc[c] * dequantised code (depth 4), qc the
 * query restricted to the index's channels (C floats). */
void kref_pt_scan(const uint8_t *idx, size_t n, int C, const float *qc, float *scores);

/* Hamming scan of one query head: scores[i] = 32 - popcount(sig[i] ^ qsig). */
void kref_hash_scan(const uint32_t *sig, size_t n, uint32_t qsig, float *scores);

/* Build landmarks of keys k (n rows of KREF_D bf16) with pages of P tokens.
 * Contract: n % P == 0; out holds n / P * KREF_LM_PAGE_BYTES bytes. */
void kref_lm_build(const uint16_t *k, size_t n, int P, uint8_t *out);

/* Landmark scan: one bound per page, scores has npages floats. */
void kref_lm_scan(const uint8_t *lm, size_t npages, const float *q, float *scores);

#ifdef __cplusplus
}
#endif
#endif
