/* fit — the calibration fitter: measured kbench rows (the fit set of the held-out rule) → the
 * parameters of models/calib.h, with standard errors, fitted ranges, origins and residuals.
 *
 * What is fitted from what (every form is models/cost.h's):
 *   h2d_GBps, d2h_GBps, ce_latency_us   single CE copies by size, per direction: t = lat + bytes/bw,
 *                                       weighted linear least squares (weights 1/t²: relative
 *                                       errors); the profile's one latency is the H2D fit's (decode's
 *                                       critical path), D2H's own is noted
 *   duplex_GBps          mix:h2d+d2h rows: the pair's last completion = lat + Σbytes/duplex
 *   ce2d_row_ns          h2d_copy2d rows: t − lat − bytes/h2d = rows·row (all 2D rows move the same
 *                        bytes, so their latency and bandwidth are not separately identifiable: the
 *                        CE values are used)
 *   cebatch_piece_us     h2d_batch rows: t − lat − bytes/h2d = pieces·piece (per-piece latency and
 *                        piece-size efficiency are one parameter); both per-piece fits are robust
 *                        (bisquare) on the relative form, as a few piece sizes are outliers
 *   gather_peak_GBps, gather_block_GBps, gather_rows_Mps_{256MiB,1GiB,4GiB,16GiB}
 *                        sm_gather rows (the main allocator and variant): rate = min(peak,
 *                        blocks·block, rows(region)·row_bytes), fitted in log space by alternating
 *                        assignment of rows to their binding term and least squares per term
 *                        (gather_latency_us is not identifiable: every gather moves the same bytes;
 *                        the preset's value is used and the profile says so)
 *   gather_blocks        the blocks per gather of kbench's grid (a configuration, recorded)
 *   gather_weight        overlap rates of mix:copy+gather and mix:gather+d2h: weight ratio of the
 *                        concurrent rates (ce_weight fixed to 1: only the ratio is identifiable)
 *   gather_duplex_coef   mix:gather+d2h: coef = (duplex − d2h rate)/gather rate while both run
 *   kernel_latency_us, kernel_mem_eff   HBM-resident kernels (scan, quantize, wf_plan, attn_* at a
 *                        placement other than host): t = lat + bytes/(eff·hbm), all ops together
 *                        (each op's own fit is noted, and written as <op>_latency_us and
 *                        <op>_mem_eff where the catalogs declare those names)
 *   topk_latency_us, topk_elem_ns, topk_elem_l2_ns, topk_winner_ns, topk_winner_row_ns   topk rows:
 *                        t = lat + elem·(scores per block), elem_l2 instead when the rows' scores fit
 *                        in L2, + winner·(rows' warps holding a winner) + winner_row·(one row's),
 *                        WLS 1/t² (models/cost.h)
 *   scan_<family>_*      each method's scan alone where it has three sizes or more; Fathom's other
 *                        kernels (v1, v2, per query head) their efficiency with Fathom's fixed time
 *   ce_handoff_us        launch rows: after_copy − after_kernel (medians)
 *   event_us             launch rows: (chain_events − chain) / their kernels (medians)
 *   gemm_mem_eff, gemm_compute_eff, gemm_latency_us   gemm / lm_head rows by batch: t = lat +
 *                        max(bytes/(em·hbm), flops/(ec·peak)), log space by binding term; FLOPs from
 *                        a flops column, else kbench's per_s (FLOP/s for gemm rows) × t; lat (where
 *                        declared) from the memory-bound rows' intercept, alternating to convergence
 *   launch_us, sample_us host time per item (t / pieces) of launch rows (variant host_enqueue when
 *                        present: empty_b2b is the GPU's time) and sample rows
 *   graph_launch_us      graph_replay rows by node count: t = launch + nodes·per_node, the intercept
 *   wf_plan_latency_us   wf_plan rows (kbench gives them no bytes): their mean time, where declared
 * A parameter the data does not determine is left out (the preset's value stays) with a note. */
#ifndef ODSIM_VALIDATION_FIT_H
#define ODSIM_VALIDATION_FIT_H

#include <stddef.h>
#include "common/err.h"
#include "models/calib.h"
#include "validation/heldout.h"
#include "validation/kbcsv.h"

typedef struct fit fit_t;

typedef struct fit_param {
    const char *name;
    double value, stderr_v;  /* stderr 0: not determined (one observation) */
    double lo, hi;           /* predictor range (lo > hi: none) */
    const char *unit;
    const char *origin;      /* "fitted: FILE rows N (...)" */
} fit_param_t;

/* Residuals of one group of fitted rows, relative to the measured median time. */
typedef struct fit_resid {
    const char *name;
    size_t n;
    double rms_rel, max_rel;
} fit_resid_t;

/* Fits every parameter the fit-set rows of `set` determine. `seed` supplies the values the fits
 * need but the data does not determine (hbm_GBps, bf16_TFLOPS, gather_latency_us, and fallbacks):
 * usually a profile seeded from the hardware preset. On success *out owns the result. Errors:
 * ERR_CONVERGE (a fit failed: names it; nothing is produced), ERR_INVAL (no fit rows, or none that
 * determine a parameter), ERR_NOTFOUND (seed lacks a needed value), ERR_NOMEM. */
int fit_run(const kbset_t *set, const heldout_t *ho, const calib_t *seed, fit_t **out, err_t *e);
void fit_free(fit_t *f);

size_t fit_n_params(const fit_t *f);
const fit_param_t *fit_param_at(const fit_t *f, size_t i);
/* The fitted parameter `name`, or NULL. */
const fit_param_t *fit_find(const fit_t *f, const char *name);
size_t fit_n_resid(const fit_t *f);
const fit_resid_t *fit_resid_at(const fit_t *f, size_t i);
/* A fitted row's measured and fitted value (times in µs; the sharing groups hold ratios), in
 * residual group `resid`. */
typedef struct fit_point {
    size_t resid;
    double meas, pred;
} fit_point_t;

size_t fit_n_points(const fit_t *f);
const fit_point_t *fit_point_at(const fit_t *f, size_t i);
/* Notes: parameters not determined, identifiability, per-op kernel fits, unused rows. */
size_t fit_n_notes(const fit_t *f);
const char *fit_note_at(const fit_t *f, size_t i);
/* Rows of the set in the fit set, held out, and unused. */
void fit_row_counts(const fit_t *f, size_t *n_fit, size_t *n_held, size_t *n_unused);

#endif
