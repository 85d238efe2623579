/* cost — the parametric cost forms of odsim, evaluated from a calibration profile (models/calib.h).
 *
 * Every form turns a request (bytes, pieces, region, FLOPs, batch) into the fields of a plan op
 * (sim/plan.h): cost (work, rate cap, latency), the constraints it crosses with coefficients, its
 * max-min weight and its launch time. Alone on an idle machine an op takes
 * latency + work / min(cap, capacity_i / coef_i), so:
 *   copy engine, contiguous or 2D:  ce_latency + rows·ce2d_row + bytes / link
 *   copy engine, rows a page apart: ce_latency + rows·ce2d_page_row + bytes / link (a 2D copy whose
 *                                   pitch is a host page or more: each row its own page)
 *   copy engine, batched pieces:    ce_latency + pieces·cebatch_piece + bytes / link
 *   copy engine, a chain of copies: ce_latency + (copies − 1)·ce_b2b_gap + bytes / link (separate calls
 *                                   issued back to back on one stream)
 *   SM zero-copy gather of rows:    gather_latency + bytes / min(gather_peak, blocks·gather_block,
 *                                   rows_per_s(region)·row_bytes), over the link, duplex coefficient
 *                                   gather_duplex_coef, weight gather_weight against copies' ce_weight;
 *                                   the row rate is the GPU's shared gpu{g}.rows resource (concurrent
 *                                   gathers split it), the other two are the flow's own cap
 *   kernel:                         latency + max(bytes / (mem_eff·hbm), flops / (kernel_compute_eff·peak)),
 *                                   latency and mem_eff per kernel kind (<kind>_latency_us, <kind>_mem_eff)
 *                                   where declared, top-k topk_latency with kernel_mem_eff, else kernel_*;
 *                                   scans per family (scan_<family>_latency_us, scan_<family>_mem_eff);
 *                                   attention over winners still in L2 its own (cost_attn_l2), and
 *                                   over each query head's own winners (g = 1) its own pair of each
 *   split-K combine:                attn_combine_latency + splits·attn_combine_split
 *   FP32 compute (cost_compute_fp32): compute_latency + flops / fp32_peak, the SMs' own rate
 *   top-k (cost_topk):              topk_latency(_l2) + topk_elem(_l2)·n/blocks_per_row + topk_row(_l2)·rows
 *                                   + topk_winner·rows·(warps holding a winner) + topk_winner_row·(a row's
 *                                   warps holding a winner); the _l2 terms when all rows' scores fit in L2
 *   GEMM by batch B (cost_fn):      gemm_latency + max((W + B·act) / (gemm_mem_eff·hbm),
 *                                   B·flops / (gemm_compute_eff·peak)); the FLOP bound enters as the
 *                                   op's rate cap, the bytes cross gpu{g}.hbm
 * Every kernel (gathers and GEMMs included) also takes the GPU's SMs in proportion to its rate: alone
 * at full speed it fills them, so kernels of concurrent streams split the GPU while copies overlap.
 * Per-piece costs become rate caps (bytes / (pieces·t_piece + bytes/peak)), so an op stays one flow.
 * Every evaluation notes the parameters it used and the predictor value (calib_note). */
#ifndef ODSIM_MODELS_COST_H
#define ODSIM_MODELS_COST_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"
#include "models/calib.h"
#include "models/cost_params.h"
#include "models/hwcat.h"
#include "models/hwinst.h"
#include "models/llm.h"
#include "models/method_ops.h"
#include "models/opkind.h"
#include "sim/plan.h"
#include "sim/sim.h"

/* Index scans differ per method in what binds them (integer unpacking of bit planes, popcounts of
 * signatures, byte streaming of packed rows or page summaries), so each family has its own fixed
 * time and HBM efficiency. The families are those the methods' tables name (models/method_ops.h:
 * method_scan_family_name), the measured scan variants without their trailing digits; after
 * the methods' come the other measured implementations of one method's scan, named
 * <method>_<form> (Fathom's numbered plane-scan kernels v1, a thread per token, and v2, batched
 * loads, where the steps run v3; and its scan of each query head apart, qh: the v2 kernel with 4
 * query heads, where v3 scores their sum only). COST_SCAN_FAMILIES is the room for them. */
