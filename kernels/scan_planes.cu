/* scan_planes.cu: Fathom / SparQ bit-plane scan with per-channel depth.
 *
 * One thread per token; a warp's 32 tokens are one 32-bit word of each
 * plane, loaded once per warp (broadcast). The value read to depth t is
 * s * sum_{p<t} sigma_p 2^(2-p) (planes.h), so each plane bit costs a shift,
 * a sign injection (one LOP3) and an add per query head; no conversions.
 * Two numbers per token and KV head: bytes = sum_a (b_a / 8 + 1 / 32) read +
 * 4 * qg written; work = (plane bits) * (1 + 2 * qg) integer/float
 * operations. At ~48 plane bits and qg = 1 that is ~144 operations for 7 + 4
 * bytes, so the scan is issue-bound, not HBM-bound, on an H200 (NOTES.md).
 * Variant 1: one token per thread; 2: two per thread; 3: 32 per lane (below).
 */
#include "kbench/kb.h"
#include "kern.h"

#define SCAN_THREADS 256
#define SCAN_BATCH 4     /* channels whose loads are in flight together (variant 2) */

template <int QG>
__global__ void scan_planes_kernel1(const uint8_t *__restrict__ idx, size_t head_stride, int compact,
                                    const kref_plan_t *__restrict__ plans,
                                    const float *__restrict__ q, size_t n, int logT,
                                    float *__restrict__ scores)
{
    __shared__ uint32_t off[KREF_D], stride[KREF_D];
    __shared__ uint8_t depth[KREF_D];
    __shared__ float qa[QG][KREF_D];
    int h = blockIdx.y, T = 1 << logT;
    const kref_plan_t *p = plans + h;
    int na = p->n_active;
    uint32_t chunks = (uint32_t)(n >> logT);
    for (int a = threadIdx.x; a < na; a += blockDim.x) {
        int j = p->chan[a], d = p->depth[a];
        depth[a] = (uint8_t)d;
        off[a] = compact ? chunks * p->cum[a] : j * (uint32_t)kref_chan_bytes(T);
        stride[a] = compact ? (uint32_t)kref_prefix_bytes(T, d) : (uint32_t)kref_chunk_bytes(T);
        for (int g = 0; g < QG; g++)
            qa[g][a] = q[((size_t)h * QG + g) * KREF_D + j];
    }
    __syncthreads();
    size_t t = blockIdx.x * (size_t)SCAN_THREADS + threadIdx.x;
    if (t >= n)
        return;
    const uint8_t *base = idx + h * head_stride;
    size_t c = t >> logT;
    uint32_t i = (uint32_t)(t & (T - 1)), sh = 31 - (i & 31);
    float acc[QG];
#pragma unroll
    for (int g = 0; g < QG; g++)
        acc[g] = 0.0f;
    for (int a = 0; a < na; a++) {
        const uint8_t *piece = base + off[a] + c * stride[a];
        float s = kref_f16_to_f32(((const uint16_t *)piece)[i / KREF_SCALE_TOKENS]);
        const uint32_t *pl = (const uint32_t *)(piece + T / 32) + i / 32;
        int d = depth[a];
        float w[QG];
#pragma unroll
        for (int g = 0; g < QG; g++)
            w[g] = qa[g][a] * s * 4.0f;          /* weight of plane 0: 2^2 */
#pragma unroll
        for (int b = 0; b < KREF_QBITS; b++) {
            if (b < d) {
                uint32_t neg = (~(pl[b * (T / 32)] << sh)) & 0x80000000u;
#pragma unroll
                for (int g = 0; g < QG; g++) {
                    acc[g] += __uint_as_float(__float_as_uint(w[g]) ^ neg);
                    w[g] *= 0.5f;
                }
            }
        }
    }
#pragma unroll
    for (int g = 0; g < QG; g++)
        scores[((size_t)h * QG + g) * n + t] = acc[g];
}

/* Variant 2: a block of 4 warps covers 256 tokens of one chunk (T >= 256);
 * warp w takes the 64-token scale block w, each lane two tokens 32 apart, so
 * the scale, its conversion and the weights are shared by two tokens, both
 * plane words come in one 8-byte load, and the pieces' addresses are worked
 * out once per block in shared memory. */
