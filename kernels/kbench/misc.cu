/* misc.cu: synthetic data on the GPU and an empty kernel. */
#include "kb.h"
#include "misc.h"
#include "ref/kref.h"

__global__ void make_keys_kernel(uint16_t *k, size_t head_stride, size_t row_stride, size_t n,
                                 uint64_t seed)
{
    int h = blockIdx.y;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n * KREF_D;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t t = e / KREF_D;
        int j = (int)(e % KREF_D);
        k[h * head_stride + t * row_stride + j] = kref_f32_to_bf16(kref_key(seed + h, t, j));
    }
}

void kb_make_keys(uint16_t *k, size_t head_stride, size_t row_stride, int heads, size_t n,
                  uint64_t seed, cudaStream_t s)
{
    dim3 grid(4 * kb_sm_count(), heads);
    make_keys_kernel<<<grid, 256, 0, s>>>(k, head_stride, row_stride, n, seed);
    CKL();
}

__global__ void make_normal_kernel(float *x, size_t n, float scale, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = scale * kref_normal(seed, i);
}

void kb_make_normal(float *x, size_t n, float scale, uint64_t seed, cudaStream_t s)
{
    make_normal_kernel<<<4 * kb_sm_count(), 256, 0, s>>>(x, n, scale, seed);
    CKL();
}

__global__ void empty_kernel(void) {}

void kb_empty_launch(cudaStream_t s)
{
    empty_kernel<<<1, 32, 0, s>>>();
}

/* One thread waiting on the GPU's global timer (nanoseconds, unaffected by clock changes). */
__global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
}

void kb_spin(double us, cudaStream_t s)
{
    spin_kernel<<<1, 1, 0, s>>>((unsigned long long)(us * 1e3));
    CKL();
}

void kb_fill_spin(double us, cudaStream_t s)
{
    spin_kernel<<<4 * kb_sm_count(), 256, 0, s>>>((unsigned long long)(us * 1e3));
    CKL();
}