#define COST_SCAN_FAMILIES METHOD_SCAN_FAMILIES_MAX

/* Index of the scan family `name` names (a method's family, a trailing number dropped as in
 * "landmark16", or <family>_<form>), or -1. */
int cost_scan_family(const char *name);

/* The family of method family `family`'s scan in form `form` ("v1", "v2", "qh"; NULL or "": the
 * family itself), or -1 when no such form was measured. */
int cost_scan_form(int family, const char *form);

/* The SM gather's row rate is given at regions a doubling or two apart (256 MiB to 16 GiB): the
 * address translations its rows need cost more as they spread. One table per way of reading the
 * rows (gather_<table>rows_Mps_<size>): in any order, head by head (16 parts of the region in turn,
 * as a winner fetch goes), head by head none read before; the first two again when the rows'
 * page-table entries are still in L2 (a gather re-reading its rows back to back, its bytes fewer
 * than the L2 holds: a winner fetch timed alone runs so); and the two again right
 * after another gather of many rows over host memory (a step's winner fetch after its SM index
 * fetch: what translation state the one leaves the other); and head by head the same rows in a new
 * order each time (a step re-reading its winners as top-k hands them over: each row comes to other
 * SMs than before, whose TLBs hold other rows' translations). After a flush of the L2, or between
 * the layers of a step, each translation that misses the GPU's TLBs reads its entry from memory. */
#define COST_ROW_KNOTS 7
typedef enum {
    COST_ROWS_ANY, COST_ROWS_HEADS, COST_ROWS_HEADS_NEW, COST_ROWS_ANY_PT, COST_ROWS_HEADS_PT, COST_ROWS_ANY_AFTER,
    COST_ROWS_HEADS_AFTER, COST_ROWS_HEADS_SHUFFLE, COST_ROW_TABLES
} cost_rows_t;
/* The row-rate curves, each declared once: C(table, name prefix, meaning); a knot's parameter is
 * the prefix and its region (K(table, knot, name, meaning) for each of cost_row_knot_bytes). */
#define COST_ROW_CURVES(C)                                                                                         \
    C(COST_ROWS_ANY, "gather_rows_Mps_", "rows spread over the region")                                         \
    C(COST_ROWS_HEADS, "gather_heads_rows_Mps_", "rows read head by head over the region (a winner fetch)")     \
    C(COST_ROWS_HEADS_NEW, "gather_heads_new_rows_Mps_", "rows read head by head over the region, none read before") \
    C(COST_ROWS_ANY_PT, "gather_pt_rows_Mps_",                                                                  \
      "rows spread over the region, their page-table entries still in L2 (a gather re-read back to back, its "   \
      "bytes fewer than the L2 holds)")                                                                          \
    C(COST_ROWS_HEADS_PT, "gather_heads_pt_rows_Mps_",                                                          \
      "rows read head by head over the region, their page-table entries still in L2")                           \
    C(COST_ROWS_ANY_AFTER, "gather_after_rows_Mps_",                                                            \
      "rows spread over the region, after another gather over host memory (a step's SM index fetch)")           \
    C(COST_ROWS_HEADS_AFTER, "gather_heads_after_rows_Mps_",                                                    \
      "rows read head by head over the region, after another gather over host memory")                          \
    C(COST_ROWS_HEADS_SHUFFLE, "gather_heads_shuffle_rows_Mps_",                                                \
      "the same rows head by head over the region in a new order each time (a step's winners re-read as top-k "  \
      "hands them over)")
#define COST_ROW_KNOTS_OF(K, t, p, d)                                                                              \
    K(t, 0, p "256MiB", d " (256 MiB)") K(t, 1, p "512MiB", d " (512 MiB)") K(t, 2, p "1GiB", d " (1 GiB)")          \
    K(t, 3, p "2GiB", d " (2 GiB)") K(t, 4, p "4GiB", d " (4 GiB)") K(t, 5, p "8GiB", d " (8 GiB)")                  \
    K(t, 6, p "16GiB", d " (16 GiB)")