template <int QG>
__global__ void scan_planes_kernel2(const uint8_t *__restrict__ idx, size_t head_stride, int compact,
                                    const kref_plan_t *__restrict__ plans,
                                    const float *__restrict__ q, size_t n, int logT,
                                    float *__restrict__ scores)
{
    __shared__ const uint8_t *pbase[KREF_D];
    __shared__ uint8_t depth[KREF_D];
    __shared__ float qa[QG][KREF_D];
    int h = blockIdx.y, T = 1 << logT;
    const kref_plan_t *p = plans + h;
    int na = p->n_active;
    size_t t0 = blockIdx.x * (size_t)256;
    size_t c = t0 >> logT;
    uint32_t chunks = (uint32_t)(n >> logT);
    const uint8_t *base = idx + h * head_stride;
    for (int a = threadIdx.x; a < na; a += blockDim.x) {
        int j = p->chan[a], d = p->depth[a];
        depth[a] = (uint8_t)d;
        size_t off = compact ? (size_t)chunks * p->cum[a] + c * kref_prefix_bytes(T, d)
                             : c * kref_chunk_bytes(T) + j * kref_chan_bytes(T);
        pbase[a] = base + off;
        for (int g = 0; g < QG; g++)
            qa[g][a] = q[((size_t)h * QG + g) * KREF_D + j];
    }
    __syncthreads();
    int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    uint32_t blk = (uint32_t)((t0 & (T - 1)) / KREF_SCALE_TOKENS) + w;   /* scale block in chunk */
    uint32_t sh = 31 - lane;
    float acc0[QG], acc1[QG];
#pragma unroll
    for (int g = 0; g < QG; g++)
        acc0[g] = acc1[g] = 0.0f;
    for (int a0 = 0; a0 < na; a0 += SCAN_BATCH) {
        /* issue every load of SCAN_BATCH channels before using any */
        uint16_t sraw[SCAN_BATCH];
        uint2 v[SCAN_BATCH][KREF_QBITS];
#pragma unroll
        for (int u = 0; u < SCAN_BATCH; u++) {
            int a = a0 + u, d = a < na ? depth[a] : 0;
            const uint8_t *piece = pbase[a < na ? a : a0];
            sraw[u] = ((const uint16_t *)piece)[blk];
            const uint2 *pl = (const uint2 *)(piece + T / 32) + blk;
#pragma unroll
            for (int b = 0; b < KREF_QBITS; b++)
                v[u][b] = b < d ? pl[b * (T / 64)] : make_uint2(0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < SCAN_BATCH; u++) {
            int a = a0 + u, d = a < na ? depth[a] : 0;
            float s = kref_f16_to_f32(sraw[u]), wt[QG];
#pragma unroll
            for (int g = 0; g < QG; g++)
                wt[g] = (a < na ? qa[g][a] : 0.0f) * s * 4.0f;
#pragma unroll
            for (int b = 0; b < KREF_QBITS; b++) {
                if (b < d) {
                    uint32_t n0 = (~(v[u][b].x << sh)) & 0x80000000u;
                    uint32_t n1 = (~(v[u][b].y << sh)) & 0x80000000u;
#pragma unroll
                    for (int g = 0; g < QG; g++) {
                        acc0[g] += __uint_as_float(__float_as_uint(wt[g]) ^ n0);
                        acc1[g] += __uint_as_float(__float_as_uint(wt[g]) ^ n1);
                        wt[g] *= 0.5f;
                    }
                }
            }
        }
    }
    size_t t = t0 + w * KREF_SCALE_TOKENS + lane;
#pragma unroll
    for (int g = 0; g < QG; g++) {
        scores[((size_t)h * QG + g) * n + t] = acc0[g];
        scores[((size_t)h * QG + g) * n + t + 32] = acc1[g];
    }
}

/* Variant 3 (qg = 1, T a multiple of 1024): a block of 8 warps covers 1024
 * tokens; warp w takes active channels w, w + 8, ...; lane l owns the 32
 * tokens of plane word l, so every plane load is one coalesced 128-byte row
 * per warp and each word feeds 32 tokens with compile-time bit positions.
 * The 8 warps' partial scores are summed through shared memory. */
#define S3_WARPS 8
#define S3_TOKENS 1024

__global__ void __launch_bounds__(32 * S3_WARPS)
scan_planes_kernel3(const uint8_t *__restrict__ idx, size_t head_stride, int compact,
                    const kref_plan_t *__restrict__ plans, const float *__restrict__ q, size_t n,
                    int logT, float *__restrict__ scores)
{
    __shared__ const uint8_t *pbase[KREF_D];
    __shared__ uint8_t depth[KREF_D];
    __shared__ float qa[KREF_D];
    __shared__ float part[S3_WARPS][32][33];             /* padded: no bank conflicts */
    int h = blockIdx.y, T = 1 << logT;
    const kref_plan_t *p = plans + h;
    int na = p->n_active;
    size_t t0 = blockIdx.x * (size_t)S3_TOKENS, c = t0 >> logT;
    uint32_t chunks = (uint32_t)(n >> logT), i0 = (uint32_t)(t0 & (T - 1));
    const uint8_t *base = idx + h * head_stride;
    for (int a = threadIdx.x; a < na; a += blockDim.x) {
        int j = p->chan[a], d = p->depth[a];
        depth[a] = (uint8_t)d;
        pbase[a] = base + (compact ? (size_t)chunks * p->cum[a] + c * kref_prefix_bytes(T, d)
                                   : c * kref_chunk_bytes(T) + j * kref_chan_bytes(T));
        qa[a] = q[(size_t)h * KREF_D + j];
    }
    __syncthreads();
    int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    float acc[32];
#pragma unroll
    for (int k = 0; k < 32; k++)
        acc[k] = 0.0f;
    for (int a = w; a < na; a += S3_WARPS) {
        const uint8_t *piece = pbase[a];
        int d = depth[a];
        const uint32_t *pl = (const uint32_t *)(piece + T / 32) + i0 / 32 + lane;
        uint32_t word[KREF_QBITS];
#pragma unroll
        for (int b = 0; b < KREF_QBITS; b++)
            word[b] = b < d ? pl[b * (T / 32)] : 0u;
        float s = kref_f16_to_f32(((const uint16_t *)piece)[(i0 + 32 * lane) / KREF_SCALE_TOKENS]);
        float wt = qa[a] * s * 4.0f;
#pragma unroll
        for (int b = 0; b < KREF_QBITS; b++) {
            if (b < d) {
                uint32_t wb = __float_as_uint(wt);
#pragma unroll
                for (int k = 0; k < 32; k++)
                    acc[k] += __uint_as_float(wb ^ ((~(word[b] << (31 - k))) & 0x80000000u));
                wt *= 0.5f;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < 32; k++)
        part[w][lane][k] = acc[k];
    __syncthreads();
    for (int t = threadIdx.x; t < S3_TOKENS; t += blockDim.x) {
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < S3_WARPS; i++)
            sum += part[i][t / 32][t % 32];
        scores[(size_t)h * n + t0 + t] = sum;
    }
}

void kb_scan_planes(int variant, const uint8_t *idx, size_t head_stride, int compact,
                    const kref_plan_t *plan, const float *q, int qg, int heads, size_t n, int T,
                    float *scores, cudaStream_t s)
{
    int logT = 0;
    while ((1 << logT) < T)
        logT++;
    if (variant == 3 && qg == 1 && T % S3_TOKENS == 0) {
        dim3 grid((unsigned)(n / S3_TOKENS), heads);
        scan_planes_kernel3<<<grid, 32 * S3_WARPS, 0, s>>>(idx, head_stride, compact, plan, q, n, logT,
                                                           scores);
        CKL();
        return;
    }
    if (variant >= 2 && T >= 256) {
        dim3 grid((unsigned)(n / 256), heads);
        if (qg == 4)
            scan_planes_kernel2<4><<<grid, 128, 0, s>>>(idx, head_stride, compact, plan, q, n, logT,
                                                        scores);
        else
            scan_planes_kernel2<1><<<grid, 128, 0, s>>>(idx, head_stride, compact, plan, q, n, logT,
                                                        scores);
        CKL();
        return;
    }
    dim3 grid((unsigned)((n + SCAN_THREADS - 1) / SCAN_THREADS), heads);
    if (qg == 4)
        scan_planes_kernel1<4><<<grid, SCAN_THREADS, 0, s>>>(idx, head_stride, compact, plan, q, n,
                                                             logT, scores);
    else
        scan_planes_kernel1<1><<<grid, SCAN_THREADS, 0, s>>>(idx, head_stride, compact, plan, q, n,
                                                             logT, scores);
    CKL();
}
