/* attn_prefill.cu: causal attention of a prefill chunk's queries (flash attention, bf16 tensor
 * cores through WMMA): the chunk's c queries of each query head over n earlier rows (the offloaded
 * context copied to HBM, or a sparse chunk's gathered winners) and the chunk's own rows causally.
 *
 * A block of 4 warps takes 64 queries of one query head; each warp 16 of them. Key/value tiles of
 * 64 rows are loaded into shared memory once per block; a warp computes its 16 x 64 scores with
 * WMMA, keeps an online softmax per row (two lanes a row) and accumulates P V into its output rows
 * in shared memory. Compute-bound on tensor cores (4 d flops a query-key pair); not as fast as a
 * hand-scheduled FlashAttention-3 (no warp specialisation, no TMA): kbench measures what it does.
 */
#include <math.h>
#include <mma.h>
#include "kbench/kb.h"
#include "kern.h"

using namespace nvcuda;

#define AP_WARPS 4
#define AP_Q (16 * AP_WARPS)   /* queries per block */
#define AP_T 64                /* key rows per tile */
#define AP_LDK (KREF_D + 8)    /* bf16 row pitch of the K and V tiles */
#define AP_LDS (AP_T + 4)      /* float pitch of a warp's scores */
#define AP_LDP (AP_T + 8)      /* bf16 pitch of a warp's probabilities */
#define AP_LDO (KREF_D + 4)    /* float pitch of a warp's output rows */

struct ap_smem {
    __nv_bfloat16 k[AP_T][AP_LDK], v[AP_T][AP_LDK];
    float s[AP_WARPS][16][AP_LDS];
    __nv_bfloat16 p[AP_WARPS][16][AP_LDP];
    float o[AP_WARPS][16][AP_LDO];
};

/* Row r of KV head h: context row r < n, else the chunk's row r - n. */
__device__ __forceinline__ const uint16_t *ap_row(const uint16_t *ctx, size_t ctx_hs, size_t n, const uint16_t *nw,
                                                  size_t new_hs, int h, size_t r)
{
    return r < n ? ctx + h * ctx_hs + r * 2 * KREF_D : nw + h * new_hs + (r - n) * 2 * KREF_D;
}

