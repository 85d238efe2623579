/* vreport — the outputs of `odsim validate`: a text table, JSON, CSV and a predicted-vs-measured
 * plot (gnuplot: SVG and PNG). Each records odsim's version, the calibration profile and its hash,
 * the data directory and the held-out rule's hash; the JSON and CSV carry each case's scenario. */
#ifndef ODSIM_VALIDATION_VREPORT_H
#define ODSIM_VALIDATION_VREPORT_H

#include <stdint.h>
#include <stdio.h>
#include "common/err.h"
#include "validation/compare.h"

typedef struct vreport_info {
    const char *data_dir, *calib_path, *heldout_path;
    uint64_t calib_hash, heldout_hash;
    const char *against;   /* NULL, or the run whose measurements stand for the predictions */
    double fit_max_n_tokens; /* the largest context of the fit set (NAN, 0: unknown, no ratio table) */
} vreport_info_t;

/* The per-case table (a case flagged by clamping marked "[flagged]") and the group summaries, as text; for the groups that extrapolate in context
 * (`context`, and `whole*`: issue 31) their errors by the ratio of a case's context to the fit
 * set's largest (info->fit_max_n_tokens), pooled over p50, p99 and throughput; for groups of replay
 * rows (issue 34) their errors by stratum: serving mode (procs, streams, batched), sessions (1, 2-4,
 * 5-16) and both, from the rows' policy MODE:N, pooled the same way. */
void vreport_text(FILE *fp, const cmp_t *c, const vreport_info_t *info);  /* ends with vflags_text */

/* The whole report as JSON text (*out heap, caller frees): {"odsim", "calibration", ...,
 * "summary": {GROUP: {"n", "failed", "flagged", "median_abs_err_pct", "max_abs_err_pct",
 * "p50": {...}, "p99": {...}, "throughput": {...}, "beyond_floor": {"n", "of"}, and for a replay
 * group "strata": {"procs": {"cases", "n", ...}, "sessions 2-4": {...}, "procs, sessions 1": ...}}},
 * "flags": validation/vflags.h's summary, "cases": [...]}
 * (each case's "floor_pct": its run-to-run floor per metric, null without one; "flags": the
 * calibration's flag lines; "flagged"; "clamped": {"params", "p50_us", "p99_us", "throughput_per_s",
 * "shift_pct", "flagged_by"}, the prediction with the out-of-range parameters clamped, cmp_set_clamp).
 * Errors: ERR_NOMEM. */
int vreport_json(const cmp_t *c, const vreport_info_t *info, char **out, err_t *e);

/* One CSV row per case, written atomically. Errors: ERR_IO. */
int vreport_csv(const char *path, const cmp_t *c, const vreport_info_t *info, err_t *e);

/* Writes DIR/validate.dat and .gp, and runs gnuplot for DIR/validate.svg and .png (p50).
 * Returns ERR_OK with *note set to a message when gnuplot is missing or fails (the plot is
 * optional); *note is "" otherwise. Errors: ERR_IO (the data or script could not be written). */
int vreport_plot(const char *dir, const cmp_t *c, char *note, size_t note_len, err_t *e);

#endif
