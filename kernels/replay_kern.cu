/* replay_kern.cu: the kernels of `kbench replay`'s hbm and compute ops (docs/replay.md).
 *
 * hbm: bytes read once from HBM, a few written: floor bytes / HBM bandwidth (integer adds are
 * far below the issue rate). compute: flops / 2 FP32 FMAs in independent chains, one word per
 * block written: floor flops / the FP32 FMA rate. Both spread over the grid the caller gives
 * (every SM), and both leave a result the host can check (the *_expect functions).
 */
#include <math.h>
#include "kbench/kb.h"
#include "kern.h"

#define RK_THREADS 256
#define RK_UNROLL 4                       /* 16-byte loads in flight per thread */
#define RK_CHAINS 4                       /* independent FMA chains per thread */
#define RK_FMA_M 0.9990234375f            /* 1 - 2^-10: x <- m x + c has fixed point 1 exactly */
#define RK_FMA_C 0.0009765625f            /* 2^-10 */

/* The block's threads' sums of v, added in thread 0 (shared scratch of RK_THREADS / 32). */
template <typename T>
__device__ T block_sum(T v, T *scratch)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0)
        scratch[threadIdx.x / 32] = v;
    __syncthreads();
    T s = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < RK_THREADS / 32; w++)
            s += scratch[w];
    return s;
}

/* The sum of the buffer's 32-bit words (16-byte loads, grid-stride, RK_UNROLL in flight) and of
 * its ntail bytes past the last 16-byte word, one by one; block b writes its part to out[b]. */
__global__ void hbm_reduce_kernel(const uint4 *__restrict__ buf, uint64_t n16, const uint8_t *tail,
                                  int ntail, unsigned long long *out)
{
    __shared__ unsigned long long scratch[RK_THREADS / 32];
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long acc = 0;
    for (uint64_t i0 = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i0 < n16; i0 += RK_UNROLL * stride) {
        uint4 v[RK_UNROLL];
#pragma unroll
        for (int u = 0; u < RK_UNROLL; u++) {
            uint64_t i = i0 + u * stride;
            v[u] = i < n16 ? buf[i] : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < RK_UNROLL; u++)
            acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
    }
    if (blockIdx.x == 0 && (int)threadIdx.x < ntail)
        acc += tail[threadIdx.x];
    unsigned long long s = block_sum(acc, scratch);
    if (threadIdx.x == 0)
        out[blockIdx.x] = s;
}

void kb_hbm_reduce(const void *buf, uint64_t bytes, unsigned long long *out, int blocks, cudaStream_t s)
{
    uint64_t n16 = bytes / 16;
    hbm_reduce_kernel<<<blocks, RK_THREADS, 0, s>>>((const uint4 *)buf, n16, (const uint8_t *)buf + n16 * 16,
                                                    (int)(bytes % 16), out);
    CKL();
}

unsigned long long kb_hbm_reduce_expect(uint64_t bytes, uint8_t fill)
{
    unsigned long long word = fill * 0x01010101ull;
    return (unsigned long long)(bytes / 16) * 4 * word + (bytes % 16) * fill;
}

/* FMAs of thread t when `flops` are spread over `threads`: per each, one more for t < rem. */
static void fma_split(uint64_t flops, uint64_t threads, uint64_t *per, uint64_t *rem)
{
    uint64_t fmas = flops / 2 + flops % 2;
    *per = fmas / threads;
    *rem = fmas % threads;
}

/* Thread t runs n = per + (t < rem) FMAs as RK_CHAINS chains x <- m x + c from x = 2 (chain j
 * gets n / RK_CHAINS, one more for j < n % RK_CHAINS), so chain j ends at 1 + m^k after k FMAs;
 * block b writes the sum of its threads' chains to out[b]. m and c are arguments: nothing folds. */
__global__ void fma_kernel(uint64_t per, uint64_t rem, float m, float c, float *out)
{
    __shared__ float scratch[RK_THREADS / 32];
    uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    uint64_t n = per + (t < rem ? 1 : 0);
    float x[RK_CHAINS];
#pragma unroll
    for (int j = 0; j < RK_CHAINS; j++)
        x[j] = 2.0f;
#pragma unroll 8
    for (uint64_t k = n / RK_CHAINS; k > 0; k--) {
#pragma unroll
        for (int j = 0; j < RK_CHAINS; j++)
            x[j] = fmaf(x[j], m, c);
    }
#pragma unroll
    for (int j = 0; j < RK_CHAINS; j++)
        if ((uint64_t)j < n % RK_CHAINS)
            x[j] = fmaf(x[j], m, c);
    float v = 0;
#pragma unroll
    for (int j = 0; j < RK_CHAINS; j++)
        v += x[j];
    float s = block_sum(v, scratch);
    if (threadIdx.x == 0)
        out[blockIdx.x] = s;
}

void kb_fma(uint64_t flops, int blocks, float *out, cudaStream_t s)
{
    uint64_t per, rem;
    fma_split(flops, (uint64_t)blocks * RK_THREADS, &per, &rem);
    fma_kernel<<<blocks, RK_THREADS, 0, s>>>(per, rem, RK_FMA_M, RK_FMA_C, out);
    CKL();
}

double kb_fma_expect(uint64_t flops, int blocks, int b)
{
    uint64_t per, rem;
    fma_split(flops, (uint64_t)blocks * RK_THREADS, &per, &rem);
    double sum = 0;
    for (int i = 0; i < RK_THREADS; i++) {
        uint64_t t = (uint64_t)b * RK_THREADS + i, n = per + (t < rem ? 1 : 0);
        for (int j = 0; j < RK_CHAINS; j++)
            sum += 1 + pow((double)RK_FMA_M, (double)(n / RK_CHAINS + ((uint64_t)j < n % RK_CHAINS)));
    }
    return sum;
}

__global__ void fill_u16_kernel(uint16_t *p, uint64_t n, uint16_t v)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

void kb_fill_u16(uint16_t *p, uint64_t n, uint16_t v, int blocks, cudaStream_t s)
{
    fill_u16_kernel<<<blocks, RK_THREADS, 0, s>>>(p, n, v);
    CKL();
}
