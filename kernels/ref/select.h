/* select.h: which tokens each method selects, and what the selection keeps.
 *
 * One KV head: keys k (n rows of d floats, d <= KREF_D), a step's g query
 * heads q (g rows of d floats, 1/sqrt(d) already folded in, as attn.h).
 * Scope: a KV head's methods score the sum of its query heads' scores (as the
 * step does: kernels/NOTES.md) and select one set; per query head, each head
 * scores and selects alone (HashAttention's scope).
 *
 * The methods, as ../shared/published-quality.md defines them:
 *   dense     every token.
 *   exact     top-k of q.k.
 *   pertoken  C = floor(B / 4.25) channels fixed offline (largest
 *             sigma_j^2 * mean q_j^2 over the calibration queries), each a
 *             4-bit code under an fp16 scale per 64-token block (planes.h's
 *             quantiser): 136 bits = 32 channels, 68 = 16.
 *   sparq     r = floor(B / 4.25) channels per query at full depth (4
 *             planes), the r largest e_j = sum_h q_hj^2 sigma_j^2
 *             (wfplan.h, decay 1): 68 bits = r 16.
 *   fathom    per query, the water-filling plan (wfplan.h, decay 4) with the
 *             most plane bits P whose reads P + 0.25 * active channels (a
 *             channel's first plane brings its scale) stay <= B.
 *   landmark  Quest pages of P tokens: per page and channel min and max,
 *             page score sum_j max(q_j min_j, q_j max_j); the ceil(k / P)
 *             best pages, every token in them (2 * 16 * d / P bits a token).
 *   lsh       signed random projections: B hyperplanes r_i ~ N(0, I_d)
 *             (kref_normal(seed, i * d + j)), bit i of a vector x is
 *             r_i . x >= 0 (summed in float over j in order); score =
 *             B - Hamming(sig(k), sig(q)), per query head. Not
 *             HashAttention, whose signature networks are learned.
 * sigma_j^2 is channel j's variance over the n keys given.
 *
 * Metrics of one step, averaged over its query heads h (p_h the softmax of
 * q_h . k over all n tokens, S_h the tokens selected for h):
 *   recall     |S_h ∩ T_h| / k, T_h the exact top-k at the same scope;
 *   kept mass  sum over S_h of p_h;
 *   error      ||o_S - o|| / ||o||, o = sum_i p_hi v_i and o_S the same sum
 *              over S_h renormalised (the attention output over S_h).
 */
#ifndef KREF_SELECT_H
#define KREF_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include "kref.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KREF_SEL_DENSE, KREF_SEL_EXACT, KREF_SEL_PERTOKEN, KREF_SEL_SPARQ,
    KREF_SEL_FATHOM, KREF_SEL_LANDMARK, KREF_SEL_LSH, KREF_SEL_N
} kref_sel_method_t;

/* Bits a channel costs at full depth: 4 planes and its fp16 scale per 64 tokens. */
#define KREF_SEL_CHAN_BITS 4.25
/* Largest LSH signature, bits. */
#define KREF_SEL_LSH_MAX_BITS 1024

typedef struct {
    kref_sel_method_t method;
    int k;               /* tokens to select, 1..n */
    double budget_bits;  /* pertoken, sparq, fathom: index bits read per token (scales
                            included); lsh: signature bits (1..KREF_SEL_LSH_MAX_BITS) */
    int page;            /* landmark: tokens per page (>= 1) */
    int per_head;        /* 0: one set per KV head from summed scores; 1: one per query head */
    uint64_t seed;       /* lsh: the projections */
} kref_sel_cfg_t;

/* One KV head's keys and what the methods derive from them once: the 4-bit
 * codes and block scales, per-channel variances, the pertoken channel ranking,
 * and the last LSH signatures and landmark pages built (rebuilt when asked for
 * other bits, seed or page). */
typedef struct {
    size_t n;
    int d;
    const float *k;      /* n x d, not owned */
    uint8_t *code;       /* n x d 4-bit codes */
    float *scale;        /* ceil(n / 64) x d scales (fp16 values) */
    float sigma2[KREF_D];
    int chan_rank[KREF_D];  /* pertoken channels, best first */
    int lsh_bits;
    uint64_t lsh_seed;
    uint64_t *lsh_sig;   /* n x ceil(lsh_bits / 64) words */
    int lm_page;
    float *lm;           /* npages x 2d: min then max */
    float *lsh_proj;     /* lsh_bits x d projections */
} kref_sel_keys_t;

