/* kern.h: launchers of the CUDA kernels, one .cu per kernel family.
 *
 * Every launcher only enqueues work on the given stream (no host
 * synchronisation, so each can be captured in a CUDA graph) unless its
 * comment says otherwise. Pointers are device pointers or GPU-mapped host
 * pointers (hostmem.h); "host or HBM" means either works.
 */
#ifndef KB_KERN_H
#define KB_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "ref/planes.h"

/* ---- gather.cu: SM gather of fixed-size pieces ---------------------------- */

/* dst[i * piece .. +piece) = src + off[i], i < npieces. piece_bytes a power of
 * two >= 16, every off[i] a multiple of 16. blocks: blocks of 256 threads in
 * flight. variant 1: one 16-byte load per thread per step; variant 2: four
 * independent loads in flight per thread. src host or HBM. */
void kb_gather(int variant, void *dst, const void *src, const uint64_t *off, size_t npieces,
               size_t piece_bytes, int blocks, cudaStream_t s);

/* off[i] = (random piece slot in [0, region / piece)) * piece + base, from seed. */
void kb_rand_offsets(uint64_t *off, size_t npieces, size_t region_bytes, size_t piece_bytes,
                     uint64_t base, uint64_t seed, cudaStream_t s);

/* Byte offsets of winner pieces from selected token (or page) indices.
 * idx[r * k + i] (r < rows) becomes npiece pieces at byte offset
 * (r / group) * head_stride + idx * row_stride + p * piece_stride, written to
 * off[(r * k + i) * npiece + p]; group > 1 maps query-head rows to KV heads. */
void kb_winner_offsets(uint64_t *off, const uint32_t *idx, int rows, int group, int k, int npiece,
                       uint64_t head_stride, uint64_t row_stride, uint64_t piece_stride,
                       cudaStream_t s);

/* ---- quantize.cu: keys -> Fathom planes ------------------------------------ */

/* Quantise n tokens of heads KV heads (keys bf16, head h's token t at
 * k + (h * head_stride + t * KREF_D)) into the planes layout, head h's
 * index at out + h * out_head_stride bytes (n / T chunks). n % T == 0. */
void kb_quantize(const uint16_t *k, size_t head_stride, int heads, size_t n, int T,
                 uint8_t *out, size_t out_head_stride, cudaStream_t s);

/* ---- wfplan.cu: per-query read plans ---------------------------------------- */

/* For each of heads KV heads: gains from its g query heads (q + h * g * KREF_D)
 * and sigma2 (KREF_D floats), ranked with decay 4 (Fathom) or 1 (SparQ), the
 * first budget plane bits taken; plan[h] for chunk size T. */
void kb_wf_plan(const float *q, int g, const float *sigma2, int heads, int budget, int decay,
                int T, kref_plan_t *plan, cudaStream_t s);

/* ---- fetch.cu: plane-prefix fetch ------------------------------------------- */

/* SM zero-copy fetch of the plane prefixes named by plan[h] from a full index
 * (head h at src + h * src_head_stride, host or HBM) into the compact layout
 * (head h at dst + h * dst_head_stride; active channel a, chunk c at
 * n/T * cum[a] + c * kref_prefix_bytes). blocks of 256 threads. */
void kb_fetch_prefix_sm(const uint8_t *src, size_t src_head_stride, uint8_t *dst,
                        size_t dst_head_stride, const kref_plan_t *plan, int heads, size_t n,
                        int T, int blocks, cudaStream_t s);

/* ---- scan_planes.cu: Fathom / SparQ bit-plane scan --------------------------- */

/* Scores of heads KV heads over n tokens, qg query heads each: query row g of
 * KV head h at q + (h * qg + g) * KREF_D, its scores at scores + (h * qg + g) * n.
 * The index of head h is at idx + h * head_stride (host or HBM), in the
 * compact layout of plan[h] when compact != 0, else the full layout.
 * variant 1: one token per thread; 2: two per thread (needs T >= 256 and
 * n % 256 == 0, else variant 1 runs); 3: 32 per lane, channels spread over
 * warps (needs qg == 1 and T % 1024 == 0, else variant 2 runs). */
void kb_scan_planes(int variant, const uint8_t *idx, size_t head_stride, int compact,
                    const kref_plan_t *plan, const float *q, int qg, int heads, size_t n, int T,
                    float *scores, cudaStream_t s);

/* ---- scan_other.cu: per-token, Hamming and landmark scans -------------------- */

/* Per-token index with C channels (scans.h), head h at idx + h * head_stride;
 * qc + h * C the query on those channels; scores[h * n + i]. */
void kb_scan_pertoken(const uint8_t *idx, size_t head_stride, int C, const float *qc, int heads,
                      size_t n, float *scores, cudaStream_t s);
/* Hamming scan: sig[qh * n + i], qsig[qh], scores[qh * n + i], qheads query heads. */
void kb_scan_hash(const uint32_t *sig, const uint32_t *qsig, int qheads, size_t n, float *scores,
                  cudaStream_t s);
