/* scan_other.cu: per-token packed, HashAttention (Hamming) and page-landmark
 * scans, and GPU builders of their indexes (layouts in ref/scans.h).
 *
 * Two numbers, per token (or page) and head:
 *   pertoken C:  17C/32 bytes read + 4 written; ~3 operations per channel
 *                (shift, LOP3 to a float in [1,2), FFMA): issue-bound near
 *                the HBM rate at C = 32 (NOTES.md);
 *   hash:        4 bytes read + 4 written, 2 operations: HBM-bound;
 *   landmark:    512 bytes read per page + 4 written, ~2 operations per byte.
 */
#include "kbench/kb.h"
#include "kern.h"
#include "ref/scans.h"

#define PT_THREADS 256
#define PT_TOKENS (2 * PT_THREADS)     /* two tokens per thread, 256 apart */
#define PT_BLOCKS (PT_TOKENS / KREF_SCALE_TOKENS)

/* Nibble k of w as the float 1 + nibble / 16 (exact). */
__device__ __forceinline__ float nib_f(uint32_t w, int k)
{
    uint32_t x = (19 >= 4 * k) ? (w << (19 - 4 * k)) : (w >> (4 * k - 19));
    return __uint_as_float((x & 0x00780000u) | 0x3f800000u);
}

/* Codes of one token (C/2 bytes) as four words (C = 16: the last two zero). */
template <int C> __device__ __forceinline__ void load_codes(const uint8_t *p, uint32_t *w)
{
    if (C == 32) {
        uint4 v = *(const uint4 *)p;
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
        uint2 v = *(const uint2 *)p;
        w[0] = v.x, w[1] = v.y, w[2] = w[3] = 0;
    }
}

/* sum_c q_c s_c (16 f_c - 23.5) with qs = 16 q s and base = -23.5/16 sum qs. */
template <int C> __device__ __forceinline__ float pt_dot(const float *qs, float base, const uint32_t *w)
{
    float acc = base;
    const float4 *q4 = (const float4 *)qs;            /* 16-byte shared loads */
#pragma unroll
    for (int c4 = 0; c4 < C / 4; c4++) {
        float4 qv = q4[c4];
        int c = 4 * c4;
        acc = fmaf(qv.x, nib_f(w[c / 8], c % 8), acc);
        acc = fmaf(qv.y, nib_f(w[c / 8], c % 8 + 1), acc);
        acc = fmaf(qv.z, nib_f(w[c / 8], c % 8 + 2), acc);
        acc = fmaf(qv.w, nib_f(w[c / 8], c % 8 + 3), acc);
    }
    return acc;
}

template <int C>
__global__ void scan_pertoken_kernel1(const uint8_t *__restrict__ idx, size_t head_stride,
                                      const float *__restrict__ qc, size_t n,
                                      float *__restrict__ scores)
{
    __shared__ __align__(16) float qs[PT_BLOCKS][C];
    __shared__ float base[PT_BLOCKS];
    int h = blockIdx.y;
    size_t blk0 = blockIdx.x * (size_t)PT_BLOCKS;
    const uint8_t *hidx = idx + h * head_stride;
    size_t nblk = n / KREF_SCALE_TOKENS;
    /* the codes' loads go out first, so their latency overlaps the weights' set-up */
    size_t t0 = blockIdx.x * (size_t)PT_TOKENS + threadIdx.x, t1 = t0 + PT_THREADS;
    uint32_t w0[4] = {0, 0, 0, 0}, w1[4] = {0, 0, 0, 0};
    if (t0 < n)
        load_codes<C>(hidx + (t0 / 64) * kref_pt_block_bytes(C) + 2 * C + (t0 % 64) * (C / 2), w0);
    if (t1 < n)
        load_codes<C>(hidx + (t1 / 64) * kref_pt_block_bytes(C) + 2 * C + (t1 % 64) * (C / 2), w1);
    for (int i = threadIdx.x; i < PT_BLOCKS * C; i += blockDim.x) {
        int b = i / C, c = i % C;
        float s = 0.0f;
        if (blk0 + b < nblk)
            s = kref_f16_to_f32(((const uint16_t *)(hidx + (blk0 + b) * kref_pt_block_bytes(C)))[c]);
        qs[b][c] = 16.0f * qc[h * C + c] * s;   /* x = s * (16 f - 23.5) */
    }
    __syncthreads();
    if (threadIdx.x < PT_BLOCKS) {
        float sum = 0.0f;
        for (int c = 0; c < C; c++)
            sum += qs[threadIdx.x][c];
        base[threadIdx.x] = -23.5f / 16.0f * sum;
    }
    __syncthreads();
    int b0 = threadIdx.x / KREF_SCALE_TOKENS, b1 = b0 + PT_THREADS / KREF_SCALE_TOKENS;
    if (t0 >= n)
        return;
    scores[h * n + t0] = pt_dot<C>(qs[b0], base[b0], w0);
    if (t1 < n)
        scores[h * n + t1] = pt_dot<C>(qs[b1], base[b1], w1);
}

