/* method — attention methods of offloaded decode: configuration, validation, and the closed-form
 * byte counts of one layer of a decode step or prefill chunk (DESIGN.md "Methods"), generic over the
 * methods' tables of operations (models/method_ops.h; one module each in models/methods/).
 *
 * Notation: n context tokens, T per flushed chunk, W of them in the dense HBM window (sinks, local
 * window, open chunk; default 0), n_off = n − max(W, n mod T) offloaded tokens (the open chunk is
 * dense whatever W); per layer H KV heads, G query heads per KV head, head
 * dim d, K/V element bytes e; k selected tokens. Budget = index bits read per token per KV head,
 * scales included. Per layer and KV head, a decode step reads:
 *   dense     2·d·e·n_off bytes of K and V
 *   pertoken  b·n_off/8 (one run; b = budget, presets 136 and 68), then k rows
 *   sparq     r channels at full depth of the 4-bit planes: r·(n_off/2 + n_off/32) (r = budget/4.25),
 *             or bf16 channel-major: r·2·n_off (r = budget/16), then k rows
 *   fathom    Σ_c b_c·n_off/8 + active·n_off/32, b_c from the planner (models/fathom.h) at the
 *             plane-bit budget whose mean reads meet the budget, then k rows
 *   hashattn  4·n_off per query head (32·G bits per KV head), then u·k rows (per-query-head top-k)
 *   landmark  (n_off/P)·2·d·e (page min and max keys), then k/P pages of P·2·d·e bytes
 * Rows are K and V of d·e bytes each (winner K from 4-bit keys: d/2 + d/32 bytes). With per-query-
 * head selection a KV head fetches the union of G sets: u·k rows, u ∈ [1, G] the union factor.
 *
 * Layouts: `split` (K and V apart: 2 pieces per row), `interleaved` (K and V of a row together),
 * `token` (all KV heads of a token together: needs `shared` selection, one for all KV heads),
 * `page` (pages of P tokens: needs page selection, i.e. `landmark`). Index placement: `host`, `hbm`,
 * `layers:L` (the first L layers' index in HBM) or `layers:a-b,c` (those layers), `planes:t` (sparq/fathom: the first t planes of
 * every channel and the scales in HBM).
 *
 * Index layout (channel-major indexes: sparq, fathom), apart from the flush's chunk of T tokens:
 * `contiguous` (default) keeps each (layer, KV head, channel, plane) in one run reserved for the
 * session's maximum context (max_context; the footprint counts the reservation), so a decode reads
 * per KV head one piece of n_off/8 bytes per plane read and one of n_off/32 per channel's scales, and
 * a flush writes T/8 bytes into every plane and T/32 into every channel's scales (one strided 2D
 * device-to-host copy per layer and KV head, a row per plane and per scale run); `chunked` keeps the
 * planes channel-major within each chunk, so a plane-prefix read is n_off/T pieces of b_c·T/8 bytes
 * per channel and a flush one contiguous piece per KV head. The open chunk (n mod T tokens not yet
 * flushed) stays in HBM and is attended densely, within the window where W holds it:
 * n_off = n − max(W, n mod T). */
#ifndef ODSIM_MODELS_METHOD_H
#define ODSIM_MODELS_METHOD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "common/cfg.h"
#include "common/err.h"
#include "models/fathom.h"
#include "models/llm.h"

typedef enum { SELECT_KV_HEAD = 0, SELECT_QUERY_HEAD, SELECT_SHARED, SELECT_GROUP, SELECT_DEFAULT } method_select_t;
extern const char *const method_select_names[];  /* NULL-terminated, in method_select_t order */
typedef enum { LAYOUT_SPLIT = 0, LAYOUT_INTERLEAVED, LAYOUT_TOKEN, LAYOUT_PAGE, LAYOUT_DEFAULT } method_layout_t;
typedef enum { STORE_4BIT = 0, STORE_BF16 } method_store_t;
extern const char *const method_store_names[];  /* NULL-terminated, in method_store_t order */
typedef enum { FETCH_SM = 0, FETCH_CE, FETCH_AUTO } method_fetch_t;
typedef enum { INDEX_CONTIGUOUS = 0, INDEX_CHUNKED, INDEX_LAYOUT_DEFAULT } method_index_layout_t;
extern const char *const method_index_layout_names[];  /* NULL-terminated, in method_index_layout_t order */
typedef enum { PREFILL_EXACT = 0, PREFILL_SPARSE } method_prefill_t;
typedef enum { TIER_DRAM = 0, TIER_CXL } method_tier_t;
typedef enum { PLACE_HOST = 0, PLACE_HBM, PLACE_LAYERS, PLACE_PLANES } method_place_t;
typedef enum { KV_HOST = 0, KV_HBM } method_kv_place_t;

