#include "models/hwcat.h"
#include "common/str.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { HWP_NUM, HWP_BYTES, HWP_INT, HWP_TEXT } hwp_type_t;

typedef struct hwp_def {
    const char *key;
    hwp_type_t type;
    const char *unit;
    bool required;
    double min;       /* lower bound */
    bool min_excl;    /* the bound itself is out (bandwidths: > 0) */
    const char *doc;
} hwp_def_t;

#define POS(k, u, d) {k, HWP_NUM, u, true, 0, true, d}
#define NONNEG(k, u, d) {k, HWP_NUM, u, true, 0, false, d}

static const hwp_def_t gpu_defs[] = {
    {"memory", HWP_TEXT, "", true, 0, false, "device memory kind (HBM3e, GDDR6, ...)"},
    {"hbm_bytes", HWP_BYTES, "B", true, 0, true, "device memory capacity"},
    POS("hbm_GBps", "GB/s", "device memory bandwidth (datasheet peak)"),
    {"sm_count", HWP_INT, "SMs", true, 1, false, "streaming multiprocessors"},
    {"l2_bytes", HWP_BYTES, "B", true, 0, true, "last-level (L2) cache capacity"},
    POS("bf16_TFLOPS", "TFLOP/s", "dense BF16 tensor peak"),
    NONNEG("fp8_TFLOPS", "TFLOP/s", "dense FP8 tensor peak (0: unsupported)"),
    {"link", HWP_TEXT, "", true, 0, false, "the GPU's own host link (links.yaml)"},
};

