/* suite_kernels.h: the kernels suite's shared pieces: its context, the timing of any callable,
 * the row writers and the sections (suite_kernels_*.cu, one concept each) that kb_suite_kernels
 * runs in order. */
#ifndef KB_SUITE_KERNELS_H
#define KB_SUITE_KERNELS_H

#include "kb.h"
#include "step.h"
#include "ref/planes.h"

#define HEADS 8
#define QGROUP 4
#define T_DEFAULT 1024

typedef struct {
    const kb_opts_t *o;
    kb_csv_t *csv;
    cudaStream_t s;
    kb_layer_data_t D;
    const size_t *ns;
    int nn;
} ks_t;

/* Time any callable f(stream) with kb_time_around; prep(stream) runs before each repetition,
 * outside the timed events, and post(stream) is queued behind them, untimed (kb_time_around
 * passes one context to all three). */
template <class F, class P, class Q> struct timed_t {
    F f;
    P prep;
    Q post;
};
template <class C> static void timed_fn(void *p, cudaStream_t s) { ((C *)p)->f(s); }
template <class C> static void timed_prep(void *p, cudaStream_t s) { ((C *)p)->prep(s); }
template <class C> static void timed_post(void *p, cudaStream_t s) { ((C *)p)->post(s); }
template <class F, class P, class Q> static kb_stats_t time_around(ks_t *K, F f, double est_us, P prep, Q post)
{
    kb_timing_t tm = kb_timing_for(est_us, K->o->quick);
    typedef timed_t<F, P, Q> C;
    C c = {f, prep, post};
    return kb_time_around(timed_fn<C>, timed_prep<C>, timed_post<C>, &c, K->s, &tm);
}
template <class F, class P> static kb_stats_t time_it_prep(ks_t *K, F f, double est_us, P prep)
{
    return time_around(K, f, est_us, prep, [](cudaStream_t) {});
}
/* The common prep: an L2 flush for cold rows, or nothing. */
template <class F> static kb_stats_t time_it(ks_t *K, F f, double est_us, int flush)
{
    return time_it_prep(K, f, est_us, [flush](cudaStream_t s) {
        if (flush)
            kb_l2_flush(s);
    });
}

/* The suite's query sets: 4 query heads of each of the 8 KV heads (q), their sum per KV head
 * (qsum), the synthetic keys' channel variances (sigma2) and a device plan per head. */
typedef struct {
    float *q, *qsum, *sigma2;
    kref_plan_t *plan;
} queries_t;

/* Write row r with timings st and ops operations per repetition (per_s; ops <= 0: empty). */
void ks_put(ks_t *K, kb_row_t *r, kb_stats_t st, double ops);
/* cudaMalloc of bytes, filled with 0x3b (fatal on failure). */
void *ks_dalloc(size_t bytes);
/* A scan's row: variant v over n tokens of HEADS heads, index at place ("hbm", "host"). */
kb_row_t ks_scan_row(const char *v, size_t n, int bits, const char *place, const char *layout, double bytes);
/* The row of sparse attention over k winners of `heads` heads with g queries each, in HBM. */
kb_row_t ks_attn_row(int k, int heads, int g, const char *layout);

/* The sections, in the order of a full run. */
void ks_sec_launch(ks_t *K);                         /* suite_kernels_launch.cu */
void ks_sec_quantize_flush(ks_t *K);                 /* suite_kernels_index.cu */
void ks_sec_wf_plan(ks_t *K, queries_t *Q);
void ks_sec_index_fetch(ks_t *K, queries_t *Q);
void ks_sec_scans(ks_t *K, queries_t *Q);
void ks_sec_topk(ks_t *K);                           /* suite_kernels_topk.cu */
void ks_sec_winners_attn(ks_t *K, queries_t *Q);     /* suite_kernels_attn.cu */
void ks_sec_winners_hbm(ks_t *K);
void ks_sec_dense_attn(ks_t *K, queries_t *Q);
void ks_sec_gemm(ks_t *K);                           /* suite_kernels_gemm.cu */
void ks_sec_after_layer(ks_t *K, queries_t *Q);      /* suite_kernels_after.cu */

#endif