extern const double cost_row_knot_bytes[COST_ROW_KNOTS];
extern const char *const cost_row_names[COST_ROW_TABLES][COST_ROW_KNOTS];

/* The SM index fetch reads a plane index chunk by chunk, a channel's prefix of every chunk in
 * turn, so its row rate is a sweep's: at the link's pace while the GPU keeps the translations of
 * the whole region, then falling off a cliff over a few hundred MiB (the measured plane_sweep rows: 8
 * heads, 68 KiB units, 32 passes). Its rows per second (gather_plane<piece>_rows_Mps_<MiB>MiB) at
 * regions finer than a doubling around that cliff, for pieces of 128 B and of 512 B: a prefix's row
 * takes the time linearly between the two by its piece (flat outside them), at its region
 * log-linearly between knots (flat below the first; past the last, slower as rows in any order
 * slow from there, noted as outside the range). */
#define COST_PLANE_KNOTS 14
#define COST_PLANE_PIECES 2
#define COST_PLANE_CURVES(C)                                                                                       \
    C(0, "gather_plane128_rows_Mps_", "a plane index swept in passes, 128 B prefixes")                           \
    C(1, "gather_plane512_rows_Mps_", "a plane index swept in passes, 512 B prefixes")
#define COST_PLANE_KNOTS_OF(K, p, n, d)                                                                            \
    K(p, 0, n "256MiB", d " (256 MiB)") K(p, 1, n "512MiB", d " (512 MiB)") K(p, 2, n "640MiB", d " (640 MiB)")      \
    K(p, 3, n "768MiB", d " (768 MiB)") K(p, 4, n "832MiB", d " (832 MiB)") K(p, 5, n "896MiB", d " (896 MiB)")      \
    K(p, 6, n "960MiB", d " (960 MiB)") K(p, 7, n "1024MiB", d " (1024 MiB)") K(p, 8, n "1152MiB", d " (1152 MiB)")  \
    K(p, 9, n "1280MiB", d " (1280 MiB)") K(p, 10, n "1536MiB", d " (1536 MiB)")                                   \
    K(p, 11, n "2048MiB", d " (2048 MiB)") K(p, 12, n "3072MiB", d " (3072 MiB)") K(p, 13, n "4096MiB", d " (4096 MiB)")
extern const double cost_plane_knot_bytes[COST_PLANE_KNOTS];
extern const double cost_plane_piece_bytes[COST_PLANE_PIECES];
extern const char *const cost_plane_names[COST_PLANE_PIECES][COST_PLANE_KNOTS];

