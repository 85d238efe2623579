/* misc.h: the harness's helper kernels (misc.cu): synthetic data, an empty kernel and spins. */
#ifndef KB_MISC_H
#define KB_MISC_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

/* Synthetic keys (ref/kref.h kref_key) as bf16 rows of KREF_D, rows [0, n) of
 * heads heads at k + h * head_stride + t * row_stride (elements); seed per head. */
void kb_make_keys(uint16_t *k, size_t head_stride, size_t row_stride, int heads, size_t n,
                  uint64_t seed, cudaStream_t s);
/* n floats of N(0, scale^2) noise. */
void kb_make_normal(float *x, size_t n, float scale, uint64_t seed, cudaStream_t s);
/* An empty kernel launch (launch overhead measurements). */
void kb_empty_launch(cudaStream_t s);
/* Keeps stream s busy for about us microseconds (one thread spinning on the global timer). */
void kb_spin(double us, cudaStream_t s);
/* Every thread of 4 blocks of 256 per SM waiting us microseconds: a kernel that fills the GPU. */
void kb_fill_spin(double us, cudaStream_t s);

#endif
