/* cost_params — every cost-model parameter declared once: its name (unit in the name), unit, lower
 * bound and meaning, and the field of cost_t it fills with its scale to SI units (BY_NAME: read by
 * name by the form that builds it, as a kernel kind's or a scan family's pair). The ten row-rate
 * curves are declared once each (COST_ROW_CURVES and COST_PLANE_CURVES in models/cost.h), their
 * knots expanded from one list of knots. A GPU preset's `costs:` and a profile's `params:` are
 * checked against this table (models/hwcat.c), cost_init reads it, `odsim params hardware` prints
 * it; a profile holds fitted values, validation/seeds.yaml the fitter's starting values. */
#include "models/cost_params.h"

#include <stddef.h>
#include <string.h>
#include "models/cost.h"

const double cost_row_knot_bytes[COST_ROW_KNOTS] = {268435456.0,  536870912.0,  1073741824.0, 2147483648.0,
                                                     4294967296.0, 8589934592.0, 17179869184.0};
#define NAME(t, k, name, d) name,
#define CURVE(t, prefix, d) {COST_ROW_KNOTS_OF(NAME, t, prefix, d)},
const char *const cost_row_names[COST_ROW_TABLES][COST_ROW_KNOTS] = {COST_ROW_CURVES(CURVE)};
#undef CURVE

const double cost_plane_knot_bytes[COST_PLANE_KNOTS] = {
    256.0 * 1048576, 512.0 * 1048576, 640.0 * 1048576,  768.0 * 1048576,  832.0 * 1048576,
    896.0 * 1048576, 960.0 * 1048576, 1024.0 * 1048576, 1152.0 * 1048576, 1280.0 * 1048576,
    1536.0 * 1048576, 2048.0 * 1048576, 3072.0 * 1048576, 4096.0 * 1048576};
const double cost_plane_piece_bytes[COST_PLANE_PIECES] = {128.0, 512.0};
#define CURVE(p, prefix, d) {COST_PLANE_KNOTS_OF(NAME, p, prefix, d)},
const char *const cost_plane_names[COST_PLANE_PIECES][COST_PLANE_KNOTS] = {COST_PLANE_CURVES(CURVE)};
#undef CURVE
#undef NAME

#define ROW_CURVE_ENTRY(t, prefix, d) {prefix, COST_ROW_KNOTS, cost_row_names[t]},
#define PLANE_CURVE_ENTRY(p, prefix, d) {prefix, COST_PLANE_KNOTS, cost_plane_names[p]},
const cost_curve_t cost_curves[] = {COST_ROW_CURVES(ROW_CURVE_ENTRY) COST_PLANE_CURVES(PLANE_CURVE_ENTRY)};
const size_t cost_curve_count = sizeof cost_curves / sizeof cost_curves[0];

/* The curve's name: its knots' prefix without the trailing '_'. */
static size_t name_len(const cost_curve_t *cv) { return strlen(cv->prefix) - 1; }

const cost_curve_t *cost_curve_find(const char *name)
{
    for (size_t i = 0; i < cost_curve_count; i++)
        if (strlen(name) == name_len(&cost_curves[i]) && !strncmp(name, cost_curves[i].prefix, name_len(&cost_curves[i])))
            return &cost_curves[i];
    return NULL;
}

const cost_curve_t *cost_curve_of(const char *key, int *knot)
{
    for (size_t i = 0; i < cost_curve_count; i++)
        for (int k = 0; k < cost_curves[i].n_knots; k++)
            if (!strcmp(key, cost_curves[i].knots[k])) {
                if (knot) *knot = k;
                return &cost_curves[i];
            }
    return NULL;
}

int cost_curve_knot(const cost_curve_t *cv, const char *label)
{
    for (int k = 0; k < cv->n_knots; k++)
        if (!strcmp(cv->knots[k] + strlen(cv->prefix), label)) return k;
    return -1;
}

#define FIELD(f, s) offsetof(cost_t, f), s
#define BY_NAME -1, 0
#define POS(k, u, binding, d) {k, HWP_NUM, u, true, 0, true, d, binding}
#define NONNEG(k, u, binding, d) {k, HWP_NUM, u, true, 0, false, d, binding}
#define ROW_KNOT(t, k, name, d) POS(name, "Mrows/s", FIELD(gather_rows_ps[t][k], 1e6), "SM gather row rate, " d),
#define ROW_CURVE(t, prefix, d) COST_ROW_KNOTS_OF(ROW_KNOT, t, prefix, d)
#define PLANE_KNOT(p, k, name, d) POS(name, "Mrows/s", FIELD(plane_rows_ps[p][k], 1e6), "SM index fetch row rate, " d),
#define PLANE_CURVE(p, prefix, d) COST_PLANE_KNOTS_OF(PLANE_KNOT, p, prefix, d)