/* Cost-model parameters of a GPU preset (under `costs:`); documented in models/calib.h. */
static const hwp_def_t cost_defs[] = {
    NONNEG("ce_latency_us", "us", "copy-engine setup latency per copy"),
    NONNEG("ce2d_row_ns", "ns", "extra time per row of a 2D copy"),
    NONNEG("ce2d_page_row_ns", "ns", "extra time per row of a 2D copy whose rows lie a host page or more apart"),
    NONNEG("ce2d_copy_us", "us", "time each further 2D copy of a strided chain (one per head and index channel, rows a page apart) adds"),
    NONNEG("ce_b2b_gap_us", "us", "time each further copy of a chain issued back to back adds instead of ce_latency_us"),
    NONNEG("ce_handoff_us", "us", "a kernel waiting on a copy-engine copy starts this long after the copy ends (its completion reaching the SMs), on average"),
    NONNEG("ce_handoff_spread_us", "us", "run.jitter: each hand-off a uniform draw over ce_handoff_us +- half this (the completion seen at a periodic check of varying phase)"),
    NONNEG("cebatch_piece_us", "us", "time per piece of a batched copy"),
    POS("ce_weight", "", "max-min weight of copy-engine flows"),
    NONNEG("gather_latency_us", "us", "fixed time of an SM zero-copy gather kernel"),
    POS("gather_peak_GBps", "GB/s", "SM gather ceiling with enough blocks"),
    POS("gather_block_GBps", "GB/s", "SM gather rate per block in flight"),
    POS("gather_blocks", "blocks", "blocks an SM gather keeps in flight"),
    POS("gather_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, rows spread over 256 MiB"),
    POS("gather_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, rows spread over 512 MiB"),
    POS("gather_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, rows spread over 1 GiB"),
    POS("gather_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, rows spread over 2 GiB"),
    POS("gather_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, rows spread over 4 GiB"),
    POS("gather_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, rows spread over 8 GiB"),
    POS("gather_heads_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, rows read head by head over 256 MiB (a winner fetch)"),
    POS("gather_heads_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, rows read head by head over 512 MiB"),
    POS("gather_heads_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, rows read head by head over 1 GiB"),
    POS("gather_heads_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, rows read head by head over 2 GiB"),
    POS("gather_heads_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, rows read head by head over 4 GiB"),
    POS("gather_heads_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, rows read head by head over 8 GiB"),
    POS("gather_heads_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, rows read head by head over 16 GiB"),
    POS("gather_heads_new_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, rows read head by head over 256 MiB, none read before"),
    POS("gather_heads_new_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, rows read head by head over 512 MiB, none read before"),
    POS("gather_heads_new_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, rows read head by head over 1 GiB, none read before"),
    POS("gather_heads_new_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, rows read head by head over 2 GiB, none read before"),
    POS("gather_heads_new_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, rows read head by head over 4 GiB, none read before"),
    POS("gather_heads_new_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, rows read head by head over 8 GiB, none read before"),
    POS("gather_heads_new_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, rows read head by head over 16 GiB, none read before"),
    POS("gather_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, rows spread over 16 GiB"),
    POS("gather_plane128_rows_Mps_256MiB", "Mrows/s", "SM index fetch row rate, a plane index of 256 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_512MiB", "Mrows/s", "SM index fetch row rate, a plane index of 512 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_640MiB", "Mrows/s", "SM index fetch row rate, a plane index of 640 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_768MiB", "Mrows/s", "SM index fetch row rate, a plane index of 768 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_832MiB", "Mrows/s", "SM index fetch row rate, a plane index of 832 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_896MiB", "Mrows/s", "SM index fetch row rate, a plane index of 896 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_960MiB", "Mrows/s", "SM index fetch row rate, a plane index of 960 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_1024MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1024 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_1152MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1152 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_1280MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1280 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_1536MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1536 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_2048MiB", "Mrows/s", "SM index fetch row rate, a plane index of 2048 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_3072MiB", "Mrows/s", "SM index fetch row rate, a plane index of 3072 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane128_rows_Mps_4096MiB", "Mrows/s", "SM index fetch row rate, a plane index of 4096 MiB swept in passes, 128 B prefixes"),
    POS("gather_plane512_rows_Mps_256MiB", "Mrows/s", "SM index fetch row rate, a plane index of 256 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_512MiB", "Mrows/s", "SM index fetch row rate, a plane index of 512 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_640MiB", "Mrows/s", "SM index fetch row rate, a plane index of 640 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_768MiB", "Mrows/s", "SM index fetch row rate, a plane index of 768 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_832MiB", "Mrows/s", "SM index fetch row rate, a plane index of 832 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_896MiB", "Mrows/s", "SM index fetch row rate, a plane index of 896 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_960MiB", "Mrows/s", "SM index fetch row rate, a plane index of 960 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_1024MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1024 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_1152MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1152 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_1280MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1280 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_1536MiB", "Mrows/s", "SM index fetch row rate, a plane index of 1536 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_2048MiB", "Mrows/s", "SM index fetch row rate, a plane index of 2048 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_3072MiB", "Mrows/s", "SM index fetch row rate, a plane index of 3072 MiB swept in passes, 512 B prefixes"),
    POS("gather_plane512_rows_Mps_4096MiB", "Mrows/s", "SM index fetch row rate, a plane index of 4096 MiB swept in passes, 512 B prefixes"),
    POS("gather_pt_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, rows spread over 256 MiB, their page-table entries still in L2 (a gather re-read back to back, its bytes fewer than the L2 holds)"),
    POS("gather_pt_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, rows spread over 512 MiB, their page-table entries still in L2"),
    POS("gather_pt_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, rows spread over 1 GiB, their page-table entries still in L2"),
    POS("gather_pt_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, rows spread over 2 GiB, their page-table entries still in L2"),
    POS("gather_pt_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, rows spread over 4 GiB, their page-table entries still in L2"),
    POS("gather_pt_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, rows spread over 8 GiB, their page-table entries still in L2"),
    POS("gather_pt_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, rows spread over 16 GiB, their page-table entries still in L2"),
    POS("gather_heads_pt_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, rows read head by head over 256 MiB, their page-table entries still in L2"),
    POS("gather_heads_pt_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, rows read head by head over 512 MiB, their page-table entries still in L2"),
    POS("gather_heads_pt_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, rows read head by head over 1 GiB, their page-table entries still in L2"),
    POS("gather_heads_pt_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, rows read head by head over 2 GiB, their page-table entries still in L2"),
    POS("gather_heads_pt_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, rows read head by head over 4 GiB, their page-table entries still in L2"),
    POS("gather_heads_pt_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, rows read head by head over 8 GiB, their page-table entries still in L2"),
    POS("gather_heads_pt_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, rows read head by head over 16 GiB, their page-table entries still in L2"),
    POS("gather_after_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, rows spread over 256 MiB, after another gather over host memory (a step's SM index fetch)"),
    POS("gather_after_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, rows spread over 512 MiB, after another gather over host memory (a step's SM index fetch)"),
    POS("gather_after_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, rows spread over 1 GiB, after another gather over host memory (a step's SM index fetch)"),
    POS("gather_after_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, rows spread over 2 GiB, after another gather over host memory (a step's SM index fetch)"),
    POS("gather_after_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, rows spread over 4 GiB, after another gather over host memory (a step's SM index fetch)"),
    POS("gather_after_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, rows spread over 8 GiB, after another gather over host memory (a step's SM index fetch)"),
    POS("gather_after_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, rows spread over 16 GiB, after another gather over host memory (a step's SM index fetch)"),
    POS("gather_heads_after_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, rows read head by head over 256 MiB, after another gather over host memory"),
    POS("gather_heads_after_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, rows read head by head over 512 MiB, after another gather over host memory"),
    POS("gather_heads_after_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, rows read head by head over 1 GiB, after another gather over host memory"),
    POS("gather_heads_after_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, rows read head by head over 2 GiB, after another gather over host memory"),
    POS("gather_heads_after_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, rows read head by head over 4 GiB, after another gather over host memory"),
    POS("gather_heads_after_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, rows read head by head over 8 GiB, after another gather over host memory"),
    POS("gather_heads_after_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, rows read head by head over 16 GiB, after another gather over host memory"),
    POS("gather_heads_shuffle_rows_Mps_256MiB", "Mrows/s", "SM gather row rate, the same rows head by head over 256 MiB in a new order each time (a step's winners re-read as top-k hands them over)"),
    POS("gather_heads_shuffle_rows_Mps_512MiB", "Mrows/s", "SM gather row rate, the same rows head by head over 512 MiB in a new order each time (a step's winners re-read as top-k hands them over)"),
    POS("gather_heads_shuffle_rows_Mps_1GiB", "Mrows/s", "SM gather row rate, the same rows head by head over 1 GiB in a new order each time (a step's winners re-read as top-k hands them over)"),
    POS("gather_heads_shuffle_rows_Mps_2GiB", "Mrows/s", "SM gather row rate, the same rows head by head over 2 GiB in a new order each time (a step's winners re-read as top-k hands them over)"),
    POS("gather_heads_shuffle_rows_Mps_4GiB", "Mrows/s", "SM gather row rate, the same rows head by head over 4 GiB in a new order each time (a step's winners re-read as top-k hands them over)"),
    POS("gather_heads_shuffle_rows_Mps_8GiB", "Mrows/s", "SM gather row rate, the same rows head by head over 8 GiB in a new order each time (a step's winners re-read as top-k hands them over)"),
    POS("gather_heads_shuffle_rows_Mps_16GiB", "Mrows/s", "SM gather row rate, the same rows head by head over 16 GiB in a new order each time (a step's winners re-read as top-k hands them over)"),
    POS("gather_warm_rows", "rows", "SM gather re-reading its rows: up to this many keep their address translations cached "
        "(the 256 MiB rate); from twice as many every row pays its region's rate"),
    NONNEG("prefix_gather_latency_us", "us", "fixed time of the SM index fetch (each chunk's plane prefixes)"),
    POS("zc_scan_eff", "", "a plane scan reading its index straight from host memory: its rate against the SM index fetch's for the same prefixes"),
    POS("prefix_gather_eff", "", "the SM index fetch's rate against the SM gather's for the same rows"),
    POS("host_page_bytes", "B", "host memory's page as the GPU translates it (an SM gather's rows on one page share a translation)"),
    POS("gather_weight", "", "max-min weight of SM gather flows"),
    POS("gather_duplex_coef", "", "duplex units an SM-gathered byte consumes"),
    NONNEG("kernel_latency_us", "us", "fixed time of a kernel"),
    POS("kernel_mem_eff", "", "fraction of HBM bandwidth a streaming kernel reaches"),
    POS("kernel_compute_eff", "", "fraction of tensor peak an attention kernel reaches"),
    NONNEG("scan_latency_us", "us", "fixed time of an index scan kernel"),
    POS("scan_mem_eff", "", "fraction of HBM bandwidth an index scan reaches (bit unpacking can bind first)"),
    NONNEG("scan_pertoken_latency_us", "us", "fixed time of a per-token packed scan (Loki, Double Sparsity)"),
    POS("scan_pertoken_mem_eff", "", "fraction of HBM bandwidth a per-token packed scan reaches"),
    NONNEG("scan_sparq_latency_us", "us", "fixed time of SparQ's per-query channel scan"),
    POS("scan_sparq_mem_eff", "", "fraction of HBM bandwidth SparQ's channel scan reaches"),
    NONNEG("scan_fathom_latency_us", "us", "fixed time of Fathom's bit-plane scan"),
    POS("scan_fathom_mem_eff", "", "fraction of HBM bandwidth Fathom's bit-plane scan reaches"),
    NONNEG("scan_hashattn_latency_us", "us", "fixed time of HashAttention's signature scan"),
    POS("scan_hashattn_mem_eff", "", "fraction of HBM bandwidth HashAttention's signature scan reaches"),
    NONNEG("scan_landmark_latency_us", "us", "fixed time of a page-landmark scan"),
    POS("scan_landmark_mem_eff", "", "fraction of HBM bandwidth a page-landmark scan reaches"),
    NONNEG("scan_pertoken_fill_bytes", "B", "a per-token packed scan over fewer index bytes than this (its grid short of the GPU) takes as long as one over this many"),
    NONNEG("scan_pertoken_bit_ns", "ns", "fixed time a per-token packed scan adds per index bit of a token (each block sums its query's channels one after another)"),
    NONNEG("scan_sparq_fill_bytes", "B", "as scan_pertoken_fill_bytes, for SparQ's channel scan"),
    NONNEG("scan_fathom_fill_bytes", "B", "as scan_pertoken_fill_bytes, for Fathom's bit-plane scan"),
    NONNEG("scan_hashattn_fill_bytes", "B", "as scan_pertoken_fill_bytes, for HashAttention's signature scan"),
    NONNEG("scan_landmark_fill_bytes", "B", "as scan_pertoken_fill_bytes, for a page-landmark scan"),
    NONNEG("scan_pertoken_l2_latency_us", "us", "fixed time of a per-token packed scan over an index still in the L2 (just fetched)"),
    POS("scan_pertoken_l2_mem_eff", "", "fraction of HBM bandwidth a per-token packed scan reaches over an index still in the L2"),
    NONNEG("scan_sparq_l2_latency_us", "us", "fixed time of SparQ's channel scan over an index still in the L2 (just fetched)"),
    POS("scan_sparq_l2_mem_eff", "", "fraction of HBM bandwidth SparQ's channel scan reaches over an index still in the L2"),
    NONNEG("scan_fathom_l2_latency_us", "us", "fixed time of Fathom's bit-plane scan over an index still in the L2 (just fetched)"),
    POS("scan_fathom_l2_mem_eff", "", "fraction of HBM bandwidth Fathom's bit-plane scan reaches over an index still in the L2"),
    NONNEG("scan_hashattn_l2_latency_us", "us", "fixed time of HashAttention's signature scan over an index still in the L2 (just fetched)"),
    POS("scan_hashattn_l2_mem_eff", "", "fraction of HBM bandwidth HashAttention's signature scan reaches over an index still in the L2"),
    NONNEG("scan_landmark_l2_latency_us", "us", "fixed time of a page-landmark scan over an index still in the L2 (just fetched)"),
    POS("scan_landmark_l2_mem_eff", "", "fraction of HBM bandwidth a page-landmark scan reaches over an index still in the L2"),
    NONNEG("scan_fathom_v1_latency_us", "us", "fixed time of Fathom's token-per-thread plane scan (plane_scan token_per_thread)"),
    POS("scan_fathom_v1_mem_eff", "", "fraction of HBM bandwidth Fathom's token-per-thread plane scan reaches"),
    NONNEG("scan_fathom_v2_latency_us", "us", "fixed time of Fathom's two-per-thread plane scan (plane_scan two_per_thread)"),
    POS("scan_fathom_v2_mem_eff", "", "fraction of HBM bandwidth Fathom's two-per-thread plane scan reaches"),
    NONNEG("scan_fathom_qh_latency_us", "us", "fixed time of Fathom's scan scoring each query head apart"),
    POS("scan_fathom_qh_mem_eff", "", "fraction of HBM bandwidth Fathom's per-query-head scan reaches"),
    NONNEG("attn_sparse_latency_us", "us", "fixed time of attention over the winners"),
    POS("attn_sparse_mem_eff", "", "fraction of HBM bandwidth attention over the winners reaches"),
    NONNEG("attn_sparse_l2_latency_us", "us", "fixed time of attention over winners still in L2 (just gathered)"),
    POS("attn_sparse_l2_mem_eff", "", "attention over winners still in L2: bytes read per query head (a row once per query head attending it) per second, as a fraction of HBM bandwidth"),
    NONNEG("after_layer_scan_us", "us", "time a decode's index scan adds for running with the layer's GEMMs queued behind it, over its time with nothing behind"),
    NONNEG("after_layer_attn_us", "us", "time a decode's attention over its winners adds for running with the layer's GEMMs queued behind it, over its time with nothing behind"),
    NONNEG("after_layer_topk_us", "us", "time a decode's top-k adds for running with the layer's GEMMs queued behind it, over its time with nothing behind"),
    NONNEG("topk_scores_l2_us", "us", "time a top-k saves over scores its scan has just written to the L2, against its time after an L2 flush (where the scores fit in the L2)"),
    NONNEG("attn_sparse_qh_latency_us", "us", "fixed time of attention over each query head's own winners (HashAttention: g = 1 over 4x the KV heads' rows)"),
    POS("attn_sparse_qh_mem_eff", "", "fraction of HBM bandwidth attention over each query head's own winners reaches"),
    NONNEG("attn_sparse_qh_l2_latency_us", "us", "fixed time of attention over each query head's own winners still in L2"),
    POS("attn_sparse_qh_l2_mem_eff", "", "attention over each query head's own winners still in L2: their bytes per second, as a fraction of HBM bandwidth"),
    NONNEG("attn_combine_latency_us", "us", "fixed time of the kernel merging split-K attention partials"),
    NONNEG("attn_combine_split_ns", "ns", "time per partial the combine walks (each thread walks the splits in turn)"),
    NONNEG("attn_combine_l2_latency_us", "us", "fixed time of the combine when its partials are still in L2"),
    NONNEG("attn_combine_l2_split_ns", "ns", "time per partial the combine walks when the partials are still in L2"),
    POS("attn_split_blocks_per_sm", "blocks", "split-K attention: blocks per SM over all heads the kernel aims for"),
    POS("attn_split_min_rows", "rows", "split-K attention: fewest rows per split"),
    NONNEG("attn_dense_latency_us", "us", "fixed time of dense (split-K) decode attention"),
    POS("attn_dense_mem_eff", "", "fraction of HBM bandwidth dense decode attention reaches"),
    NONNEG("attn_dense_block_us", "us", "dense attention's time per split-K block an SM runs in turn (its setup and partial): blocks/SMs of it"),
    NONNEG("attn_tail_latency_us", "us", "fixed time of attention over the HBM tail"),
    POS("attn_tail_mem_eff", "", "fraction of HBM bandwidth attention over the HBM tail reaches"),
    NONNEG("quantize_latency_us", "us", "fixed time of the 4-bit plane quantiser"),
    POS("quantize_mem_eff", "", "fraction of HBM bandwidth the quantiser reaches"),
    NONNEG("winner_fetch_latency_us", "us", "fixed time of the winners' SM gather with the K/V in HBM"),
    POS("winner_fetch_mem_eff", "", "fraction of HBM bandwidth the winners' gather in HBM reaches (its bytes read and written)"),
    NONNEG("wf_plan_latency_us", "us", "fixed time of the water-filling planner"),
    POS("wf_plan_mem_eff", "", "fraction of HBM bandwidth the planner reaches"),
    NONNEG("topk_latency_us", "us", "fixed time of a top-k kernel, scores from HBM"),
    NONNEG("topk_latency_l2_us", "us", "fixed time of a top-k kernel when all rows' scores fit in L2 (l2_bytes)"),
    NONNEG("topk_elem_ns", "ns", "top-k: time per score of a block's (all passes), scores from HBM"),
    NONNEG("topk_elem_l2_ns", "ns", "top-k: as topk_elem_ns when all rows' scores fit in L2 (l2_bytes)"),
    NONNEG("topk_row_us", "us", "top-k: time per row (its histogram passes), scores from HBM"),
    NONNEG("topk_row_l2_us", "us", "top-k: as topk_row_us when all rows' scores fit in L2 (l2_bytes)"),
    NONNEG("topk_winner_ns", "ns", "top-k: time per warp of 32 scores holding a winner, summed over rows (one atomic each)"),
    NONNEG("event_us", "us", "what an event recorded between two kernels of a stream costs them: every fit-set kernel is timed between two, so a kernel right behind another with none between takes its fixed time less this"),
    NONNEG("topk_winner_row_ns", "ns", "top-k: time per warp holding a winner of one row, the rows side by side (a row's atomics on its one counter queue)"),
    POS("topk_block_elems", "scores", "top-k: scores per block before a row's blocks run out (radix select grid)"),
    POS("topk_blocks_per_sm", "blocks", "top-k: blocks per SM over all rows at most (radix select grid)"),
    NONNEG("gemm_latency_us", "us", "fixed time of a projection, MLP or LM-head GEMM"),
    POS("gemm_mem_eff", "", "fraction of HBM bandwidth a weight-streaming GEMM reaches"),
    POS("gemm_compute_eff", "", "fraction of tensor peak a large GEMM reaches"),
    NONNEG("launch_us", "us", "host CPU time to launch a kernel"),
    NONNEG("copy_launch_us", "us", "host CPU time to issue a copy"),
    NONNEG("graph_launch_us", "us", "host CPU time to launch a CUDA graph of a step"),
    NONNEG("timeslice_us", "us", "separate processes: how long a context keeps the GPU while others wait"),
    NONNEG("ctx_switch_us", "us", "separate processes: GPU idle time of a switch to another context"),
    NONNEG("jitter_us", "us", "run.jitter: an op's p99 exceeds its median by jitter_us + jitter_rel*t"),
    NONNEG("jitter_rel", "", "run.jitter: see jitter_us"),
    NONNEG("jitter_copy_us", "us", "run.jitter: as jitter_us, for copy-engine transfers over the host link"),
    NONNEG("jitter_copy_rel", "", "run.jitter: see jitter_copy_us"),
    NONNEG("jitter_gather_us", "us", "run.jitter: as jitter_us, for kernels whose SMs read host memory over the link (gathers, zero-copy scans)"),
    NONNEG("jitter_gather_rel", "", "run.jitter: see jitter_gather_us"),
    POS("topk_passes", "", "times a top-k kernel reads its scores from HBM"),
    NONNEG("l2_dirty_frac", "", "share of l2_bytes that a layer's writes can leave dirty for the next GEMM to write back (the L2 keeps the latest of its traffic)"),
    POS("l2_writeback_eff", "", "bytes of that write-back per second of time it adds to the GEMM, as a fraction of hbm_GBps (above 1 where it hides in part under the weight reads)"),
    NONNEG("sample_us", "us", "sampling time per step"),
};

