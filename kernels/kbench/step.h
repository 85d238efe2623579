/* step.h: one offloaded attention layer step per method (plan -> fetch ->
 * scan -> top-k -> winner fetch -> attend, then the layer's dense work), as
 * the step and concurrency suites run it.
 *
 * A layer's data (K/V and every method's index for heads KV heads at up to
 * n_max tokens) is built once on the GPU from synthetic keys and copied to
 * pinned host memory (and kept in HBM when asked). A session at n <= n_max
 * tokens lays its heads out at n-token strides inside that data, so its
 * regions span what a real n-token session's would.
 *
 * K/V layout: interleaved, [head][token][K | V], 512-byte rows (bf16, d = 128);
 * landmark pages of P tokens are P consecutive rows. Tail (dense window) of
 * tail_n tokens per head in HBM.
 */
#ifndef KB_STEP_H
#define KB_STEP_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include "hostmem.h"
#include "gemm.h"

typedef enum {
    KB_M_DENSE, KB_M_FATHOM, KB_M_SPARQ, KB_M_PT136, KB_M_PT68, KB_M_HASH, KB_M_LM8, KB_M_LM16,
    KB_M_N
} kb_method_t;
#define KB_M_ALL ((1u << KB_M_N) - 1)

typedef enum { KB_P_HOST, KB_P_HBM, KB_P_HBM_ALL } kb_place_t;

/* Method name as written in variant/method columns; placement name. */
const char *kb_method_name(kb_method_t m);
const char *kb_place_name(kb_place_t p);
/* Index bits read per token per KV head (the budget), or -1 (dense). */
int kb_method_bits(kb_method_t m, int qgroup);

/* One layer's data. */
typedef struct {
    size_t n_max;
    int heads, qgroup, T;
    kb_hostbuf_t hb;               /* host arena holding everything below */
    uint8_t *h[KB_M_N];            /* host copy per method's index (KB_M_DENSE: the K/V) */
    uint8_t *d[KB_M_N];            /* HBM copies, or NULL */
    size_t per_head[KB_M_N];       /* bytes per head at n_max (for strides at n: see below) */
} kb_layer_data_t;

/* Build the layer's data for heads KV heads (qgroup query heads each) at
 * n_max tokens, chunk T; keep HBM copies when keep_device. Returns 0, or -1
 * when host memory could not be pinned. */
int kb_layer_data_new(kb_layer_data_t *D, size_t n_max, int heads, int qgroup, int T,
                      int keep_device, uint64_t seed);
/* kb_layer_data_new with only the indexes of the methods in the bit set methods (1 << kb_method_t;
 * KB_M_ALL: every one), and the K/V: a decode's 36 layers at long contexts fit the host then. A
 * session of a method left out is fatal. */
int kb_layer_data_new_for(kb_layer_data_t *D, size_t n_max, int heads, int qgroup, int T,
                          int keep_device, uint64_t seed, unsigned methods);
void kb_layer_data_free(kb_layer_data_t *D);

/* Step configuration. */
typedef struct {
    kb_method_t method;
    kb_place_t place;
    size_t n;                      /* context tokens, multiple of T */
    int k;                         /* selected tokens per head (rows) */
    int fetch_ce2d;                /* Fathom/SparQ host index: 2D copies instead of SM fetch */
    int tail_n;                    /* dense window tokens per head in HBM */
    int batch;                     /* tokens of the layer's GEMMs */
    int slot;                      /* where the session lies in the layer's data: slot s starts s x heads
                                    * x (bytes per head at n) into each region, so sessions of
                                    * different slots read disjoint regions; (slot + 1) n <= n_max */
} kb_step_cfg_t;

#define KB_STEP_MAX_STAGES 8

typedef struct kb_session kb_session_t;

/* A session over data D with configuration c, sharing gemm (may be NULL:
 * no dense work). Fatal on device allocation failure. */
kb_session_t *kb_session_new(const kb_layer_data_t *D, const kb_step_cfg_t *c, kb_gemm_t *gemm);
void kb_session_free(kb_session_t *S);

/* Number of stages of the session's step and the op name of each. */
int kb_session_stages(const kb_session_t *S, const char **ops);

/* Enqueue one layer step on s; when ev is not NULL, record ev[i] after stage
 * i (ev has kb_session_stages entries). The Fathom/SparQ 2D-copy fetch
 * synchronises s (the host needs the plan); every other path only enqueues. */
void kb_session_step(kb_session_t *S, cudaStream_t s, cudaEvent_t *ev);

/* Bytes moved over the link by one step (index fetch + winners or K/V). */
double kb_session_link_bytes(const kb_session_t *S);

#endif