/* The parameter values of one platform, SI units, read once from a profile. */
typedef struct cost {
    calib_t *cal;  /* notes go here; not owned, must outlive the cost */
    double h2d_Bps, d2h_Bps, hbm_Bps, bf16_flops, fp8_flops;
    double fp32_flops;                 /* fp32_TFLOPS where the profile or preset has it, else 0 */
    double ce_b2b_gap_s;
    double ce_latency_s, ce2d_copy_s, ce_handoff_s, ce_handoff_spread_s, ce2d_row_s, ce2d_page_row_s, cebatch_piece_s, ce_weight;
    double gather_latency_s, gather_peak_Bps, gather_block_Bps, gather_blocks;
    double gather_rows_ps[COST_ROW_TABLES][COST_ROW_KNOTS]; /* rows/s at cost_row_knot_bytes (rows not warm) */
    double gather_warm_rows;   /* re-read rows: warm (256 MiB rate) up to this many, cold from twice as many */
    double plane_rows_ps[COST_PLANE_PIECES][COST_PLANE_KNOTS]; /* rows/s of a plane sweep at its knots */
    double prefix_latency_s, prefix_eff, zc_scan_eff; /* COST_SM_PREFIX, COST_SM_ZC_SCAN */
    double host_page_bytes;    /* host memory's translation unit for the GPU */
    double gather_weight, gather_duplex_coef;
    double kernel_latency_s, kernel_mem_eff, kernel_compute_eff, gemm_mem_eff, gemm_compute_eff;
    double topk_latency_s, topk_latency_l2_s, gemm_latency_s, sm_count;
    /* per kernel kind (models/opkind.h): its own fixed time and HBM efficiency, read from
     * <kind>_latency_us and <kind>_mem_eff where the catalogs declare them, else kernel_* */
    double kind_latency_s[OPKIND_COUNT], kind_mem_eff[OPKIND_COUNT];
    char kind_names[OPKIND_COUNT][2][40];
    /* per scan family (method_scan_family_name): scan_<family>_latency_us and scan_<family>_mem_eff where
     * the catalogs declare them, else the scan kind's */
    double scan_latency_s[COST_SCAN_FAMILIES], scan_mem_eff[COST_SCAN_FAMILIES];
    char scan_names[COST_SCAN_FAMILIES][2][40];
    /* the same over an index still in the L2: scan_<family>_l2_latency_us and _l2_mem_eff where the
     * catalogs declare them and the profile holds fitted values, else the family's own */
    double scan_l2_latency_s[COST_SCAN_FAMILIES], scan_l2_mem_eff[COST_SCAN_FAMILIES];
    char scan_l2_names[COST_SCAN_FAMILIES][2][40];
    /* scan_<family>_fill_bytes where the profile holds it, else 0: a scan over fewer bytes than
     * this (its grid short of the GPU) takes as long as one over this many */
    double scan_fill_bytes[COST_SCAN_FAMILIES];
    char scan_fill_names[COST_SCAN_FAMILIES][40];
    /* scan_<family>_bit_ns where the catalogs declare it, else 0: fixed time per index bit of a token */
    double scan_bit_s[COST_SCAN_FAMILIES];
    char scan_bit_names[COST_SCAN_FAMILIES][40];
    double attn_l2_latency_s, attn_l2_mem_eff, l2_bytes;     /* attention over winners still in L2 */
    double attn_qh_latency_s, attn_qh_mem_eff;                /* over each query head's own winners */
    double attn_qh_l2_latency_s, attn_qh_l2_mem_eff;
    double after_layer_scan_s, after_layer_attn_s, after_layer_topk_s; /* a decode's kernel, the layer's GEMMs queued behind it */
    double topk_scores_l2_s;                                  /* a top-k over scores just written */
    double attn_dense_block_s;         /* dense attention: per split-K block an SM runs in turn */
    double combine_latency_s, combine_split_s, combine_l2_latency_s, combine_l2_split_s;
    double split_blocks_per_sm, split_min_rows;
    double launch_s, copy_launch_s, graph_launch_s, topk_passes, sample_s, event_s;
    double timeslice_s, ctx_switch_s;  /* separate processes: time slice, context switch (preempted) */
    double ctx_switch_idle_s;          /* the switch away from a context that idled */
    double jitter_s, jitter_rel;       /* an op's p99 above its median: jitter_s + jitter_rel·t */
    double jitter_copy_s, jitter_copy_rel; /* the same for copy-engine ops moving host bytes */
    double jitter_gather_s, jitter_gather_rel; /* the same for GPU ops moving host bytes (gathers) */
    double topk_elem_s, topk_elem_l2_s, topk_row_s, topk_row_l2_s, topk_winner_s, topk_winner_row_s, topk_block_elems,
        topk_blocks_per_sm;
    double l2_dirty_bytes;             /* written lines the L2 holds dirty: l2_dirty_frac·l2_bytes */
    double l2_writeback_Bps;           /* their write-back under the next GEMM: l2_writeback_eff·hbm */
} cost_t;

/* Reads every parameter the forms use from cal. Errors: ERR_NOTFOUND naming a missing one. */
int cost_init(cost_t *c, calib_t *cal, err_t *e);