/* A link's measured peaks are optional: without them models/platform.c derives them from raw_GBps. */
#define LINKRATE(k, d) {k, HWP_NUM, "GB/s", false, 0, true, d}
static const hwp_def_t link_defs[] = {
    POS("raw_GBps", "GB/s", "raw signalling rate per direction after line coding (datasheet)"),
    LINKRATE("h2d_GBps", "copy-engine host-to-device peak (where measured; a box may set it for its host)"),
    LINKRATE("d2h_GBps", "copy-engine device-to-host peak (where measured; a box may set it for its host)"),
    LINKRATE("duplex_GBps", "both directions at once, total (where measured; a box may set it for its host)"),
};

static const hwp_def_t tier_defs[] = {
    POS("cxl_read_GBps", "GB/s", "tier read bandwidth (device to CPU)"),
    POS("cxl_write_GBps", "GB/s", "tier write bandwidth"),
    {"cxl_bytes", HWP_BYTES, "B", true, 0, true, "tier capacity"},
};

static const hwp_def_t box_defs[] = {
    {"gpu", HWP_TEXT, "", true, 0, false, "GPU preset (gpus.yaml)"},
    {"gpus", HWP_INT, "GPUs", true, 1, false, "GPUs in the box"},
    {"gpus_per_switch", HWP_INT, "GPUs", true, 1, false, "GPUs behind one PCIe switch uplink (1: none)"},
    {"numa_nodes", HWP_INT, "nodes", true, 1, false, "host NUMA nodes"},
    {"host_dram_bytes", HWP_BYTES, "B", true, 0, true, "host DRAM capacity"},
    POS("host_dram_GBps", "GB/s", "host DRAM bandwidth shared by all GPUs"),
    {"hbm_reserve_bytes", HWP_BYTES, "B", true, 0, false, "device memory kept back per GPU"},
    {"link", HWP_TEXT, "", false, 0, false, "replaces the GPU's link (links.yaml); the box may also set h2d_GBps, d2h_GBps, duplex_GBps: its host's figures for its own link"},
    {"tier", HWP_TEXT, "", false, 0, false, "memory tier behind the CPU (tiers.yaml)"},
};

