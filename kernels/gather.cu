/* gather.cu: SM gather of fixed-size pieces (zero-copy from host, or HBM).
 *
 * Two numbers: bytes = 2 * npieces * piece (read + write); arithmetic is
 * negligible. Reading pinned host memory, the floor is the link: npieces *
 * piece / (copy-engine peak).
 */
#include "kbench/kb.h"
#include "kern.h"
#include "ref/kref.h"

/* Thread i of the grid handles 16-byte segments i, i + stride, ...; segment
 * i is byte (i & seg_mask) * 16 of piece i >> seg_shift. UNROLL segments are
 * loaded before any is stored. */
template <int UNROLL>
__global__ void gather_kernel(uint4 *__restrict__ dst, const char *__restrict__ src,
                              const uint64_t *__restrict__ off, uint64_t nseg, int seg_shift)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t mask = (1ull << seg_shift) - 1;
    for (uint64_t i0 = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i0 < nseg;
         i0 += stride * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            uint64_t i = i0 + u * stride;
            if (i < nseg)
                v[u] = __ldcs((const uint4 *)(src + off[i >> seg_shift] + (i & mask) * 16));
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            uint64_t i = i0 + u * stride;
            if (i < nseg)
                dst[i] = v[u];
        }
    }
}

void kb_gather(int variant, void *dst, const void *src, const uint64_t *off, size_t npieces,
               size_t piece_bytes, int blocks, cudaStream_t s)
{
    int shift = 0;
    while ((16ull << shift) < piece_bytes)
        shift++;
    uint64_t nseg = (uint64_t)npieces << shift;
    if (variant == 1)
        gather_kernel<1><<<blocks, 256, 0, s>>>((uint4 *)dst, (const char *)src, off, nseg, shift);
    else
        gather_kernel<4><<<blocks, 256, 0, s>>>((uint4 *)dst, (const char *)src, off, nseg, shift);
    CKL();
}

__global__ void rand_offsets_kernel(uint64_t *off, size_t n, uint64_t slots, uint64_t piece,
                                    uint64_t base, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        off[i] = base + kref_mix64(seed * 0x9e3779b97f4a7c15ull + i) % slots * piece;
}

void kb_rand_offsets(uint64_t *off, size_t npieces, size_t region_bytes, size_t piece_bytes,
                     uint64_t base, uint64_t seed, cudaStream_t s)
{
    rand_offsets_kernel<<<256, 256, 0, s>>>(off, npieces, region_bytes / piece_bytes, piece_bytes,
                                            base, seed);
    CKL();
}

__global__ void winner_offsets_kernel(uint64_t *off, const uint32_t *idx, int rows, int group,
                                      int k, int npiece, uint64_t head_stride, uint64_t row_stride,
                                      uint64_t piece_stride)
{
    int total = rows * k * npiece;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int p = i % npiece, rk = i / npiece, r = rk / k;
        off[i] = (r / group) * head_stride + idx[rk] * row_stride + p * piece_stride;
    }
}

void kb_winner_offsets(uint64_t *off, const uint32_t *idx, int rows, int group, int k, int npiece,
                       uint64_t head_stride, uint64_t row_stride, uint64_t piece_stride,
                       cudaStream_t s)
{
    int total = rows * k * npiece;
    winner_offsets_kernel<<<(total + 255) / 256, 256, 0, s>>>(off, idx, rows, group, k, npiece,
                                                              head_stride, row_stride,
                                                              piece_stride);
    CKL();
}
