/* attn.cu: split-K decode attention (flash decoding) and its combine.
 *
 * A block of 4 warps takes one split of one KV head; each half-warp owns a
 * row at a time (16 lanes x 8 channels, 16-byte loads of K and V), keeps an
 * online softmax per query head, and the 8 half-warp states are merged in
 * shared memory into one partial. Two numbers per row: 2 * 256 bytes read;
 * ~(24 g + 8) operations per lane, so HBM-bound on an H200 for g <= 4.
 * The same kernel reads gathered winners (attn_sparse), the HBM tail
 * (attn_tail) and whole K/V in HBM or in mapped host memory (attn_dense).
 */
#include <math.h>
#include "kbench/kb.h"
#include "kern.h"
#include "ref/attn.h"

#define AT_WARPS 4
#define AT_HALVES (2 * AT_WARPS)
#define AT_ROWS 2        /* rows per half-warp with loads in flight together */

__device__ __forceinline__ void bf16x8(uint4 v, float *f)
{
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

template <int G>
__global__ void attn_partial_kernel1(const uint16_t *__restrict__ kv, size_t head_stride,
                                     size_t row_stride, size_t v_off, const float *__restrict__ q,
                                     size_t n, int nsplit, int split0, int total_splits,
                                     kref_attn_part_t *__restrict__ part)
{
    __shared__ float sm[AT_HALVES][G], sl[AT_HALVES][G], sacc[AT_HALVES][G][KREF_D];
    int h = blockIdx.y, sp = blockIdx.x;
    int half = threadIdx.x / 16, l16 = threadIdx.x % 16;
    size_t r0 = n * sp / nsplit, r1 = n * (sp + 1) / nsplit;
    float qr[G][8], m[G], l[G], acc[G][8];
#pragma unroll
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            qr[g][e] = q[((size_t)h * G + g) * KREF_D + 8 * l16 + e];
            acc[g][e] = 0.0f;
        }
    }
    const uint16_t *base = kv + h * head_stride + 8 * l16;
    /* the loop bound is uniform per warp (the shuffles need both halves);
     * each half-warp loads AT_ROWS rows before using any */
    for (size_t rb = r0 + (half & ~1); rb < r1; rb += AT_HALVES * AT_ROWS) {
        float kf[AT_ROWS][8], vf[AT_ROWS][8];
        bool valid[AT_ROWS];
#pragma unroll
        for (int u = 0; u < AT_ROWS; u++) {
            size_t r = rb + u * AT_HALVES + (half & 1);
            valid[u] = r < r1;
            const uint16_t *row = base + (valid[u] ? r : rb) * row_stride;
            bf16x8(*(const uint4 *)row, kf[u]);
            bf16x8(*(const uint4 *)(row + v_off), vf[u]);
        }
#pragma unroll
        for (int u = 0; u < AT_ROWS; u++) {
#pragma unroll
            for (int g = 0; g < G; g++) {
                float s = 0.0f;
#pragma unroll
                for (int e = 0; e < 8; e++)
                    s = fmaf(qr[g][e], kf[u][e], s);
                for (int o = 8; o > 0; o /= 2)
                    s += __shfl_xor_sync(0xffffffffu, s, o);
                if (valid[u]) {
                    float mn = fmaxf(m[g], s), corr = __expf(m[g] - mn), p = __expf(s - mn);
                    l[g] = l[g] * corr + p;
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        acc[g][e] = fmaf(p, vf[u][e], acc[g][e] * corr);
                    m[g] = mn;
                }
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (l16 == 0) {
            sm[half][g] = m[g];
            sl[half][g] = l[g];
        }
#pragma unroll
        for (int e = 0; e < 8; e++)
            sacc[half][g][8 * l16 + e] = acc[g][e];
    }
    __syncthreads();
    int j = threadIdx.x;                       /* 128 threads: one channel each */
    for (int g = 0; g < G; g++) {
        float M = -INFINITY;
        for (int i = 0; i < AT_HALVES; i++)
            M = fmaxf(M, sm[i][g]);
        float L = 0.0f, A = 0.0f;
        for (int i = 0; i < AT_HALVES; i++) {
            float w = sm[i][g] == -INFINITY ? 0.0f : __expf(sm[i][g] - M);
            L += w * sl[i][g];
            A += w * sacc[i][g][j];
        }
        kref_attn_part_t *out = part + ((size_t)h * total_splits + split0 + sp) * G + g;
        out->acc[j] = A;
        if (j == 0) {
            out->m = M;
            out->l = L;
        }
    }
}

__global__ void attn_combine_kernel1(const kref_attn_part_t *__restrict__ part, int g,
                                     int total_splits, float *__restrict__ out)
{
    int hg = blockIdx.x, h = hg / g, gi = hg % g, j = threadIdx.x;
    float M = -INFINITY;
    for (int s = 0; s < total_splits; s++)
        M = fmaxf(M, part[((size_t)h * total_splits + s) * g + gi].m);
    float L = 0.0f, A = 0.0f;
    for (int s = 0; s < total_splits; s++) {
        const kref_attn_part_t *p = part + ((size_t)h * total_splits + s) * g + gi;
        float w = p->m == -INFINITY ? 0.0f : __expf(p->m - M);
        L += w * p->l;
        A += w * p->acc[j];
    }
    out[(size_t)hg * KREF_D + j] = A / L;
}

void kb_attn_partial(const uint16_t *kv, size_t head_stride, size_t row_stride, size_t v_off,
                     const float *q, int g, int heads, size_t n, int nsplit, int split0,
                     int total_splits, void *part, cudaStream_t s)
{
    dim3 grid(nsplit, heads);
    kref_attn_part_t *p = (kref_attn_part_t *)part;
    if (g == 4)
        attn_partial_kernel1<4><<<grid, 32 * AT_WARPS, 0, s>>>(kv, head_stride, row_stride, v_off, q,
                                                               n, nsplit, split0, total_splits, p);
    else
        attn_partial_kernel1<1><<<grid, 32 * AT_WARPS, 0, s>>>(kv, head_stride, row_stride, v_off, q,
                                                               n, nsplit, split0, total_splits, p);
    CKL();
}

void kb_attn_combine(const void *part, int g, int heads, int total_splits, float *out,
                     cudaStream_t s)
{
    attn_combine_kernel1<<<heads * g, KREF_D, 0, s>>>((const kref_attn_part_t *)part, g,
                                                      total_splits, out);
    CKL();
}

size_t kb_attn_part_bytes(int heads, int total_splits, int g)
{
    return (size_t)heads * total_splits * g * sizeof(kref_attn_part_t);
}

int kb_attn_splits(size_t n, int heads)
{
    size_t want = (size_t)(16 * kb_sm_count() + heads - 1) / heads, most = (n + 63) / 64;
    if (want > most)
        want = most;
    return want < 1 ? 1 : (int)want;
}