/* The constraints of one GPU's paths, resolved in a simulator (models/hwinst.h names). */
typedef struct cost_paths {
    sim_res_t hbm, flops_bf16, flops_fp8;  /* flops_fp8 −1 when the GPU has none */
    sim_res_t rows;                        /* the GPU's shared gather row rate (gpu{g}.rows) */
    sim_res_t sm;                          /* the GPU's SMs (gpu{g}.sm): a kernel at its standalone
                                            * rate fills them, so concurrent kernels share them */
    sim_res_t ce_h2d, ce_d2h;              /* the copy engine of each direction (gpu{g}.ce_h2d,
                                            * ce_d2h), −1 in a machine without them */
    plan_use_t h2d[PLAN_MAX_USES], gather[PLAN_MAX_USES], d2h[PLAN_MAX_USES];
    uint8_t n_h2d, n_gather, n_d2h;
} cost_paths_t;

/* Resolves GPU gpu's paths in sim (host-side data in src). Errors: ERR_NOTFOUND, ERR_INVAL. */
int cost_paths_resolve(const cost_t *c, const hw_t *hw, const sim_t *sim, int gpu, hwinst_src_t src,
                       cost_paths_t *out, err_t *e);

typedef enum {
    COST_CE = 0,     /* copy engine: one contiguous copy, or `pieces` equal rows of a 2D copy */
    COST_CE_BATCH,   /* copy engine: `pieces` scattered pieces in one batched copy */
    COST_CE_STRIDED, /* copy engine: 2D copies of `pieces` rows in all, each on a host page of its own */
    COST_SM_GATHER,  /* kernel reading mapped host memory: `pieces` rows spread over region_bytes */
    COST_SM_HEADS,   /* the same, its rows part by part of the region (a winner fetch goes head by
                      * head): fewer translations at a time, gather_heads_rows_Mps_<size> (measured as
                      * rows from 16 parts in turn, taken for any number of heads) */
    COST_SM_HEADS_NEW, /* the same, none of its rows read before (winners all new each step):
                      * gather_heads_new_rows_Mps_<size>, every row cold */
    COST_SM_PREFIX,  /* the index fetch's kernel reading each chunk's plane prefixes: its rows at the
                      * plane sweep's rate (cost_plane_row_s, wherever it runs), the gather's ceilings
                      * times prefix_gather_eff, its own fixed time */
    COST_SM_ZC_SCAN  /* a plane scan reading those prefixes straight from host memory (no fetch): the
                      * index fetch's form, its ceilings at zc_scan_eff times the fetch's */
} cost_xfer_t;

/* Where an SM gather runs, for what it finds of its rows' translations. */
typedef enum {
    COST_GATHER_ALONE, /* re-reading its rows back to back, as a gather timed alone does: it keeps
                        * their translations up to gather_warm_rows, and their page-table entries
                        * stay in L2 while its bytes fit there */
    COST_GATHER_STEP,  /* in a step: rows head by head keep their translations while the SM gathers
                        * of a whole step (every layer's, its own among them) touch no more than the
                        * GPU keeps (cost_transfer_step; a model's layers touch far more), but come
                        * in a new order (the _shuffle table); other rows all cold */
    COST_GATHER_AFTER  /* in a step right after a gather of many rows over host memory (a winner fetch
                        * after the SM index fetch): cold, and the _after tables */
} cost_gather_at_t;

/* Fills op's exec, cost, uses, weight, launch and pieces for a transfer of `bytes` in `pieces`
 * pieces (≥ 1) whose rows spread over region_bytes (SM gathers), host→device when h2d; an SM gather
 * runs `at` (cost_gather_at_t). */
void cost_transfer(const cost_t *c, const cost_paths_t *p, cost_xfer_t form, bool h2d, double bytes,
                   double pieces, double region_bytes, cost_gather_at_t at, plan_op_t *op);
/* As cost_transfer (host→device) for a gather run in a step whose SM gathers touch
 * step_translations address translations from one run of it to the next, its own among them
 * (cost_gather_translations of each): rows head by head (COST_SM_HEADS) kept warm by
 * cost_gather_cold_share of them go at the _shuffle table (the same rows in a new order: measured as
 * order_win_shuffle), the rest cold at the step's table; other forms all cold. A copy-engine form
 * is as cost_transfer's in a step. */
void cost_transfer_step(const cost_t *c, const cost_paths_t *p, cost_xfer_t form, double bytes, double pieces,
                        double region_bytes, double step_translations, plan_op_t *op);