#define NDEF(a) (sizeof a / sizeof a[0])

typedef struct kind_schema {
    const char *file;
    const hwp_def_t *defs;
    size_t n;
} kind_schema_t;

static const kind_schema_t schemas[HW_KIND_COUNT] = {
    [HW_GPU] = {"gpus.yaml", gpu_defs, NDEF(gpu_defs)},
    [HW_LINK] = {"links.yaml", link_defs, NDEF(link_defs)},
    [HW_TIER] = {"tiers.yaml", tier_defs, NDEF(tier_defs)},
    [HW_BOX] = {"boxes.yaml", box_defs, NDEF(box_defs)},
};

typedef struct entry {
    char *name;
    char *base;        /* NULL when none; cleared once resolved */
    char *where;       /* file:line of the entry */
    hw_pset_t ps;
} entry_t;

struct hwcat {
    entry_t *e[HW_KIND_COUNT];
    size_t n[HW_KIND_COUNT];
};

/* ---- small helpers -------------------------------------------------------------------------- */

static void param_clear(hw_param_t *p)
{
    free(p->text);
    free(p->origin);
    p->text = p->origin = NULL;
}

static void pset_free(hw_pset_t *ps)
{
    for (size_t i = 0; i < ps->n; i++) param_clear(&ps->p[i]);
    free(ps->p);
    ps->p = NULL;
    ps->n = 0;
}