__global__ void __launch_bounds__(32 * AP_WARPS) attn_prefill_kernel(
    const uint16_t *__restrict__ ctx, size_t ctx_hs, size_t n, const uint16_t *__restrict__ nw, size_t new_hs,
    const uint16_t *__restrict__ q, int g, int c, uint16_t *__restrict__ out)
{
    extern __shared__ __align__(128) unsigned char ap_raw[];
    ap_smem &sm = *reinterpret_cast<ap_smem *>(ap_raw);
    int qh = blockIdx.y, h = qh / g, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int q0 = blockIdx.x * AP_Q, wq0 = q0 + 16 * warp;
    /* the warp's queries as 8 A fragments (rows past c read the chunk's last query) */
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qa[KREF_D / 16];
    {
        __nv_bfloat16(*qs)[AP_LDK] = reinterpret_cast<__nv_bfloat16(*)[AP_LDK]>(&sm.o[warp][0][0]);
        for (int i = lane; i < 16 * KREF_D / 8; i += 32) {
            int r = i / (KREF_D / 8), cc = i % (KREF_D / 8), t = min(wq0 + r, c - 1);
            *reinterpret_cast<uint4 *>(&qs[r][cc * 8]) =
                *reinterpret_cast<const uint4 *>(q + ((size_t)qh * c + t) * KREF_D + cc * 8);
        }
        __syncwarp();
#pragma unroll
        for (int kk = 0; kk < KREF_D / 16; kk++)
            wmma::load_matrix_sync(qa[kk], &qs[0][kk * 16], AP_LDK);
        __syncwarp();
    }
    int row = lane / 2, half = lane % 2, t = wq0 + row;
    for (int j = half * 64; j < half * 64 + 64; j++)
        sm.o[warp][row][j] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    size_t kv_end = n + (size_t)min(q0 + AP_Q, c);
    for (size_t r0 = 0; r0 < kv_end; r0 += AP_T) {
        __syncthreads();
        for (int i = threadIdx.x; i < AP_T * 2 * KREF_D / 8; i += 32 * AP_WARPS) {
            int r = i / (2 * KREF_D / 8), cc = i % (2 * KREF_D / 8);
            uint4 v = make_uint4(0, 0, 0, 0);
            if (r0 + r < kv_end)
                v = *reinterpret_cast<const uint4 *>(ap_row(ctx, ctx_hs, n, nw, new_hs, h, r0 + r) + cc * 8);
            __nv_bfloat16 *dst = cc < KREF_D / 8 ? &sm.k[r][cc * 8] : &sm.v[r][(cc - KREF_D / 8) * 8];
            *reinterpret_cast<uint4 *>(dst) = v;
        }
        __syncthreads();
        if (r0 > n + (size_t)wq0 + 15)
            continue;   /* every key of this tile is after the warp's queries */
#pragma unroll
        for (int nt = 0; nt < AP_T / 16; nt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kk = 0; kk < KREF_D / 16; kk++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> kb;
                wmma::load_matrix_sync(kb, &sm.k[nt * 16][kk * 16], AP_LDK);
                wmma::mma_sync(acc, qa[kk], kb, acc);
            }
            wmma::store_matrix_sync(&sm.s[warp][0][nt * 16], acc, AP_LDS, wmma::mem_row_major);
        }
        __syncwarp();
        /* online softmax: lanes 2 row and 2 row + 1 share row `row`, 32 columns each */
        float sv[32], tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            size_t key = r0 + half * 32 + j;
            bool ok = key < kv_end && key <= n + (size_t)t;
            sv[j] = ok ? sm.s[warp][row][half * 32 + j] : -INFINITY;
            tmax = fmaxf(tmax, sv[j]);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        float mn = fmaxf(m, tmax), alpha = mn == -INFINITY ? 1.0f : exp2f(m - mn), sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            float p = sv[j] == -INFINITY ? 0.0f : exp2f(sv[j] - mn);
            sum += p;
            sm.p[warp][row][half * 32 + j] = __float2bfloat16(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum;
        m = mn;
        for (int j = half * 64; j < half * 64 + 64; j++)
            sm.o[warp][row][j] *= alpha;
        __syncwarp();
#pragma unroll
        for (int dt = 0; dt < KREF_D / 16; dt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, &sm.o[warp][0][dt * 16], AP_LDO, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < AP_T / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> pa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> vb;
                wmma::load_matrix_sync(pa, &sm.p[warp][0][kk * 16], AP_LDP);
                wmma::load_matrix_sync(vb, &sm.v[kk * 16][dt * 16], AP_LDK);
                wmma::mma_sync(acc, pa, vb, acc);
            }
            wmma::store_matrix_sync(&sm.o[warp][0][dt * 16], acc, AP_LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    __syncwarp();
    if (t < c) {
        float inv = 1.0f / l;
        __nv_bfloat16 *o = reinterpret_cast<__nv_bfloat16 *>(out) + ((size_t)qh * c + t) * KREF_D;
        for (int j = half * 64; j < half * 64 + 64; j++)
            o[j] = __float2bfloat16(sm.o[warp][row][j] * inv);
    }
}

void kb_attn_prefill(const uint16_t *ctx, size_t ctx_hs, size_t n, const uint16_t *nw, size_t new_hs,
                     const uint16_t *q, int g, int heads, int c, uint16_t *out, cudaStream_t s)
{
    static int attr_set;
    size_t smem = sizeof(ap_smem);
    if (!attr_set) {
        CK(cudaFuncSetAttribute(attn_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        attr_set = 1;
    }
    dim3 grid((c + AP_Q - 1) / AP_Q, heads * g);
    attn_prefill_kernel<<<grid, 32 * AP_WARPS, smem, s>>>(ctx, ctx_hs, n, nw, new_hs, q, g, c, out);
    CKL();
}
