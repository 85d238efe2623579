/* calib — the calibration profile: a store of named cost-model and hardware parameters.
 *
 * A profile (models/calib/<platform>.yaml, written by the fitter in validation/) is
 *
 *     profile: h200-pcie5-vm          # free text
 *     hardware: h200-sxm/pcie5        # free text: what it was measured on
 *     params:
 *       ce_latency_us: {value: 4.9, stderr: 0.05, lo: 4096, hi: 268435456, unit: us,
 *                       origin: "fitted: validation/data/ce_h2d.csv"}
 *
 * Names are exactly the catalog parameter keys (models/hwcat.h): a profile may set any of them and
 * nothing else (an unknown name is an error naming file:line:col and key). Names a profile lacks are
 * seeded from the resolved hardware preset (calib_seed), with the preset's origin.
 *
 * `lo`/`hi` bound the predictor over which the value was measured or fitted (bytes of a piece, bytes
 * of a region, blocks in flight, as the parameter's cost form says); lo > hi means no range. Every
 * prediction notes which parameters it used (calib_note): the profile remembers those used outside
 * their range or whose origin is "assumed", for reports.
 *
 * Parameter names (units in the name) and the forms that use them (models/cost.h):
 *   h2d_GBps, d2h_GBps, duplex_GBps  link capacities per direction and both at once (resources)
 *   hbm_GBps, bf16_TFLOPS, fp8_TFLOPS, host_dram_GBps, cxl_read_GBps, cxl_write_GBps  (resources)
 *   ce_latency_us         copy-engine setup per copy op: t = ce_latency + rows*ce2d_row_ns + bytes/link
 *                         (predictor: bytes per copy)
 *   ce2d_row_ns           per row of a cudaMemcpy2DAsync (predictor: row bytes)
 *   ce2d_page_row_ns      per row of 2D copies whose rows lie a host page or more apart (predictor: rows)
 *   ce2d_copy_us          per further 2D copy of a strided chain (one per head and index channel)
 *   ce_b2b_gap_us         per further copy of a 1D chain issued back to back (fitted and reported; the
 *                         strided 2D chains take ce2d_copy_us)
 *   cebatch_piece_us      per piece of cudaMemcpyBatchAsync: t = ce_latency + pieces*piece + bytes/link
 *                         (predictor: piece bytes)
 *   ce_weight             max-min weight of copy-engine flows on shared constraints
 *   gather_latency_us     fixed time of an SM zero-copy gather
 *   gather_peak_GBps      gather ceiling: rate = min(peak, blocks*block, rows(region)*row_bytes)
 *   gather_block_GBps     per block in flight (predictor: blocks)
 *   gather_blocks         blocks a gather keeps in flight
 *   gather_rows_Mps_256MiB, _1GiB, _4GiB, _16GiB  row rate by region spanned, log-log interpolated,
 *                         flat below 256 MiB and beyond 16 GiB (beyond: noted as outside range);
 *                         predictor: row bytes
 *   gather_weight         max-min weight of gathers against copy-engine flows
 *   gather_duplex_coef    duplex units a gathered byte consumes (interference with D2H)
 *   kernel_latency_us, kernel_mem_eff, kernel_compute_eff
 *                         kernels: t = latency + max(bytes/(eff*hbm), flops/(eff*peak))
 *   <kind>_latency_us, <kind>_mem_eff for kind scan, attn_sparse, attn_dense, attn_tail, quantize,
 *                         wf_plan: the same per kernel kind; scan_<family>_* per method's scan
 *                         and Fathom's other scan kernels (models/cost.h); attn_sparse_l2_* over winners still in L2 (its own rate)
 *   attn_combine_latency_us, attn_combine_split_ns (and _l2_: partials still in L2)  split-K combine:
 *                         t = latency + splits*split; attn_split_blocks_per_sm, attn_split_min_rows
 *                         the split count (configuration)
 *   topk_latency_us, topk_elem_ns, topk_elem_l2_ns, topk_winner_ns, topk_winner_row_ns  top-k: t =
 *                         latency + elem*(scores per block) (elem_l2 when the rows' scores fit in L2)
 *                         + winner*(rows' warps holding a winner) + winner_row*(one row's); blocks per row from topk_block_elems
 *                         and topk_blocks_per_sm (configuration)
 *   ce_handoff_us         a kernel waiting on a copy starts this long after the copy ends, on average
 *   ce_handoff_spread_us  run.jitter: each hand-off uniform over ce_handoff_us ± half this
 *   event_us              a kernel right behind one of another step stage, with no event between,
 *                         takes its fixed time less this (cost_chain_events)
 *   gemm_latency_us       GEMMs' fixed time, per cuBLAS kernel
 *   gemm_mem_eff, gemm_compute_eff  projections/MLP/LM head by batch B: t = latency +
 *                         max(W/(eff*hbm), B*tokens*flops_per_token/(eff*peak)) (predictor: batch)
 *   launch_us, copy_launch_us, graph_launch_us  host CPU per kernel launch, copy issue, graph launch
 *   timeslice_us, ctx_switch_us  separate processes: how long a context keeps the GPU while others
 *                         wait, and the GPU's idle time when it passes to another context
 *   jitter_us, jitter_rel  run.jitter: an op's p99 exceeds its median by jitter_us + jitter_rel·t
 *   jitter_copy_*, jitter_gather_*  the same for copies over the host link, and for kernels whose
 *                         SMs read host memory (gathers, zero-copy kernels)
 *   topk_passes           times top-k reads its scores from HBM (configuration)
 *   l2_dirty_frac, l2_writeback_eff  the lines a layer's kernels write stay dirty in the L2 up to
 *                         l2_dirty_frac·l2_bytes (cost_l2_pass); the GEMM after them writes them back
 *                         at l2_writeback_eff·hbm_GBps (cost_l2_writeback)
 *   sample_us             sampling per step */