const hw_param_t *hw_pset_find(const hw_pset_t *ps, const char *key)
{
    for (size_t i = 0; ps && i < ps->n; i++)
        if (!strcmp(ps->p[i].key, key)) return &ps->p[i];
    return NULL;
}

/* Copies src into a new parameter slot of ps, replacing one with the same key; takes ownership of
 * nothing (strings are duplicated). */
static int pset_put(hw_pset_t *ps, const hw_param_t *src, err_t *e)
{
    hw_param_t copy = *src;
    copy.text = str_dup(src->text);
    copy.origin = str_dup(src->origin);
    if ((src->text && !copy.text) || (src->origin && !copy.origin)) {
        param_clear(&copy);
        return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    }
    for (size_t i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].key, src->key)) {
            param_clear(&ps->p[i]);
            ps->p[i] = copy;
            return ERR_OK;
        }
    hw_param_t *np = realloc(ps->p, (ps->n + 1) * sizeof *np);
    if (!np) {
        param_clear(&copy);
        return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    }
    ps->p = np;
    ps->p[ps->n++] = copy;
    return ERR_OK;
}

/* Removes the parameter called key, if any. */
static void pset_drop(hw_pset_t *ps, const char *key)
{
    for (size_t i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].key, key)) {
            param_clear(&ps->p[i]);
            ps->p[i] = ps->p[--ps->n];
            return;
        }
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

static const hwp_def_t *def_find(const hwp_def_t *defs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(defs[i].key, key)) return &defs[i];
    return NULL;
}

/* Finds key in every schema (overrides may name any parameter). */
static const hwp_def_t *def_find_any(const char *key)
{
    const hwp_def_t *d = def_find(cost_defs, NDEF(cost_defs), key);
    for (int k = 0; !d && k < HW_KIND_COUNT; k++) d = def_find(schemas[k].defs, schemas[k].n, key);
    return d;
}

static const char *nearest(const hwp_def_t *defs, size_t n, const hwp_def_t *defs2, size_t n2,
                           const char *key)
{
    const char *best = NULL;
    size_t bd = 4;
    for (size_t i = 0; i < n + n2; i++) {
        const char *k = i < n ? defs[i].key : defs2[i - n].key;
        size_t d = edit_distance(k, key);
        if (d < bd) { bd = d; best = k; }
    }
    return best;
}

static int unknown_key(err_t *e, const cfg_node_t *at, const char *key, const char *near)
{
    if (near) return cfg_error(e, ERR_INVAL, at, "unknown key '%s' (did you mean '%s'?)", key, near);
    return cfg_error(e, ERR_INVAL, at, "unknown key '%s'", key);
}

/* ---- one parameter from YAML ---------------------------------------------------------------- */

typedef struct pnode {
    const cfg_node_t *value;
    const char *origin;
    double lo, hi, sd;
} pnode_t;

static const cfg_param_t pnode_params[] = {
    {"value", CFG_T_NODE, offsetof(pnode_t, value), NULL, 1, 0, NULL, "the value"},
    {"origin", CFG_T_STRING, offsetof(pnode_t, origin), "", 1, 0, NULL,
     "where the value comes from: measured CSV, fitted profile, datasheet, or assumed"},
    {"lo", CFG_T_DOUBLE, offsetof(pnode_t, lo), "0", 1, 0, NULL, "predictor range, low end"},
    {"hi", CFG_T_DOUBLE, offsetof(pnode_t, hi), "-1", 1, 0, NULL, "predictor range, high end"},
    {"stderr", CFG_T_DOUBLE, offsetof(pnode_t, sd), "0", 0, 1e300, NULL, "standard error"},
};

/* Reads parameter d from node v: a {value, origin, ...} map, or (when origin is optional) a bare
 * scalar. `dflt_origin` is used when the text gives none and origins are optional. */