void kb_scan_pertoken(const uint8_t *idx, size_t head_stride, int C, const float *qc, int heads,
                      size_t n, float *scores, cudaStream_t s)
{
    dim3 grid((unsigned)((n + PT_TOKENS - 1) / PT_TOKENS), heads);
    if (C == 32)
        scan_pertoken_kernel1<32><<<grid, PT_THREADS, 0, s>>>(idx, head_stride, qc, n, scores);
    else
        scan_pertoken_kernel1<16><<<grid, PT_THREADS, 0, s>>>(idx, head_stride, qc, n, scores);
    CKL();
}

__global__ void scan_hash_kernel1(const uint4 *__restrict__ sig, const uint32_t *__restrict__ qsig,
                                  size_t n4, size_t total4, float4 *__restrict__ scores)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total4;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t q = qsig[i / n4];
        uint4 v = __ldcs(sig + i);
        float4 r;
        r.x = (float)(32 - __popc(v.x ^ q));
        r.y = (float)(32 - __popc(v.y ^ q));
        r.z = (float)(32 - __popc(v.z ^ q));
        r.w = (float)(32 - __popc(v.w ^ q));
        scores[i] = r;
    }
}

void kb_scan_hash(const uint32_t *sig, const uint32_t *qsig, int qheads, size_t n, float *scores,
                  cudaStream_t s)
{
    size_t total4 = (size_t)qheads * n / 4;
    int blocks = 8 * kb_sm_count();
    scan_hash_kernel1<<<blocks, 256, 0, s>>>((const uint4 *)sig, qsig, n / 4, total4,
                                             (float4 *)scores);
    CKL();
}

/* One warp per page: lane l holds channels 4l..4l+3 of min and of max. */
__global__ void scan_landmark_kernel1(const uint8_t *__restrict__ lm, size_t head_stride,
                                      const float *__restrict__ q, size_t npages,
                                      float *__restrict__ scores)
{
    int h = blockIdx.y, lane = threadIdx.x % 32;
    size_t pg = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
    if (pg >= npages)
        return;
    const uint8_t *page = lm + h * head_stride + pg * KREF_LM_PAGE_BYTES;
    uint2 mn = *(const uint2 *)(page + 8 * lane), mx = *(const uint2 *)(page + 256 + 8 * lane);
    float4 qv = *(const float4 *)(q + h * KREF_D + 4 * lane);
    float qa[4] = {qv.x, qv.y, qv.z, qv.w};
    uint32_t lo[2] = {mn.x, mn.y}, hi[2] = {mx.x, mx.y};
    float acc = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float a = kref_bf16_to_f32((uint16_t)(lo[e / 2] >> (16 * (e % 2))));
        float b = kref_bf16_to_f32((uint16_t)(hi[e / 2] >> (16 * (e % 2))));
        acc += fmaxf(qa[e] * a, qa[e] * b);
    }
    for (int o = 16; o > 0; o /= 2)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0)
        scores[h * npages + pg] = acc;
}