/* Prepares keys k (n x d, kept by pointer) and calibrates the pertoken
 * channels on nq query rows qcal (nq x d; nq = 0: isotropic queries).
 * Returns 0, -1 when out of memory, -2 when d is outside 1..KREF_D or n < 1. */
int kref_sel_keys_init(kref_sel_keys_t *kk, const float *k, size_t n, int d,
                       const float *qcal, size_t nq);

/* Frees what kref_sel_keys_init and the selections allocated. */
void kref_sel_keys_free(kref_sel_keys_t *kk);

/* The value of (token, chan) read at depth t (0..4) from the 4-bit codes. */
float kref_sel_read(const kref_sel_keys_t *kk, size_t token, int chan, int t);

/* The read plan of sparq or fathom (c->method) for g query rows q: depth[j]
 * (0..4) for j < d, its plane bits and active channels. Contract: c passes
 * kref_sel_select's checks. */
void kref_sel_plan(const kref_sel_keys_t *kk, const float *q, int g, const kref_sel_cfg_t *c,
                   uint8_t *depth, int *planes, int *active);

/* Builds (or keeps, when at least `bits` are built with seed) the keys' LSH
 * signatures; lsh selections of up to that many bits then reuse them, since
 * bit i depends on projection i alone. Returns 0, -1 when out of memory, -2
 * for bits outside 1..KREF_SEL_LSH_MAX_BITS. */
int kref_sel_lsh_build(kref_sel_keys_t *kk, int bits, uint64_t seed);

/* What one selection read: bits per token of its index (scales included),
 * and for sparq and fathom the mean over plans of plane bits and channels. */
typedef struct {
    double read_bits, plane_bits, active;
} kref_sel_info_t;

/* Tokens a selection can hold per set: n for dense, ceil(k/P) * P capped at n
 * for landmark, k otherwise. */
size_t kref_sel_cap(const kref_sel_keys_t *kk, const kref_sel_cfg_t *c);

/* Selects for one step of g query heads q (g x d). sel holds (per_head ? g : 1)
 * sets of kref_sel_cap entries, set s at sel + s * cap, and nsel[s] gets its
 * number of tokens. info may be NULL. Returns 0, -1 when out of memory, -2 for a bad
 * configuration (k outside 1..n, budget below one channel, page < 1, lsh bits
 * outside 1..KREF_SEL_LSH_MAX_BITS). */
int kref_sel_select(kref_sel_keys_t *kk, const float *q, int g, const kref_sel_cfg_t *c,
                    uint32_t *sel, size_t *nsel, kref_sel_info_t *info);

typedef struct {
    double recall, kept_mass, attn_error;
} kref_sel_metrics_t;

/* What a step's selections are measured against, computed once per step:
 * per query head the softmax p over all n tokens and the dense output o, and
 * the exact top-k at the scope (one set, or one per query head). */
typedef struct {
    int g, d, k, per_head;
    size_t n;
    double *p;           /* g x n */
    double *o;           /* g x d */
    uint32_t *top;       /* (per_head ? g : 1) x k */
    const float *v;      /* n x d values, not owned */
} kref_sel_truth_t;

/* The truth of step q (g x d) with values v (n x d, kept by pointer), k
 * (1..n) and the scope. Returns 0, -1 when out of memory, -2 for k outside
 * 1..n. */
int kref_sel_truth(const kref_sel_keys_t *kk, const float *v, const float *q, int g, int k,
                   int per_head, kref_sel_truth_t *tr);

void kref_sel_truth_free(kref_sel_truth_t *tr);

/* The metrics above for a selection made by kref_sel_select (sel, cap, nsel)
 * at the truth's scope. Returns 0 or -1 when out of memory. */
int kref_sel_measure(const kref_sel_truth_t *tr, const uint32_t *sel, size_t cap,
                     const size_t *nsel, kref_sel_metrics_t *m);

#ifdef __cplusplus
}
#endif
#endif