static int param_read(const hwp_def_t *d, const cfg_node_t *v, bool need_origin, const char *dflt_origin,
                      hw_param_t *out, err_t *e)
{
    pnode_t pn = {0};
    const cfg_node_t *val = v;
    memset(out, 0, sizeof *out);
    out->key = d->key;
    out->unit = d->unit;
    out->lo = 0;
    out->hi = -1;
    if (cfg_kind(v) == CFG_MAP) {
        int rc = cfg_bind(v, pnode_params, NDEF(pnode_params), &pn, e);
        if (rc) return rc;
        if (!pn.value) return cfg_error(e, ERR_INVAL, v, "missing required key 'value'");
        val = pn.value;
        out->lo = pn.lo;
        out->hi = pn.hi;
        out->stderr_v = pn.sd;
    } else if (need_origin) {
        return cfg_error(e, ERR_INVAL, v, "write {value: ..., origin: \"...\"}: every hardware parameter needs an origin");
    }
    if (need_origin && (!pn.origin || !*pn.origin))
        return cfg_error(e, ERR_INVAL, v, "missing required key 'origin'");
    if (cfg_kind(val) != CFG_SCALAR) return cfg_error(e, ERR_INVAL, val, "expected a scalar value");
    int rc = ERR_OK;
    double x = 0;
    switch (d->type) {
    case HWP_TEXT:
        out->value = NAN;
        out->text = str_dup(cfg_str(val));
        if (!out->text) return err_set(e, ERR_NOMEM, "hwcat: out of memory");
        break;
    case HWP_NUM: rc = cfg_double(val, &x, e); break;
    case HWP_BYTES: rc = cfg_bytes(val, &x, e); break;
    case HWP_INT: {
        int64_t i = 0;
        rc = cfg_int64(val, &i, e);
        x = (double)i;
        break;
    }
    }
    if (rc) {
        param_clear(out);
        return rc;
    }
    if (d->type != HWP_TEXT) {
        if (x < d->min || (d->min_excl && x == d->min)) {
            param_clear(out);
            return cfg_error(e, ERR_RANGE, val, "%s must be %s %g, got %g", d->key, d->min_excl ? ">" : ">=",
                             d->min, x);
        }
        out->value = x;
    }
    char where[512];
    if (pn.origin && *pn.origin) {
        out->origin = str_dup(pn.origin);
    } else {
        snprintf(where, sizeof where, "%s at %s:%d", dflt_origin, cfg_file(v), cfg_line(v));
        out->origin = str_dup(where);
    }
    if (!out->origin) {
        param_clear(out);
        return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    }
    return ERR_OK;
}

/* ---- catalogs ------------------------------------------------------------------------------- */

int hwcat_new(hwcat_t **out, err_t *e)
{
    *out = calloc(1, sizeof **out);
    return *out ? ERR_OK : err_set(e, ERR_NOMEM, "hwcat: out of memory");
}

void hwcat_free(hwcat_t *cat)
{
    if (!cat) return;
    for (int k = 0; k < HW_KIND_COUNT; k++) {
        for (size_t i = 0; i < cat->n[k]; i++) {
            free(cat->e[k][i].name);
            free(cat->e[k][i].base);
            free(cat->e[k][i].where);
            pset_free(&cat->e[k][i].ps);
        }
        free(cat->e[k]);
    }
    free(cat);
}

static entry_t *entry_find(const hwcat_t *cat, hw_kind_t kind, const char *name)
{
    for (size_t i = 0; i < cat->n[kind]; i++)
        if (!strcmp(cat->e[kind][i].name, name)) return &cat->e[kind][i];
    return NULL;
}

static int read_entry_map(const cfg_node_t *map, const hwp_def_t *defs, size_t n, bool costs_allowed,
                          entry_t *en, err_t *e)
{
    for (size_t j = 0; j < cfg_size(map); j++) {
        const char *key = cfg_key_at(map, j);
        const cfg_node_t *v = cfg_at(map, j);
        if (costs_allowed && !strcmp(key, "base")) {
            if (cfg_kind(v) != CFG_SCALAR) return cfg_error(e, ERR_INVAL, v, "base: expected a preset name");
            en->base = str_dup(cfg_str(v));
            if (!en->base) return err_set(e, ERR_NOMEM, "hwcat: out of memory");
            continue;
        }
        if (costs_allowed && !strcmp(key, "costs") && defs == gpu_defs) {
            if (cfg_kind(v) != CFG_MAP) return cfg_error(e, ERR_INVAL, v, "costs: expected a map");
            int rc = read_entry_map(v, cost_defs, NDEF(cost_defs), false, en, e);
            if (rc) return rc;
            continue;
        }
        const hwp_def_t *d = def_find(defs, n, key);
        /* a box may carry its host's measured or published link peaks (not the raw rate: the link's) */
        if (!d && defs == box_defs && strcmp(key, "raw_GBps")) d = def_find(link_defs, NDEF(link_defs), key);
        if (!d) return unknown_key(e, v, key, nearest(defs, n, NULL, 0, key));
        hw_param_t p;
        int rc = param_read(d, v, true, "", &p, e);
        if (!rc) rc = pset_put(&en->ps, &p, e);
        param_clear(&p);
        if (rc) return rc;
    }
    return ERR_OK;
}

/* Resolves entry i's base chain (depth-limited against cycles). */
static int resolve_base(hwcat_t *cat, hw_kind_t kind, entry_t *en, int depth, err_t *e)
{
    if (!en->base) return ERR_OK;
    if (depth > 16) return err_set(e, ERR_INVAL, "%s: base chain of '%s' loops", en->where, en->name);
    entry_t *b = entry_find(cat, kind, en->base);
    if (!b || b == en)
        return err_set(e, ERR_NOTFOUND, "%s: key '%s.base': no %s preset '%s'", en->where, en->name,
                       schemas[kind].file, en->base);
    int rc = resolve_base(cat, kind, b, depth + 1, e);
    for (size_t i = 0; !rc && i < b->ps.n; i++) {
        if (hw_pset_find(&en->ps, b->ps.p[i].key)) continue;
        hw_param_t p = b->ps.p[i];
        char buf[1024];
        if (!strncmp(p.origin, "assumed: copied from ", 21)) snprintf(buf, sizeof buf, "%s", p.origin);
        else snprintf(buf, sizeof buf, "assumed: copied from %s (%s)", b->name, p.origin);
        p.origin = buf;
        rc = pset_put(&en->ps, &p, e);
    }
    free(en->base);
    en->base = NULL;
    return rc;
}

static int check_required(const entry_t *en, const hwp_def_t *defs, size_t n, const cfg_node_t *at, err_t *e)
{
    for (size_t i = 0; i < n; i++)
        if (defs[i].required && !hw_pset_find(&en->ps, defs[i].key))
            return cfg_error(e, ERR_INVAL, at, "missing required key '%s' (%s)", defs[i].key, defs[i].doc);
    return ERR_OK;
}