void kb_scan_landmark(const uint8_t *lm, size_t head_stride, const float *q, int heads,
                      size_t npages, float *scores, cudaStream_t s)
{
    dim3 grid((unsigned)((npages + 7) / 8), heads);
    scan_landmark_kernel1<<<grid, 256, 0, s>>>(lm, head_stride, q, npages, scores);
    CKL();
}

/* One block per (64-token block, head). */
__global__ void build_pertoken_kernel1(const uint16_t *__restrict__ k, size_t head_stride,
                                       const int *__restrict__ chans, int C, uint8_t *out,
                                       size_t out_head_stride)
{
    __shared__ float sc[32];
    int h = blockIdx.y;
    size_t t0 = blockIdx.x * (size_t)KREF_SCALE_TOKENS;
    const uint16_t *kh = k + h * head_stride;
    uint8_t *o = out + h * out_head_stride + blockIdx.x * kref_pt_block_bytes(C);
    if (threadIdx.x < C) {
        int j = chans[threadIdx.x];
        float m = 0.0f;
        for (int i = 0; i < KREF_SCALE_TOKENS; i++)
            m = fmaxf(m, fabsf(kref_bf16_to_f32(kh[(t0 + i) * KREF_D + j])));
        uint16_t s = kref_quant_scale(m);
        ((uint16_t *)o)[threadIdx.x] = s;
        sc[threadIdx.x] = kref_f16_to_f32(s);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < KREF_SCALE_TOKENS * C / 2; e += blockDim.x) {
        int i = e / (C / 2), c = 2 * (e % (C / 2));
        int u0 = kref_quant_code(kref_bf16_to_f32(kh[(t0 + i) * KREF_D + chans[c]]), sc[c]);
        int u1 = kref_quant_code(kref_bf16_to_f32(kh[(t0 + i) * KREF_D + chans[c + 1]]), sc[c + 1]);
        o[2 * C + e] = (uint8_t)(u0 | (u1 << 4));
    }
}

void kb_build_pertoken(const uint16_t *k, size_t head_stride, int heads, size_t n, const int *chans,
                       int C, uint8_t *out, size_t out_head_stride, cudaStream_t s)
{
    dim3 grid((unsigned)(n / KREF_SCALE_TOKENS), heads);
    build_pertoken_kernel1<<<grid, 256, 0, s>>>(k, head_stride, chans, C, out, out_head_stride);
    CKL();
}

__global__ void build_landmark_kernel1(const uint16_t *__restrict__ k, size_t head_stride,
                                       size_t npages, int P, uint8_t *out, size_t out_head_stride)
{
    int h = blockIdx.y;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < npages * KREF_D;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t pg = e / KREF_D;
        int j = (int)(e % KREF_D);
        const uint16_t *r = k + h * head_stride + pg * P * KREF_D + j;
        uint16_t lo = r[0], hi = r[0];
        for (int i = 1; i < P; i++) {
            uint16_t v = r[i * KREF_D];
            if (kref_bf16_to_f32(v) < kref_bf16_to_f32(lo))
                lo = v;
            if (kref_bf16_to_f32(v) > kref_bf16_to_f32(hi))
                hi = v;
        }
        uint16_t *o = (uint16_t *)(out + h * out_head_stride + pg * KREF_LM_PAGE_BYTES);
        o[j] = lo;
        o[KREF_D + j] = hi;
    }
}

void kb_build_landmark(const uint16_t *k, size_t head_stride, int heads, size_t n, int P,
                       uint8_t *out, size_t out_head_stride, cudaStream_t s)
{
    dim3 grid(4 * kb_sm_count(), heads);
    build_landmark_kernel1<<<grid, 256, 0, s>>>(k, head_stride, n / P, P, out, out_head_stride);
    CKL();
}