/* As cost_transfer_step for a gather run right after another gather over host memory that touched
 * `evicting` address translations: the share of its rows whose translations that gather evicted
 * (cost_gather_cold_share of `evicting`: none while they fit in what the GPU keeps,
 * gather_warm_rows, all from twice that) cold at the _after tables, the rest as cost_transfer_step's.
 * A copy-engine form is as in a step. */
void cost_transfer_after(const cost_t *c, const cost_paths_t *p, cost_xfer_t form, double bytes, double pieces,
                         double region_bytes, double evicting, double step_translations, plan_op_t *op);
/* Address translations (host pages) an SM gather of `pieces` rows over region_bytes touches: one per
 * row, at most one per host page of the region. */
double cost_gather_translations(const cost_t *c, double pieces, double region_bytes);

/* The SM gather's rows per second over region_bytes from row table `table` when the GPU must keep
 * `translations` address translations for its rows to stay warm (INFINITY: cold): the cold share of
 * the rows at the region's rate (log-log interpolation between the two knots around it, flat outside
 * them; cost_transfer notes those knots, and a region past 16 GiB as outside the range), the warm
 * rest at the 256 MiB knot's, whose translations miss nothing. Rows none read before are all cold. */
double cost_gather_rows_per_s(const cost_t *c, double region_bytes, double translations, cost_rows_t table);
/* The rate at x of the curve through rates[i] at knots[i] (n, ascending): log-linear between
 * knots, flat outside them. */
double cost_knots_rate(const double *knots, const double *rates, int n, double x);
/* Seconds a row of a plane index's fetch (COST_SM_PREFIX, COST_SM_ZC_SCAN) of `piece_bytes` over
 * region_bytes takes at the plane sweep's rates (cost_plane_names); no efficiency scales it. */
double cost_plane_row_s(const cost_t *c, double region_bytes, double piece_bytes);
/* The row table of an SM gather of `form` moving `bytes`, run `at`. */
cost_rows_t cost_gather_table(const cost_t *c, cost_xfer_t form, double bytes, cost_gather_at_t at);
/* Share of a re-read gather's rows that miss the GPU's address translations: 0 up to
 * gather_warm_rows, 1 from twice as many, log-linear between. */
double cost_gather_cold_share(const cost_t *c, double rows);

/* Fills op for a kernel of op kind `kind` (models/opkind.h) reading/writing `bytes` of HBM and doing
 * `flops` at dtype t, with that kind's own fixed time and HBM efficiency where the catalogs declare
 * them (scan, attn_sparse, attn_dense, attn_tail, quantize, wf_plan; top-k has its own fixed time
 * and kernel_mem_eff), else kernel_*. */
void cost_kernel(const cost_t *c, const cost_paths_t *p, int kind, double bytes, double flops, llm_dtype_t t,
                 plan_op_t *op);

/* As cost_kernel for an index scan of family `family` (cost_scan_family; −1: the scan kind's own);
 * `l2`: its index was just written and is still in the L2 (the caller checks it fits), so it goes at
 * the family's L2 fixed time and efficiency (its bytes still count against HBM, as top-k's scores
 * do: the engine does not model what stays in L2). Over HBM, a scan of fewer bytes than the family's
 * fill bytes takes as long as one of that many (its grid does not fill the GPU). `bits`: the index
 * bits per token, at the family's fixed time per bit (scan_<family>_bit_ns) on top of its own. */
void cost_scan(const cost_t *c, const cost_paths_t *p, int family, bool l2, double bytes, double flops,
               double bits, llm_dtype_t t, plan_op_t *op);

/* Attention over `bytes` of winners that the winner fetch has just written and that fit in the L2
 * (the caller checks bytes ≤ l2_bytes): attn_sparse_l2_latency_us + bytes at attn_sparse_l2_mem_eff
 * of the HBM bandwidth as the op's own rate, HBM itself untouched; `qh` (each query head attends its
 * own winners, g = 1) at attn_sparse_qh_l2_*. Concurrent sessions' traffic between the fetch and the
 * attention, which could evict the winners, is not modelled. */