static int load_doc(hwcat_t *cat, hw_kind_t kind, cfg_doc_t *doc, err_t *e)
{
    const cfg_node_t *root = cfg_root(doc);
    if (cfg_kind(root) != CFG_MAP) return cfg_error(e, ERR_INVAL, root, "expected a map of presets");
    size_t first = cat->n[kind], n = cfg_size(root);
    entry_t *ne = realloc(cat->e[kind], (first + n) * sizeof *ne);
    if (!ne) return err_set(e, ERR_NOMEM, "hwcat: out of memory");
    cat->e[kind] = ne;
    int rc = ERR_OK;
    for (size_t j = 0; !rc && j < n; j++) {
        const char *name = cfg_key_at(root, j);
        const cfg_node_t *m = cfg_at(root, j);
        if (entry_find(cat, kind, name)) {
            rc = cfg_error(e, ERR_INVAL, m, "preset '%s' is defined twice", name);
            break;
        }
        if (cfg_kind(m) != CFG_MAP) {
            rc = cfg_error(e, ERR_INVAL, m, "expected a map of parameters");
            break;
        }
        entry_t *en = &cat->e[kind][cat->n[kind]++];
        memset(en, 0, sizeof *en);
        char where[512];
        snprintf(where, sizeof where, "%s:%d:%d", cfg_file(m), cfg_line(m), cfg_col(m));
        en->name = str_dup(name);
        en->where = str_dup(where);
        if (!en->name || !en->where) rc = err_set(e, ERR_NOMEM, "hwcat: out of memory");
        if (!rc) rc = read_entry_map(m, schemas[kind].defs, schemas[kind].n, true, en, e);
    }
    for (size_t i = first; !rc && i < cat->n[kind]; i++)
        rc = resolve_base(cat, kind, &cat->e[kind][i], 0, e);
    for (size_t i = first; !rc && i < cat->n[kind]; i++) {
        const cfg_node_t *m = cfg_get(root, cat->e[kind][i].name);
        /* cost-model parameters are optional here: a fitted profile supplies them (calib.h) */
        rc = check_required(&cat->e[kind][i], schemas[kind].defs, schemas[kind].n, m, e);
    }
    return rc;
}

int hwcat_load_file(hwcat_t *cat, hw_kind_t kind, const char *path, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_file(path, &doc, e);
    if (!rc) rc = load_doc(cat, kind, doc, e);
    cfg_free(doc);
    return rc;
}

int hwcat_load_string(hwcat_t *cat, hw_kind_t kind, const char *name, const char *text, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_string(name, text, strlen(text), &doc, e);
    if (!rc) rc = load_doc(cat, kind, doc, e);
    cfg_free(doc);
    return rc;
}

int hwcat_load(const char *dir, hwcat_t **out, err_t *e)
{
    int rc = hwcat_new(out, e);
    for (int k = 0; !rc && k < HW_KIND_COUNT; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, schemas[k].file);
        rc = hwcat_load_file(*out, (hw_kind_t)k, path, e);
    }
    if (rc) {
        hwcat_free(*out);
        *out = NULL;
    }
    return rc;
}

size_t hwcat_count(const hwcat_t *cat, hw_kind_t kind) { return cat->n[kind]; }

const char *hwcat_name(const hwcat_t *cat, hw_kind_t kind, size_t i)
{
    return i < cat->n[kind] ? cat->e[kind][i].name : NULL;
}

const hw_pset_t *hwcat_entry(const hwcat_t *cat, hw_kind_t kind, const char *name)
{
    const entry_t *en = entry_find(cat, kind, name);
    return en ? &en->ps : NULL;
}

/* ---- resolution ----------------------------------------------------------------------------- */

