/* footprint — host DRAM (or CXL tier) and HBM a session and a box need, for any placement and dtype.
 *
 * Per session at n context tokens (n_off = n − max(W, n mod T) offloaded): host holds K/V (n_off·L·H·row
 * bytes; K as 4-bit keys with k_from_planes) and the host part of the index (stored bits·L·H/8 per
 * token of n_off, or of a contiguous index's reservation max_context − W where larger, minus what the
 * placement keeps in HBM); HBM holds the index part placed there, the bf16 dense window or the
 * open chunk's buffer of T tokens, the larger (max(W, T)·L·H·2·d·2), and the buffers of one step (index and winner or K/V buffers, `prefetch`+1 layers
 * deep, and one layer's scores). Weights (bf16 or fp8) are per GPU, shared by its sessions. */
#ifndef ODSIM_MODELS_FOOTPRINT_H
#define ODSIM_MODELS_FOOTPRINT_H

#include "common/err.h"
#include "models/hwcat.h"
#include "models/method.h"

/* The share of usable HBM the weights must leave free (prefill activations, workspaces, the CUDA
 * context: not counted otherwise). Origin: assumed, not measured. */
#define FOOTPRINT_MIN_FREE_HBM 0.10

typedef struct footprint {
    double host_kv_bytes, host_index_bytes, host_bytes;   /* per session, in the method's tier */
    double hbm_index_bytes, hbm_tail_bytes, hbm_buffer_bytes, hbm_bytes;  /* per session */
    double hbm_weight_bytes;                              /* per GPU */
} footprint_t;

/* The footprint of one session at `context` tokens. */
void footprint_session(const method_t *mt, uint64_t context, footprint_t *out);

typedef struct footprint_total {
    int sessions, sessions_per_gpu;
    double host_bytes, host_capacity_bytes;     /* all sessions, against host DRAM or the tier */
    double hbm_bytes_per_gpu, hbm_capacity_bytes; /* weights + the busiest GPU's sessions, against
                                                   * hbm_bytes − hbm_reserve_bytes */
} footprint_total_t;

/* Totals for `sessions` sessions of `context` tokens spread evenly over hw's GPUs. Errors:
 * ERR_INFEASIBLE with the numbers (what is needed, what there is, per session and in total) when
 * host memory or a GPU's HBM does not suffice; ERR_INVAL (tier cxl without a tier in hw). */
int footprint_check(const method_t *mt, const hw_t *hw, uint64_t context, int sessions, footprint_total_t *out,
                    err_t *e);

#endif