/* A method as a scenario or the command line gives it (cfg_bind; see method_cfg_describe). */
/* The most key channels a key_variances list may give (head_dim of the catalog's models ≤ 256). */
#define METHOD_MAX_CHANNELS 512
/* The longest context a plan is built for: 4Gi tokens, where a transfer's pieces (uint32) still hold
 * every method's count exactly (the most at 4Gi: about 1.1e9, Fathom's and SparQ's index fetch). */
#define METHOD_MAX_CONTEXT_TOKENS (1ull << 32)

typedef struct method_cfg {
    int method;             /* kind: the method's place in the registry (models/method_ops.h) */
    double budget_bits;     /* index bits read per token per KV head; 0: the method's default */
    int64_t k;              /* selected tokens per KV head (or per query head) */
    int64_t page;           /* P, landmark pages */
    int64_t chunk;          /* T, tokens per flushed chunk (multiple of 64) */
    int64_t window;         /* W, dense HBM tokens */
    int select;             /* method_select_t */
    double union_factor;    /* u for per-query-head selection; 0: (1 + G)/2 */
    int layout;             /* method_layout_t */
    const char *placement;  /* host | hbm | layers:L | layers:a-b,c,... | planes:t */
    const char *plan;       /* a user plan file (models/uplan.h; "" none): read by the study, not the method */
    int kv_dtype, weight_dtype; /* llm_dtype_t */
    bool k_from_planes;     /* winner keys from 4-bit keys instead of bf16/fp8 rows */
    int store;              /* sparq: method_store_t */
    int fetch;              /* winner fetch: method_fetch_t */
    int winners;            /* 0: repeat (mostly the last step's, as a re-read finds them), 1: new each step */
    int index_fetch;        /* index fetch from host: method_fetch_t (ce: contiguous runs, 2D copies of a
                             * chunked plane index, or one batched copy of a contiguous one's plane runs;
                             * auto: for per-query planes the faster of sm and ce for the layout (the
                             * provider decides per layer), else the method's own path) */
    int index_layout;       /* method_index_layout_t, resolved (default: contiguous) */
    int64_t max_context;    /* contiguous index: tokens each run is reserved for (0: the context) */
    int prefill;            /* method_prefill_t */
    double prefill_union;   /* sparse prefill: rows per KV head per chunk, in units of k */
    int64_t prefetch;       /* index/KV buffers per layer ahead of use (≥ 1: prefetch a layer early) */
    int tier;               /* method_tier_t: where host-side K/V and index live */
    int kv_placement;       /* method_kv_place_t: K/V offloaded to the host, or kept whole in HBM */
    int plane_scan;         /* Fathom's plane-scan kernel: 0 coalesced, 1 token per thread, 2 two per thread */
    int64_t plane_bits;     /* Fathom: plane bits per plan (0: from the budget) */
    const cfg_node_t *key_variances_node; /* bound, then read into key_variances (NULL after method_cfg_bind) */
    int n_key_variances;    /* Fathom's key-channel variances given (0: the default profile) */
    double key_variances[METHOD_MAX_CHANNELS];
    int64_t seed;           /* Fathom statistics seed */
    int64_t queries;        /* Fathom statistics queries */
} method_cfg_t;

/* Binds node (may be NULL: all defaults) into *out. Errors name file:line:col and key. */
int method_cfg_bind(const cfg_node_t *node, method_cfg_t *out, err_t *e);
/* Writes the method parameters' table (key, type, default, range, meaning). */
void method_cfg_describe(FILE *fp);

typedef struct method method_t;

/* Resolves cfg against model m (copied): checks the layout against the selection, the placement
 * against the index, the budget against the method, and runs the Fathom planner's statistics.
 * Errors: ERR_INVAL (with the reason and the values), ERR_RANGE, ERR_NOMEM. */
int method_new(const method_cfg_t *cfg, const llm_t *m, method_t **out, err_t *e);
void method_free(method_t *mt);