const hw_param_def_t cost_param_defs[] = {
    NONNEG("ce_latency_us", "us", FIELD(ce_latency_s, 1e-6),
           "copy-engine setup latency per copy"),
    NONNEG("ce2d_row_ns", "ns", FIELD(ce2d_row_s, 1e-9),
           "extra time per row of a 2D copy"),
    NONNEG("ce2d_page_row_ns", "ns", FIELD(ce2d_page_row_s, 1e-9),
           "extra time per row of a 2D copy whose rows lie a host page or more apart"),
    NONNEG("ce2d_copy_us", "us", FIELD(ce2d_copy_s, 1e-6),
           "time each further 2D copy of a strided chain (one per head and index channel, rows a page apart) adds"),
    NONNEG("ce_b2b_gap_us", "us", FIELD(ce_b2b_gap_s, 1e-6),
           "time each further copy of a chain issued back to back adds instead of ce_latency_us"),
    NONNEG("ce_handoff_us", "us", FIELD(ce_handoff_s, 1e-6),
           "a kernel waiting on a copy-engine copy starts this long after the copy ends (its completion reaching the SMs), on average"),
    NONNEG("ce_handoff_spread_us", "us", FIELD(ce_handoff_spread_s, 1e-6),
           "run.jitter: each hand-off a uniform draw over ce_handoff_us +- half this (the completion seen at a periodic check of varying phase)"),
    NONNEG("cebatch_piece_us", "us", FIELD(cebatch_piece_s, 1e-6),
           "time per piece of a batched copy"),
    POS("ce_weight", "", FIELD(ce_weight, 1),
           "max-min weight of copy-engine flows"),
    NONNEG("gather_latency_us", "us", FIELD(gather_latency_s, 1e-6),
           "fixed time of an SM zero-copy gather kernel"),
    POS("gather_peak_GBps", "GB/s", FIELD(gather_peak_Bps, 1e9),
           "SM gather ceiling with enough blocks"),
    POS("gather_block_GBps", "GB/s", FIELD(gather_block_Bps, 1e9),
           "SM gather rate per block in flight"),
    POS("gather_blocks", "blocks", FIELD(gather_blocks, 1),
           "blocks an SM gather keeps in flight"),
    COST_ROW_CURVES(ROW_CURVE)
    COST_PLANE_CURVES(PLANE_CURVE)
    POS("gather_warm_rows", "rows", FIELD(gather_warm_rows, 1),
           "SM gather re-reading its rows: up to this many keep their address translations cached (the 256 MiB rate); from twice as many every row pays its region's rate"),
    NONNEG("prefix_gather_latency_us", "us", FIELD(prefix_latency_s, 1e-6),
           "fixed time of the SM index fetch (each chunk's plane prefixes)"),
    POS("zc_scan_eff", "", FIELD(zc_scan_eff, 1),
           "a plane scan reading its index straight from host memory: its rate against the SM index fetch's for the same prefixes"),
    POS("prefix_gather_eff", "", FIELD(prefix_eff, 1),
           "the SM index fetch's rate against the SM gather's for the same rows"),
    POS("host_page_bytes", "B", FIELD(host_page_bytes, 1),
           "host memory's page as the GPU translates it (an SM gather's rows on one page share a translation)"),
    POS("gather_weight", "", FIELD(gather_weight, 1),
           "max-min weight of SM gather flows"),
    POS("gather_duplex_coef", "", FIELD(gather_duplex_coef, 1),
           "duplex units an SM-gathered byte consumes"),
    NONNEG("kernel_latency_us", "us", FIELD(kernel_latency_s, 1e-6),
           "fixed time of a kernel"),
    POS("kernel_mem_eff", "", FIELD(kernel_mem_eff, 1),
           "fraction of HBM bandwidth a streaming kernel reaches"),
    POS("kernel_compute_eff", "", FIELD(kernel_compute_eff, 1),
           "fraction of tensor peak an attention kernel reaches"),
    NONNEG("scan_latency_us", "us", BY_NAME,
           "fixed time of an index scan kernel"),
    POS("scan_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth an index scan reaches (bit unpacking can bind first)"),
    NONNEG("scan_pertoken_latency_us", "us", BY_NAME,
           "fixed time of a per-token packed scan (Loki, Double Sparsity)"),
    POS("scan_pertoken_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth a per-token packed scan reaches"),
    NONNEG("scan_sparq_latency_us", "us", BY_NAME,
           "fixed time of SparQ's per-query channel scan"),
    POS("scan_sparq_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth SparQ's channel scan reaches"),
    NONNEG("scan_fathom_latency_us", "us", BY_NAME,
           "fixed time of Fathom's bit-plane scan"),
    POS("scan_fathom_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth Fathom's bit-plane scan reaches"),
    NONNEG("scan_hashattn_latency_us", "us", BY_NAME,
           "fixed time of HashAttention's signature scan"),
    POS("scan_hashattn_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth HashAttention's signature scan reaches"),
    NONNEG("scan_landmark_latency_us", "us", BY_NAME,
           "fixed time of a page-landmark scan"),
    POS("scan_landmark_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth a page-landmark scan reaches"),
    NONNEG("scan_pertoken_fill_bytes", "B", BY_NAME,
           "a per-token packed scan over fewer index bytes than this (its grid short of the GPU) takes as long as one over this many"),
    NONNEG("scan_pertoken_bit_ns", "ns", BY_NAME,
           "fixed time a per-token packed scan adds per index bit of a token (each block sums its query's channels one after another)"),
    NONNEG("scan_sparq_fill_bytes", "B", BY_NAME,
           "as scan_pertoken_fill_bytes, for SparQ's channel scan"),
    NONNEG("scan_fathom_fill_bytes", "B", BY_NAME,
           "as scan_pertoken_fill_bytes, for Fathom's bit-plane scan"),
    NONNEG("scan_hashattn_fill_bytes", "B", BY_NAME,
           "as scan_pertoken_fill_bytes, for HashAttention's signature scan"),
    NONNEG("scan_landmark_fill_bytes", "B", BY_NAME,
           "as scan_pertoken_fill_bytes, for a page-landmark scan"),
    NONNEG("scan_pertoken_l2_latency_us", "us", BY_NAME,
           "fixed time of a per-token packed scan over an index still in the L2 (just fetched)"),
    POS("scan_pertoken_l2_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth a per-token packed scan reaches over an index still in the L2"),
    NONNEG("scan_sparq_l2_latency_us", "us", BY_NAME,
           "fixed time of SparQ's channel scan over an index still in the L2 (just fetched)"),
    POS("scan_sparq_l2_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth SparQ's channel scan reaches over an index still in the L2"),
    NONNEG("scan_fathom_l2_latency_us", "us", BY_NAME,
           "fixed time of Fathom's bit-plane scan over an index still in the L2 (just fetched)"),
    POS("scan_fathom_l2_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth Fathom's bit-plane scan reaches over an index still in the L2"),
    NONNEG("scan_hashattn_l2_latency_us", "us", BY_NAME,
           "fixed time of HashAttention's signature scan over an index still in the L2 (just fetched)"),
    POS("scan_hashattn_l2_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth HashAttention's signature scan reaches over an index still in the L2"),
    NONNEG("scan_landmark_l2_latency_us", "us", BY_NAME,
           "fixed time of a page-landmark scan over an index still in the L2 (just fetched)"),
    POS("scan_landmark_l2_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth a page-landmark scan reaches over an index still in the L2"),
    NONNEG("scan_fathom_v1_latency_us", "us", BY_NAME,
           "fixed time of Fathom's token-per-thread plane scan (plane_scan token_per_thread)"),
    POS("scan_fathom_v1_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth Fathom's token-per-thread plane scan reaches"),
    NONNEG("scan_fathom_v2_latency_us", "us", BY_NAME,
           "fixed time of Fathom's two-per-thread plane scan (plane_scan two_per_thread)"),
    POS("scan_fathom_v2_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth Fathom's two-per-thread plane scan reaches"),
    NONNEG("scan_fathom_qh_latency_us", "us", BY_NAME,
           "fixed time of Fathom's scan scoring each query head apart"),
    POS("scan_fathom_qh_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth Fathom's per-query-head scan reaches"),
    NONNEG("attn_sparse_latency_us", "us", BY_NAME,
           "fixed time of attention over the winners"),
    POS("attn_sparse_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth attention over the winners reaches"),
    NONNEG("attn_sparse_l2_latency_us", "us", FIELD(attn_l2_latency_s, 1e-6),
           "fixed time of attention over winners still in L2 (just gathered)"),
    POS("attn_sparse_l2_mem_eff", "", FIELD(attn_l2_mem_eff, 1),
           "attention over winners still in L2: bytes read per query head (a row once per query head attending it) per second, as a fraction of HBM bandwidth"),
    NONNEG("after_layer_scan_us", "us", FIELD(after_layer_scan_s, 1e-6),
           "time a decode's index scan adds for running with the layer's GEMMs queued behind it, over its time with nothing behind"),
    NONNEG("after_layer_attn_us", "us", FIELD(after_layer_attn_s, 1e-6),
           "time a decode's attention over its winners adds for running with the layer's GEMMs queued behind it, over its time with nothing behind"),
    NONNEG("after_layer_topk_us", "us", FIELD(after_layer_topk_s, 1e-6),
           "time a decode's top-k adds for running with the layer's GEMMs queued behind it, over its time with nothing behind"),
    NONNEG("topk_scores_l2_us", "us", FIELD(topk_scores_l2_s, 1e-6),
           "time a top-k saves over scores its scan has just written to the L2, against its time after an L2 flush (where the scores fit in the L2)"),
    NONNEG("attn_sparse_qh_latency_us", "us", FIELD(attn_qh_latency_s, 1e-6),
           "fixed time of attention over each query head's own winners (HashAttention: g = 1 over 4x the KV heads' rows)"),
    POS("attn_sparse_qh_mem_eff", "", FIELD(attn_qh_mem_eff, 1),
           "fraction of HBM bandwidth attention over each query head's own winners reaches"),
    NONNEG("attn_sparse_qh_l2_latency_us", "us", FIELD(attn_qh_l2_latency_s, 1e-6),
           "fixed time of attention over each query head's own winners still in L2"),
    POS("attn_sparse_qh_l2_mem_eff", "", FIELD(attn_qh_l2_mem_eff, 1),
           "attention over each query head's own winners still in L2: their bytes per second, as a fraction of HBM bandwidth"),
    NONNEG("attn_combine_latency_us", "us", FIELD(combine_latency_s, 1e-6),
           "fixed time of the kernel merging split-K attention partials"),
    NONNEG("attn_combine_split_ns", "ns", FIELD(combine_split_s, 1e-9),
           "time per partial the combine walks (each thread walks the splits in turn)"),
    NONNEG("attn_combine_l2_latency_us", "us", FIELD(combine_l2_latency_s, 1e-6),
           "fixed time of the combine when its partials are still in L2"),
    NONNEG("attn_combine_l2_split_ns", "ns", FIELD(combine_l2_split_s, 1e-9),
           "time per partial the combine walks when the partials are still in L2"),
    POS("attn_split_blocks_per_sm", "blocks", FIELD(split_blocks_per_sm, 1),
           "split-K attention: blocks per SM over all heads the kernel aims for"),
    POS("attn_split_min_rows", "rows", FIELD(split_min_rows, 1),
           "split-K attention: fewest rows per split"),
    NONNEG("attn_dense_latency_us", "us", BY_NAME,
           "fixed time of dense (split-K) decode attention"),
    POS("attn_dense_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth dense decode attention reaches"),
    NONNEG("attn_dense_block_us", "us", FIELD(attn_dense_block_s, 1e-6),
           "dense attention's time per split-K block an SM runs in turn (its setup and partial): blocks/SMs of it"),
    NONNEG("attn_tail_latency_us", "us", BY_NAME,
           "fixed time of attention over the HBM tail"),
    POS("attn_tail_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth attention over the HBM tail reaches"),
    NONNEG("quantize_latency_us", "us", BY_NAME,
           "fixed time of the 4-bit plane quantiser"),
    POS("quantize_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth the quantiser reaches"),
    NONNEG("winner_fetch_latency_us", "us", BY_NAME,
           "fixed time of the winners' SM gather with the K/V in HBM"),
    POS("winner_fetch_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth the winners' gather in HBM reaches (its bytes read and written)"),
    NONNEG("wf_plan_latency_us", "us", BY_NAME,
           "fixed time of the water-filling planner"),
    POS("wf_plan_mem_eff", "", BY_NAME,
           "fraction of HBM bandwidth the planner reaches"),
    NONNEG("topk_latency_us", "us", FIELD(topk_latency_s, 1e-6),
           "fixed time of a top-k kernel, scores from HBM"),
    NONNEG("topk_latency_l2_us", "us", FIELD(topk_latency_l2_s, 1e-6),
           "fixed time of a top-k kernel when all rows' scores fit in L2 (l2_bytes)"),
    NONNEG("topk_elem_ns", "ns", FIELD(topk_elem_s, 1e-9),
           "top-k: time per score of a block's (all passes), scores from HBM"),
    NONNEG("topk_elem_l2_ns", "ns", FIELD(topk_elem_l2_s, 1e-9),
           "top-k: as topk_elem_ns when all rows' scores fit in L2 (l2_bytes)"),
    NONNEG("topk_row_us", "us", FIELD(topk_row_s, 1e-6),
           "top-k: time per row (its histogram passes), scores from HBM"),
    NONNEG("topk_row_l2_us", "us", FIELD(topk_row_l2_s, 1e-6),
           "top-k: as topk_row_us when all rows' scores fit in L2 (l2_bytes)"),
    NONNEG("topk_winner_ns", "ns", FIELD(topk_winner_s, 1e-9),
           "top-k: time per warp of 32 scores holding a winner, summed over rows (one atomic each)"),
    NONNEG("event_us", "us", FIELD(event_s, 1e-6),
           "what an event recorded between two kernels of a stream costs them: every fit-set kernel is timed between two, so a kernel right behind another with none between takes its fixed time less this"),
    NONNEG("topk_winner_row_ns", "ns", FIELD(topk_winner_row_s, 1e-9),
           "top-k: time per warp holding a winner of one row, the rows side by side (a row's atomics on its one counter queue)"),
    POS("topk_block_elems", "scores", FIELD(topk_block_elems, 1),
           "top-k: scores per block before a row's blocks run out (radix select grid)"),
    POS("topk_blocks_per_sm", "blocks", FIELD(topk_blocks_per_sm, 1),
           "top-k: blocks per SM over all rows at most (radix select grid)"),
    NONNEG("gemm_latency_us", "us", FIELD(gemm_latency_s, 1e-6),
           "fixed time of a projection, MLP or LM-head GEMM"),
    POS("gemm_mem_eff", "", FIELD(gemm_mem_eff, 1),
           "fraction of HBM bandwidth a weight-streaming GEMM reaches"),
    POS("gemm_compute_eff", "", FIELD(gemm_compute_eff, 1),
           "fraction of tensor peak a large GEMM reaches"),
    NONNEG("launch_us", "us", FIELD(launch_s, 1e-6),
           "host CPU time to launch a kernel"),
    NONNEG("copy_launch_us", "us", FIELD(copy_launch_s, 1e-6),
           "host CPU time to issue a copy"),
    NONNEG("graph_launch_us", "us", FIELD(graph_launch_s, 1e-6),
           "host CPU time to launch a CUDA graph of a step"),
    NONNEG("timeslice_us", "us", FIELD(timeslice_s, 1e-6),
           "separate processes: how long a context keeps the GPU while others wait"),
    NONNEG("ctx_switch_us", "us", FIELD(ctx_switch_s, 1e-6),
           "separate processes: GPU idle time of a switch to another context that waited while the owner's slice ran out"),
    NONNEG("ctx_switch_idle_us", "us", FIELD(ctx_switch_idle_s, 1e-6),
           "separate processes: GPU idle time of a switch to another context when the owner idled within its slice"),
    NONNEG("jitter_us", "us", FIELD(jitter_s, 1e-6),
           "run.jitter: an op's p99 exceeds its median by jitter_us + jitter_rel*t"),
    NONNEG("jitter_rel", "", FIELD(jitter_rel, 1),
           "run.jitter: see jitter_us"),
    NONNEG("jitter_copy_us", "us", FIELD(jitter_copy_s, 1e-6),
           "run.jitter: as jitter_us, for copy-engine transfers over the host link"),
    NONNEG("jitter_copy_rel", "", FIELD(jitter_copy_rel, 1),
           "run.jitter: see jitter_copy_us"),
    NONNEG("jitter_gather_us", "us", FIELD(jitter_gather_s, 1e-6),
           "run.jitter: as jitter_us, for kernels whose SMs read host memory over the link (gathers, zero-copy scans)"),
    NONNEG("jitter_gather_rel", "", FIELD(jitter_gather_rel, 1),
           "run.jitter: see jitter_gather_us"),
    POS("topk_passes", "", FIELD(topk_passes, 1),
           "times a top-k kernel reads its scores from HBM"),
    NONNEG("l2_dirty_frac", "", FIELD(l2_dirty_bytes, 1),
           "share of l2_bytes that a layer's writes can leave dirty for the next GEMM to write back (the L2 keeps the latest of its traffic)"),
    POS("l2_writeback_eff", "", FIELD(l2_writeback_Bps, 1),
           "bytes of that write-back per second of time it adds to the GEMM, as a fraction of hbm_GBps (above 1 where it hides in part under the weight reads)"),
    NONNEG("sample_us", "us", FIELD(sample_s, 1e-6),
           "sampling time per step"),
};

const size_t cost_param_count = sizeof cost_param_defs / sizeof cost_param_defs[0];
