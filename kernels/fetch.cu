/* fetch.cu: SM zero-copy plane-prefix fetch (Fathom / SparQ index_fetch).
 *
 * The compact destination of a head is contiguous, so the grid walks it in
 * 16-byte segments (4-byte when T < 512) and maps each back to its source:
 * active channel a by a search of the plan's offsets, then chunk and byte.
 * Two numbers: bytes = chunks * chunk_prefix_bytes per head, read over the
 * link and written to HBM; the floor is those bytes over the link's peak.
 */
#include "kbench/kb.h"
#include "kern.h"

#define FETCH_UNROLL 4

template <typename SEG>
__global__ void fetch_kernel1(const uint8_t *__restrict__ src, size_t src_head_stride,
                              uint8_t *__restrict__ dst, size_t dst_head_stride,
                              const kref_plan_t *__restrict__ plans, uint32_t chunks, int T)
{
    __shared__ uint32_t start[KREF_D + 1], pb[KREF_D], soff[KREF_D];
    int h = blockIdx.y;
    const kref_plan_t *p = plans + h;
    int na = p->n_active;
    for (int a = threadIdx.x; a < na; a += blockDim.x) {
        start[a] = chunks * p->cum[a];
        pb[a] = (uint32_t)kref_prefix_bytes(T, p->depth[a]);
        soff[a] = p->chan[a] * (uint32_t)kref_chan_bytes(T);
    }
    if (threadIdx.x == 0)
        start[na] = chunks * (uint32_t)p->chunk_prefix_bytes;
    __syncthreads();
    const uint8_t *s = src + h * src_head_stride;
    uint8_t *d = dst + h * dst_head_stride;
    uint32_t nseg = start[na] / sizeof(SEG), stride = gridDim.x * blockDim.x;
    size_t chunk_b = kref_chunk_bytes(T);
    for (uint32_t i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < nseg; i0 += stride * FETCH_UNROLL) {
        SEG v[FETCH_UNROLL];
#pragma unroll
        for (int u = 0; u < FETCH_UNROLL; u++) {
            uint32_t i = i0 + u * stride;
            if (i < nseg) {
                uint32_t o = i * (uint32_t)sizeof(SEG);
                int lo = 0, hi = na - 1;              /* last a with start[a] <= o */
                while (lo < hi) {
                    int mid = (lo + hi + 1) / 2;
                    if (start[mid] <= o)
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                uint32_t r = o - start[lo], c = r / pb[lo], w = r - c * pb[lo];
                v[u] = *(const SEG *)(s + c * chunk_b + soff[lo] + w);
            }
        }
#pragma unroll
        for (int u = 0; u < FETCH_UNROLL; u++) {
            uint32_t i = i0 + u * stride;
            if (i < nseg)
                ((SEG *)d)[i] = v[u];
        }
    }
}

void kb_fetch_prefix_sm(const uint8_t *src, size_t src_head_stride, uint8_t *dst,
                        size_t dst_head_stride, const kref_plan_t *plan, int heads, size_t n,
                        int T, int blocks, cudaStream_t s)
{
    dim3 grid((blocks + heads - 1) / heads, heads);
    uint32_t chunks = (uint32_t)(n / T);
    if (T % 512 == 0)
        fetch_kernel1<uint4><<<grid, 256, 0, s>>>(src, src_head_stride, dst, dst_head_stride, plan,
                                                  chunks, T);
    else
        fetch_kernel1<uint32_t><<<grid, 256, 0, s>>>(src, src_head_stride, dst, dst_head_stride,
                                                     plan, chunks, T);
    CKL();
}