#ifndef ODSIM_MODELS_CALIB_H
#define ODSIM_MODELS_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"
#include "models/hwcat.h"

typedef struct calib calib_t;

typedef struct calib_param {
    const char *name;
    double value;
    double stderr_v;   /* 0 when unknown */
    double lo, hi;     /* predictor range; lo > hi: none */
    const char *unit;
    const char *origin;
} calib_param_t;

/* An empty profile. Errors: ERR_NOMEM. */
int calib_new(calib_t **out, err_t *e);
/* Loads a profile file. Errors: ERR_IO, ERR_PARSE, ERR_INVAL (unknown name, unit not the name's,
 * missing value or origin: file:line:col and key), ERR_NOMEM. */
int calib_load(const char *path, calib_t **out, err_t *e);
/* As calib_load from text; `name` stands for the file name. */
int calib_load_string(const char *name, const char *text, calib_t **out, err_t *e);
void calib_free(calib_t *c);

/* Sets (adds or replaces) a parameter; strings are copied. Errors: ERR_INVAL (unknown name), ERR_NOMEM. */
int calib_set(calib_t *c, const calib_param_t *p, err_t *e);
/* Adds every numeric parameter of hw that the profile lacks, with the preset's value and origin.
 * Errors: ERR_NOMEM. */
int calib_seed(calib_t *c, const hw_t *hw, err_t *e);

/* The parameter called name, or NULL. */
const calib_param_t *calib_find(const calib_t *c, const char *name);
/* Its value; ERR_NOTFOUND (naming it) when absent. */
int calib_get(const calib_t *c, const char *name, double *out, err_t *e);

/* Records that a prediction used `name` with predictor x (NAN: no predictor). Remembered when x lies
 * outside [lo, hi] or the origin starts with "assumed". c NULL: nothing is noted (a cost weighed,
 * not predicted), and so for calib_note_outside. */
void calib_note(calib_t *c, const char *name, double x);
/* Records that a prediction extrapolated `name` beyond what was measured (e.g. a region past the last
 * knot). */
void calib_note_outside(calib_t *c, const char *name);
/* Forgets every note. */
void calib_notes_reset(calib_t *c);

typedef struct calib_flag {
    const char *name;
    const char *origin;
    bool assumed;        /* origin says assumed */
    uint64_t uses;       /* predictions that used it */
    uint64_t outside;    /* of which outside its range */
    double x_min, x_max; /* predictor values seen (NAN when none) */
    double lo, hi;
} calib_flag_t;

/* Number of flagged parameters (assumed or used outside their range), and flag i of them in
 * name order. Returns false when i is out of range. */
size_t calib_flag_count(const calib_t *c);
bool calib_flag_at(const calib_t *c, size_t i, calib_flag_t *out);
/* Writes the flags as text lines to fp. */
void calib_flags_print(const calib_t *c, FILE *fp);

/* FNV-1a 64 of the profile text loaded (0 for a profile built in memory), for reports. */
uint64_t calib_hash(const calib_t *c);
/* Number of parameters and parameter i (NULL when out of range). */
size_t calib_count(const calib_t *c);
const calib_param_t *calib_at(const calib_t *c, size_t i);

#endif