void cost_attn_l2(const cost_t *c, const cost_paths_t *p, double bytes, bool qh, plan_op_t *op);

/* Adds to op (a scan, attention over winners or top-k, kind `kind`; other kinds unchanged) what it
 * takes more for running with the layer's GEMMs queued behind it, as a decode's kernels do, than
 * alone after an L2 flush: after_layer_{scan,attn,topk}_us on its fixed time (noted where it is
 * not 0). */
void cost_after_layer(const cost_t *c, int kind, plan_op_t *op);

/* Takes off a top-k's fixed time what it saves over scores its scan has just written, where they fit
 * in the L2 (scores_bytes ≤ l2_bytes): topk_scores_l2_us, against a top-k alone after an L2 flush
 * (not below 0; noted where it is not 0). */
void cost_topk_scores_in_l2(const cost_t *c, double scores_bytes, plan_op_t *op);

/* The fixed time a kernel of `kind` takes more in a decode's layer than alone after an L2 flush:
 * what cost_after_layer adds, less for a top-k what cost_topk_scores_in_l2 takes off over
 * scores_bytes of scores (negative where it saves more). Notes nothing. */
sim_ps_t cost_in_layer_ps(const cost_t *c, int kind, double scores_bytes);

/* As cost_kernel for attention over each query head's own winners from HBM (g = 1: a quarter of a
 * GQA group's arithmetic per row, four times the blocks): attn_sparse_qh_latency_us and _mem_eff. */
void cost_attn_qh(const cost_t *c, const cost_paths_t *p, double bytes, double flops, llm_dtype_t t, plan_op_t *op);

/* The dirty lines a layer's kernels leave in the L2 (the measured gemm layer_after_write rows: a memset
 * of W bytes makes the next GEMMs min(W, l2_dirty_bytes)/l2_writeback slower). The L2 is taken as
 * keeping the latest l2_bytes of the traffic through it, least recently used out first, reads and
 * writes interleaved through each kernel, and at most l2_dirty_bytes of it dirty: a kernel that
 * misses on `read_bytes` and writes `written_bytes` keeps the dirty bytes before it in proportion
 * max(0, 1 − T/L) and leaves its own written bytes dirty in proportion min(1, L/T) (T = read +
 * written, L = l2_bytes). Reads that hit (data just written and still held) pass no traffic. */
typedef struct cost_l2 {
    double dirty_bytes;
} cost_l2_t;
void cost_l2_pass(const cost_t *c, cost_l2_t *l2, double read_bytes, double written_bytes);

/* The write-back of `bytes` dirty lines that the next GEMM's weight reads evict: bytes over HBM at
 * l2_writeback_eff·hbm (the time it adds: it hides in part under the weight reads, so the rate may
 * pass hbm_GBps), no latency and no launch of its own (it runs inside the GEMM). */
void cost_l2_writeback(const cost_t *c, const cost_paths_t *p, double bytes, plan_op_t *op);

/* The split-K partials of attention over rows_per_head rows of each of `heads` heads, as flash
 * decoding (and the measured kernel) picks them: about attn_split_blocks_per_sm blocks per SM over all heads, at
 * least attn_split_min_rows rows each, at least one. */
double cost_attn_splits(const cost_t *c, double rows_per_head, double heads);
/* Dense attention's split-K grid over `heads` heads of rows_per_head rows: each SM runs its share
 * of the grid's blocks in turn, attn_dense_block_us each, on top of op's fixed time. */
void cost_attn_dense_blocks(const cost_t *c, double rows_per_head, double heads, plan_op_t *op);

/* Fills op for the merge of `splits` split-K partials per head: attn_combine_latency +
 * splits·attn_combine_split (each thread walks the partials in turn: time grows with their number,
 * not with bytes; the partials are too small to matter against HBM); attn_combine_l2_* when the
 * partials are still in L2 (l2). */
void cost_attn_combine(const cost_t *c, double splits, bool l2, plan_op_t *op);

/* Blocks per row of a radix top-k over `rows` rows of n scores: one per topk_block_elems scores, at
 * most topk_blocks_per_sm·SMs over all rows (at least one per row). */
