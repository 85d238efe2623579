/* planes.h: the Fathom / SparQ index layout, its quantiser, and the scan.
 *
 * Layout of one KV head's index, n tokens, chunks of T tokens (T a multiple
 * of 128): chunk c holds, for every channel j = 0..127 in order, one piece of
 *     [T/64 fp16 scales][plane 0: T/8 bytes][plane 1][plane 2][plane 3]
 * (planes MSB first; bit i of a plane = token c*T + i, little-endian within
 * 32-bit words). A channel's first t planes and its scales are therefore one
 * contiguous run of T/32 + t*T/8 bytes per chunk: a plane-prefix read of
 * channel j is n/T pieces of kref_prefix_bytes(T, t) bytes, strided by
 * kref_chunk_bytes(T).
 *
 * Quantiser: per channel and 64-token block, s = fp16(max|x| / 8); code
 * u = clamp(floor(x / s + 8), 0, 15) (u = 8 when s == 0). Reading the first
 * t planes gives u >> (4 - t), reconstructed as
 *     x_t = s * (((u >> (4-t)) + 0.5) * 2^(4-t) - 8)        (x_0 = 0),
 * which is exactly the t-bit mid-rise quantiser under the same scale and
 * equals s * sum_{p<t} sigma_p * 2^(2-p) with sigma_p = 2*bit_p - 1.
 */
#ifndef KREF_PLANES_H
#define KREF_PLANES_H

#include <stddef.h>
#include <stdint.h>
#include "kref.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of one channel's piece in a chunk (scales + 4 planes). */
static inline KREF_HD size_t kref_chan_bytes(int T) { return (size_t)T / 32 + (size_t)T / 2; }
/* Bytes of one chunk of one KV head (all 128 channels). */
static inline KREF_HD size_t kref_chunk_bytes(int T) { return KREF_D * kref_chan_bytes(T); }
/* Bytes of a channel's scales plus its first t planes, in one chunk. */
static inline KREF_HD size_t kref_prefix_bytes(int T, int t) { return (size_t)T / 32 + (size_t)t * T / 8; }

/* The fp16 scale of a block whose largest magnitude is maxabs (raw half bits). */
static inline KREF_HD uint16_t kref_quant_scale(float maxabs)
{
    return kref_f32_to_f16(maxabs * 0.125f);
}

/* The 4-bit code of x under scale s (s as float). */
static inline KREF_HD int kref_quant_code(float x, float s)
{
    if (!(s > 0.0f))
        return 8;
    float y = floorf(x / s + 8.0f);
    return y < 0.0f ? 0 : (y > 15.0f ? 15 : (int)y);
}

/* Reconstruction of code u read to depth t (0..4) under scale s. */
static inline KREF_HD float kref_dequant(int u, int t, float s)
{
    if (t == 0)
        return 0.0f;
    float step = (float)(1 << (4 - t));
    return s * (((float)(u >> (4 - t)) + 0.5f) * step - 8.0f);
}

/* A per-KV-head read plan: the channels read and their depths, in channel
 * order, and the compact offsets a plane-prefix fetch writes them at. */
typedef struct {
    int32_t n_active;          /* channels with depth > 0 */
    int32_t chunk_prefix_bytes;/* sum of kref_prefix_bytes over active channels */
    uint8_t chan[KREF_D];      /* active channel ids, ascending */
    uint8_t depth[KREF_D];     /* their depths, 1..4 */
    uint32_t cum[KREF_D];      /* bytes per chunk of the active channels before */
} kref_plan_t;

/* Build a plan from per-channel depths (0..4) for chunk size T. */
void kref_plan_from_depth(const uint8_t depth[KREF_D], int T, kref_plan_t *plan);

/* Quantise one KV head's keys k (n rows of KREF_D bf16, row-major) into the
 * index layout above. Contract: n % T == 0, T % 128 == 0; out holds
 * n / T * kref_chunk_bytes(T) bytes and is fully written. */
void kref_planes_quantize(const uint16_t *k, size_t n, int T, uint8_t *out);

/* The value of (token, chan) read to depth t from an index in the layout. */
float kref_planes_read(const uint8_t *idx, int T, size_t token, int chan, int t);

/* Fathom / SparQ scan: scores[i] = sum over channels of q[j] * value read to
 * depth[j]. q has KREF_D floats; scores has n floats. */
void kref_fathom_scan(const uint8_t *idx, size_t n, int T, const float *q,
                      const uint8_t depth[KREF_D], float *scores);

/* Copy the plane prefixes named by plan out of a full index into the compact
 * channel-major layout that the fetch kernels produce: active channel a,
 * chunk c lands at n/T * plan->cum[a] + c * kref_prefix_bytes(T, depth). */
void kref_planes_compact(const uint8_t *idx, size_t n, int T, const kref_plan_t *plan,
                         uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif
