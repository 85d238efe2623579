/* quantize.cu: bf16 keys -> Fathom bit planes with fp16 scales (planes.h).
 *
 * Two numbers per KV head and 64-token block: bytes = 64 * 256 read + 17 * 64
 * * 128 / 8 written; about 10 operations per element. Memory-bound on paper,
 * but the work per decode step is one block of 64 tokens per KV head and
 * layer, so launch latency dominates in practice.
 */
#include "kbench/kb.h"
#include "kern.h"
#include "ref/planes.h"

#define QZ_WARPS 16

/* One block per (64-token block, KV head): the block's keys go to shared
 * memory (coalesced), then each warp quantises every 16th channel: lanes are
 * tokens, the scale comes from a warp max, the planes from ballots. */
__global__ void quantize_kernel1(const uint16_t *__restrict__ k, size_t head_stride, size_t n,
                                 int T, uint8_t *__restrict__ out, size_t out_head_stride)
{
    __shared__ float x[KREF_SCALE_TOKENS][KREF_D + 1];
    int h = blockIdx.y;
    size_t blk = blockIdx.x, t0 = blk * KREF_SCALE_TOKENS;
    const uint16_t *src = k + h * head_stride + t0 * KREF_D;
    for (int i = threadIdx.x; i < KREF_SCALE_TOKENS * KREF_D; i += blockDim.x)
        x[i / KREF_D][i % KREF_D] = kref_bf16_to_f32(src[i]);
    __syncthreads();
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    size_t c = t0 / T;
    int b = (int)(t0 % T) / KREF_SCALE_TOKENS;
    uint8_t *chunk = out + h * out_head_stride + c * kref_chunk_bytes(T);
    for (int j = warp; j < KREF_D; j += QZ_WARPS) {
        float v0 = x[lane][j], v1 = x[lane + 32][j];
        float m = fmaxf(fabsf(v0), fabsf(v1));
        for (int o = 16; o > 0; o /= 2)
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        uint16_t sh = kref_quant_scale(m);
        float s = kref_f16_to_f32(sh);
        int u0 = kref_quant_code(v0, s), u1 = kref_quant_code(v1, s);
        uint8_t *piece = chunk + j * kref_chan_bytes(T);
        for (int p = 0; p < KREF_QBITS; p++) {
            unsigned w0 = __ballot_sync(0xffffffffu, (u0 >> (3 - p)) & 1);
            unsigned w1 = __ballot_sync(0xffffffffu, (u1 >> (3 - p)) & 1);
            if (lane == 0) {
                uint32_t *pl = (uint32_t *)(piece + T / 32 + p * (T / 8) + b * 8);
                pl[0] = w0;
                pl[1] = w1;
            }
        }
        if (lane == 0)
            ((uint16_t *)piece)[b] = sh;
    }
}

void kb_quantize(const uint16_t *k, size_t head_stride, int heads, size_t n, int T, uint8_t *out,
                 size_t out_head_stride, cudaStream_t s)
{
    dim3 grid((unsigned)(n / KREF_SCALE_TOKENS), heads);
    quantize_kernel1<<<grid, 32 * QZ_WARPS, 0, s>>>(k, head_stride, n, T, out, out_head_stride);
    CKL();
}