double cost_topk_blocks_per_row(const cost_t *c, double rows, double n);

/* Warps of 32 consecutive scores that hold at least one of a row's k winners, the k placed at
 * random among the n: (n/32)·(1 − Π_{i<32} (n − k − i)/(n − i)). The measured kernel's gather pass counts each
 * such warp once on its row's counter (one atomic per warp; real scores cluster, so fewer). */
double cost_topk_winner_warps(double n, double k);

/* Fills op for top-k of k over each of `rows` rows of n scores: topk_latency + topk_elem·(scores
 * per block: each block's threads walk theirs one after another, every load's latency in turn) +
 * topk_winner·rows·cost_topk_winner_warps(n, k) + topk_winner_row·cost_topk_winner_warps(n, k): each
 * winner warp takes its row's one output counter in turn, so a row's winners queue one after another
 * while the rows run side by side (on the 15:43 run 8 rows of 256K at k = 4096 take 19 us more than
 * at k = 64, 512 rows of 64K at k = 2048 only 20 us more than at 256). When the rows' 4·rows·n bytes of scores fit in
 * l2_bytes (the scan has just written them) a score costs topk_elem_l2 instead. The scores count
 * against HBM topk_passes times in both cases (the engine does not model what stays in L2). The op
 * takes the SMs at its own rate (its blocks fill them). */
void cost_topk(const cost_t *c, const cost_paths_t *p, double rows, double n, double k, plan_op_t *op);

/* Fills op for `copies` ≥ 1 copy-engine copies moving `bytes` in all, issued back to back on one
 * stream as separate calls (host→device when h2d): ce_latency + (copies − 1)·ce_b2b_gap + bytes / link
 * (the engine overlaps part of each copy's setup with the one before; fitted on chains of H2D copies
 * and taken for D2H chains too), one flow; its launch is the first call's (copy_launch), the other
 * calls' host time is the caller's to charge. */
void cost_ce_chain(const cost_t *c, const cost_paths_t *p, bool h2d, double bytes, double copies, plan_op_t *op);

/* Fills op for a kernel of `flops` FP32 floating-point operations (FMAs on the CUDA cores, 2 FLOPs
 * each; no tensor cores) over every SM with almost no memory traffic: the compute kind's fixed time
 * (compute_latency_us where declared, else kernel_latency_us) + flops / fp32_TFLOPS, at the op's own
 * rate taking the GPU's SMs (concurrent kernels split them; no efficiency below the peak: an FMA
 * stream over every SM is what the peak counts). Errors: ERR_NOTFOUND (the GPU's fp32_TFLOPS unknown). */
int cost_compute_fp32(const cost_t *c, const cost_paths_t *p, double flops, plan_op_t *op, err_t *e);

/* A GEMM whose cost depends on the merged batch (projections, MLP, LM head). */
typedef struct cost_gemm {
    double weight_bytes;          /* read once per execution */
    double act_bytes_per_token;   /* activations in and out per token */
    double flops_per_token;       /* 2 × parameters */
    double tokens;                /* tokens per session (decode 1, prefill chunk T) */
    double latency_s, hbm_eff_Bps, peak_eff_flops;
} cost_gemm_t;

/* Initialises a GEMM model at weight dtype t for an op of `kernels` GEMM kernels run one after another
 * (the O projection and the MLP's up and down are three: three fixed times). */
void cost_gemm_init(const cost_t *c, double weight_bytes, double act_bytes_per_token, double flops_per_token,
                    double tokens, int kernels, llm_dtype_t t, cost_gemm_t *g);
/* plan_cost_fn of a cost_gemm_t. */
int cost_gemm_fn(const void *model, uint32_t batch, plan_cost_t *out);
/* Fills op for GEMM g (cost for batch 1, cost_fn set; g must outlive the plan's execution). */
void cost_gemm_op(const cost_t *c, const cost_paths_t *p, const cost_gemm_t *g, plan_op_t *op);

/* Seconds to picoseconds, rounded up; SIM_TIME_NEVER beyond what the clock holds (sim_ps_or_never). */
sim_ps_t cost_ps(double seconds);

#endif