/* Landmark scan: pages of head h at lm + h * head_stride, npages each; q + h *
 * KREF_D; scores[h * npages + p]. */
void kb_scan_landmark(const uint8_t *lm, size_t head_stride, const float *q, int heads,
                      size_t npages, float *scores, cudaStream_t s);
/* Build per-token and landmark indexes from keys on the GPU (used to make
 * realistic index contents for the step suite; same output as scans.h). */
void kb_build_pertoken(const uint16_t *k, size_t head_stride, int heads, size_t n, const int *chans,
                       int C, uint8_t *out, size_t out_head_stride, cudaStream_t s);
void kb_build_landmark(const uint16_t *k, size_t head_stride, int heads, size_t n, int P,
                       uint8_t *out, size_t out_head_stride, cudaStream_t s);

/* ---- topk.cu: radix-select top-k ---------------------------------------------- */

/* Scratch for kb_topk over up to max_rows rows of max_keys scores in all (rows * n); kb_topk
 * stops kbench (kb_die) when a call needs more. */
typedef struct kb_topk_ws kb_topk_ws_t;
kb_topk_ws_t *kb_topk_ws_new(int max_rows, size_t max_keys);
void kb_topk_ws_free(kb_topk_ws_t *w);
/* For each row r < rows: the k largest of x[r * n .. +n) into idx[r * k ..]
 * (unordered). 1 <= k <= n. */
void kb_topk(const float *x, int rows, size_t n, int k, uint32_t *idx, kb_topk_ws_t *w,
             cudaStream_t s);

/* ---- attn.cu: split-K decode attention ---------------------------------------- */

/* Rows of KV head h: key row r at kv + h * head_stride + r * row_stride (bf16
 * elements), value at the same + v_off. g query heads per KV head (1 or 4),
 * q + h * g * KREF_D (already scaled by 1/sqrt(d)). Rows [0, n) are split in
 * nsplit parts, written as partials part[(h * total_splits + split0 + s) * g + j].
 * kv host or HBM. */
void kb_attn_partial(const uint16_t *kv, size_t head_stride, size_t row_stride, size_t v_off,
                     const float *q, int g, int heads, size_t n, int nsplit, int split0,
                     int total_splits, void *part, cudaStream_t s);
/* out[(h * g + j) * KREF_D ..] from total_splits partials per (h, j). */
void kb_attn_combine(const void *part, int g, int heads, int total_splits, float *out,
                     cudaStream_t s);
/* Bytes of partials for heads * total_splits * g. */
size_t kb_attn_part_bytes(int heads, int total_splits, int g);
/* A split count that fills the GPU for n rows over heads KV heads. */
int kb_attn_splits(size_t n, int heads);

/* ---- attn_prefill.cu: a prefill chunk's causal attention ----------------------- */

/* out[(qh * c + t) * KREF_D ..] (bf16) = softmax(q_t K^T) V for the chunk's c queries of each of
 * heads * g query heads (q bf16, query head qh's query t at q + (qh * c + t) * KREF_D, scaled by
 * log2(e) / sqrt(d): the softmax is taken in base 2) over the rows of KV head qh / g: n earlier rows
 * (row r at ctx + h * ctx_hs + r * 2 * KREF_D, its value KREF_D further), then the chunk's own
 * rows up to t (row u at nw + h * new_hs + u * 2 * KREF_D). All in HBM; dynamic shared memory
 * about 95 KB a block. */
void kb_attn_prefill(const uint16_t *ctx, size_t ctx_hs, size_t n, const uint16_t *nw, size_t new_hs,
                     const uint16_t *q, int g, int heads, int c, uint16_t *out, cudaStream_t s);

/* ---- replay_kern.cu: kbench replay's hbm, compute and gemm ops ------------------- */

/* Reads the first `bytes` of buf (HBM, 16-byte aligned) once and writes the sum of its 32-bit words
 * (the bytes past the last 16-byte word added one by one) as one part per block to out[0..blocks):
 * blocks of 256 threads, every SM. */
void kb_hbm_reduce(const void *buf, uint64_t bytes, unsigned long long *out, int blocks, cudaStream_t s);
/* What kb_hbm_reduce's parts add up to (mod 2^64) over `bytes` bytes all equal to fill. */
unsigned long long kb_hbm_reduce_expect(uint64_t bytes, uint8_t fill);
/* ceil(flops / 2) FP32 FMAs spread evenly over blocks of 256 threads (independent chains, no memory
 * traffic but one float per block, written to out[0..blocks)). */
void kb_fma(uint64_t flops, int blocks, float *out, cudaStream_t s);
/* The float kb_fma(flops, blocks) writes to out[b], computed on the host in double. */
double kb_fma_expect(uint64_t flops, int blocks, int b);
/* Sets p[0..n) to v (a gemm op's BF16 inputs, before its check). */
void kb_fill_u16(uint16_t *p, uint64_t n, uint16_t v, int blocks, cudaStream_t s);

#endif