static int not_found(const hwcat_t *cat, hw_kind_t kind, const char *name, err_t *e)
{
    char list[1024] = "";
    for (size_t i = 0; i < cat->n[kind]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", cat->e[kind][i].name);
    return err_set(e, ERR_NOTFOUND, "no %s preset '%s' (known: %s)", schemas[kind].file, name, list);
}

static int merge_entry(const hwcat_t *cat, hw_kind_t kind, const char *name, hw_pset_t *ps, err_t *e)
{
    const hw_pset_t *src = hwcat_entry(cat, kind, name);
    if (!src) return not_found(cat, kind, name, e);
    for (size_t i = 0; i < src->n; i++) {
        int rc = pset_put(ps, &src->p[i], e);
        if (rc) return rc;
    }
    return ERR_OK;
}

static double num(const hw_pset_t *ps, const char *key)
{
    const hw_param_t *p = hw_pset_find(ps, key);
    return p ? p->value : 0.0;
}

static const char *text(const hw_pset_t *ps, const char *key)
{
    const hw_param_t *p = hw_pset_find(ps, key);
    return p ? p->text : NULL;
}

static int apply_overrides(hw_pset_t *ps, const cfg_node_t *ov, err_t *e)
{
    if (!ov) return ERR_OK;
    if (cfg_kind(ov) != CFG_MAP) return cfg_error(e, ERR_INVAL, ov, "expected a map of parameter overrides");
    for (size_t j = 0; j < cfg_size(ov); j++) {
        const char *key = cfg_key_at(ov, j);
        const cfg_node_t *v = cfg_at(ov, j);
        const hwp_def_t *d = def_find_any(key);
        if (!d) {
            const char *best = nearest(cost_defs, NDEF(cost_defs), gpu_defs, NDEF(gpu_defs), key);
            for (int k = HW_LINK; !best && k < HW_KIND_COUNT; k++)
                best = nearest(schemas[k].defs, schemas[k].n, NULL, 0, key);
            return unknown_key(e, v, key, best);
        }
        hw_param_t p;
        int rc = param_read(d, v, false, "override", &p, e);
        if (!rc) rc = pset_put(ps, &p, e);
        param_clear(&p);
        if (rc) return rc;
    }
    return ERR_OK;
}

static int set_name(char **dst, const char *src, err_t *e)
{
    free(*dst);
    *dst = str_dup(src);
    return (src && !*dst) ? err_set(e, ERR_NOMEM, "hwcat: out of memory") : ERR_OK;
}

int hw_resolve(const hwcat_t *cat, const hw_select_t *sel, const cfg_node_t *overrides, hw_t *out,
               err_t *e)
{
    memset(out, 0, sizeof *out);
    if (!sel->box) return err_set(e, ERR_INVAL, "hardware: no box given");
    hw_pset_t *ps = &out->params;
    int rc = merge_entry(cat, HW_BOX, sel->box, ps, e);
    /* Name choices may come from the overrides too (`gpu: b200`), so apply them once here to read
     * the names, then again after the presets so their values win. */
    if (!rc) rc = apply_overrides(ps, overrides, e);
    const char *gpu = sel->gpu ? sel->gpu : text(ps, "gpu");
    if (!rc) rc = set_name(&out->box, sel->box, e);
    if (!rc) rc = set_name(&out->gpu, gpu, e);
    if (!rc) rc = merge_entry(cat, HW_GPU, out->gpu, ps, e);
    if (!rc) rc = apply_overrides(ps, overrides, e);
    /* The GPU preset's own `link` overwrote the box's: the box's choice wins over the GPU's. */
    const hw_pset_t *boxps = rc ? NULL : hwcat_entry(cat, HW_BOX, sel->box);
    const char *link = sel->link ? sel->link : text(boxps, "link") ? text(boxps, "link") : text(ps, "link");
    if (overrides && cfg_get(overrides, "link") && !sel->link) link = text(ps, "link");
    if (!rc) rc = set_name(&out->link, link, e);
    if (!rc) rc = merge_entry(cat, HW_LINK, out->link, ps, e);
    /* The box's own figures for its link (measured or published on that host) win over the link
     * preset's, unless the link was named: a named link follows the link rule (models/platform.h). */
    bool named = sel->link || (overrides && cfg_get(overrides, "link"));
    const hw_pset_t *linkps = rc ? NULL : hwcat_entry(cat, HW_LINK, out->link);
    for (size_t i = 0; !rc && i < NDEF(link_defs); i++) {
        const hw_param_t *bp = hw_pset_find(boxps, link_defs[i].key);
        if (bp && !named) rc = pset_put(ps, bp, e);
        else if (bp && !hw_pset_find(linkps, link_defs[i].key)) pset_drop(ps, link_defs[i].key);
        out->link_from_box |= bp && !named;
    }
    const char *tier = sel->tier ? sel->tier : text(ps, "tier");
    if (!rc && tier && strcmp(tier, "none")) {
        rc = set_name(&out->tier, tier, e);
        if (!rc) rc = merge_entry(cat, HW_TIER, tier, ps, e);
    }
    if (!rc) rc = apply_overrides(ps, overrides, e);
    if (!rc) rc = set_name(&out->memory, text(ps, "memory"), e);
    if (rc) {
        hw_free(out);
        return rc;
    }
    out->gpus = sel->gpus > 0 ? sel->gpus : (int)num(ps, "gpus");
    out->gpus_per_switch = (int)num(ps, "gpus_per_switch");
    out->numa_nodes = (int)num(ps, "numa_nodes");
    out->sm_count = (int)num(ps, "sm_count");
    out->host_dram_bytes = num(ps, "host_dram_bytes");
    out->host_dram_Bps = num(ps, "host_dram_GBps") * 1e9;
    out->hbm_reserve_bytes = num(ps, "hbm_reserve_bytes");
    out->hbm_bytes = num(ps, "hbm_bytes");
    out->hbm_Bps = num(ps, "hbm_GBps") * 1e9;
    out->bf16_flops = num(ps, "bf16_TFLOPS") * 1e12;
    out->fp8_flops = num(ps, "fp8_TFLOPS") * 1e12;
    out->h2d_Bps = num(ps, "h2d_GBps") * 1e9;
    out->d2h_Bps = num(ps, "d2h_GBps") * 1e9;
    out->duplex_Bps = num(ps, "duplex_GBps") * 1e9; /* 0 without measured peaks: models/platform.c derives them */
    out->cxl_read_Bps = out->tier ? num(ps, "cxl_read_GBps") * 1e9 : 0;
    out->cxl_write_Bps = out->tier ? num(ps, "cxl_write_GBps") * 1e9 : 0;
    out->cxl_bytes = out->tier ? num(ps, "cxl_bytes") : 0;
    if (out->gpus_per_switch > out->gpus) out->gpus_per_switch = out->gpus;
    return ERR_OK;
}

typedef struct hwsel_node {
    const char *box, *gpu, *link, *tier;
    int64_t gpus;
    const cfg_node_t *set;
} hwsel_node_t;

static const cfg_param_t hwsel_params[] = {
    {"box", CFG_T_STRING, offsetof(hwsel_node_t, box), NULL, 1, 0, NULL, "box preset (boxes.yaml)"},
    {"gpu", CFG_T_STRING, offsetof(hwsel_node_t, gpu), "", 1, 0, NULL, "GPU preset replacing the box's"},
    {"link", CFG_T_STRING, offsetof(hwsel_node_t, link), "", 1, 0, NULL, "link preset replacing the GPU's"},
    {"tier", CFG_T_STRING, offsetof(hwsel_node_t, tier), "", 1, 0, NULL, "memory tier preset, or none"},
    {"gpus", CFG_T_INT, offsetof(hwsel_node_t, gpus), "0", 0, 4096, NULL, "GPUs used (0: the box's)"},
    {"set", CFG_T_NODE, offsetof(hwsel_node_t, set), NULL, 1, 0, NULL, "parameter overrides"},
};

int hw_resolve_node(const hwcat_t *cat, const cfg_node_t *node, hw_t *out, err_t *e)
{
    hwsel_node_t h;
    memset(out, 0, sizeof *out);
    int rc = cfg_bind(node, hwsel_params, NDEF(hwsel_params), &h, e);
    if (rc) return rc;
    hw_select_t sel = {h.box, *h.gpu ? h.gpu : NULL, *h.link ? h.link : NULL, *h.tier ? h.tier : NULL,
                       (int)h.gpus};
    return hw_resolve(cat, &sel, h.set, out, e);
}

void hw_free(hw_t *hw)
{
    if (!hw) return;
    free(hw->box);
    free(hw->gpu);
    free(hw->link);
    free(hw->tier);
    free(hw->memory);
    pset_free(&hw->params);
    memset(hw, 0, sizeof *hw);
}

const hw_param_t *hw_param(const hw_t *hw, const char *key) { return hw_pset_find(&hw->params, key); }

const char *hwcat_param_unit(const char *key)
{
    const hwp_def_t *d = def_find_any(key);
    return d ? d->unit : NULL;
}

bool hwcat_param_is_text(const char *key)
{
    const hwp_def_t *d = def_find_any(key);
    return d && d->type == HWP_TEXT;
}

static void describe(FILE *fp, const char *title, const hwp_def_t *d, size_t n, bool checked)
{
    fprintf(fp, "%s:\n", title);
    for (size_t i = 0; i < n; i++)
        fprintf(fp, "  %-24s %-8s %-9s %s %g  %s\n", d[i].key, d[i].unit, checked && d[i].required ? "required" : "optional",
                d[i].min_excl ? ">" : ">=", d[i].min, d[i].doc);
}

void hwcat_describe(FILE *fp)
{
    for (int k = 0; k < HW_KIND_COUNT; k++) describe(fp, schemas[k].file, schemas[k].defs, schemas[k].n, true);
    describe(fp, "gpus.yaml costs (a fitted profile supplies what a preset lacks)", cost_defs, NDEF(cost_defs), false);
}