const method_cfg_t *method_cfg(const method_t *mt);
/* The method's name (its key in scenarios, quality tables and cost parameters). */
const char *method_name(const method_t *mt);
const llm_t *method_llm(const method_t *mt);
/* The form of the scan when it is not the method's usual one, as models/cost.h names them: "v1" or
 * "v2" (Fathom's token-per-thread and two-per-thread plane scans), "qh" (Fathom scoring each query
 * head apart); else NULL. */
const char *method_scan_form(const method_t *mt);

/* The resolved selection and layout (defaults filled in), union factor, and budget. */
method_select_t method_select(const method_t *mt);
method_layout_t method_layout(const method_t *mt);
double method_union(const method_t *mt);
/* The budget the method was asked for (or its default): what published quality points name.
 * Fathom's plans read method_budget_bits on average, at most this. */
double method_budget_asked(const method_t *mt);
double method_budget_bits(const method_t *mt);
/* Index bits stored per token per KV head (scales included), and read per decode step. */
double method_stored_bits(const method_t *mt);
/* The Fathom planner's statistics at the chosen plane budget (NULL for other methods). */
const fathom_stats_t *method_fathom(const method_t *mt);

/* One layer of one plan, per session, all KV heads together; bytes. */
typedef struct method_layer {
    double n_off;                 /* offloaded tokens */
    double index_host_bytes;      /* index read from host */
    double index_hbm_bytes;       /* index read where it is resident in HBM */
    double index_pieces;          /* pieces of the host read */
    double index_region_bytes;    /* host bytes the index of this layer spans (a contiguous index: its
                                   * reservation) */
    double kv_host_bytes;         /* dense/exact: all offloaded K and V */
    double kv_pieces;
    double winner_rows;           /* rows fetched, all KV heads (a page counts P rows) */
    double winner_host_bytes;
    double winner_pieces;
    double kv_region_bytes;       /* host bytes the layer's K/V of this session span */
    double scores;                /* scores the scan writes and top-k reads (a prefill chunk pools its
                                   * queries into one score per token and selection set) */
    double score_rows;            /* selection sets: rows of scores top-k selects over */
    double select_k;              /* scores top-k keeps of each row (pages for landmark) */
    double tail_hbm_bytes;        /* dense window (bf16) read by the tail attention */
    double attn_hbm_bytes;        /* K/V the main attention reads from HBM */
    double attn_flops, tail_flops, scan_flops;
    double flush_bytes;           /* device→host bytes of completed chunks (K/V and index) */
    double flush_pieces;          /* their pieces: K/V pieces and index pieces or rows */
    double flush_index_bytes;     /* contiguous index: the index's part of flush_bytes, written as */
    double flush_index_rows;      /* rows of T/8 (a plane) or T/32 bytes (a channel's scales) */
    double flush_index_copies;    /* strided 2D copies, one per KV head (0: chunked, one piece each) */
    double quantize_bytes;        /* HBM bytes the quantiser reads and writes */
    bool hbm_index;               /* the whole index of this layer is in HBM */
} method_layer_t;

/* Fills *out for layer `layer` of a plan with `context` tokens before it and `new_tokens` in it
 * (decode: 1; prefill: the chunk), `prefill` choosing the prefill formulas. */
void method_layer(const method_t *mt, int layer, uint64_t context, uint32_t new_tokens, bool prefill,
                  method_layer_t *out);

/* Tokens flushed by a plan: whole chunks of T completed by its new tokens. */
uint64_t method_flushed_tokens(const method_t *mt, uint64_t context, uint32_t new_tokens);

/* Offloaded tokens at `context` (less the window W or the open chunk, the larger), and the tokens a
 * host index's runs span per layer and KV head (a contiguous index: its reservation, at least n_off). */
double method_offloaded_tokens(const method_t *mt, uint64_t context);
double method_index_span_tokens(const method_t *mt, double n_off);
/* Tokens attended densely from HBM at `context` before a plan's new tokens: the window W or the
 * open chunk (context mod T), the larger. */
double method_dense_tokens(const method_t *mt, uint64_t context);

/* Bytes of K/V (per token per layer per KV head) as stored on the host: K (bf16/fp8 row, or 4-bit
 * key when k_from_planes) + V. */
double method_kv_row_bytes(const method_t *mt);

/* Host and HBM index bytes per token per KV head for layer `layer`. */
void method_index_split(const method_t *mt, int layer, double *host_bits, double *hbm_bits);

#endif
