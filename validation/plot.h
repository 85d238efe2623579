/* plot — predicted-vs-measured scatter plots with gnuplot (SVG and PNG), for `odsim fit` (fitted
 * rows against the fitted model) and `odsim validate` (held-out cases against predictions).
 *
 * Writes DIR/STEM.gp (the data inline, one gnuplot index per group) and runs gnuplot for
 * DIR/STEM.svg and DIR/STEM.png, the three published together (common/gnuplot.h, common/outset.h).
 * gnuplot is optional: when it is missing, the script is written and a note says so. */
#ifndef ODSIM_VALIDATION_PLOT_H
#define ODSIM_VALIDATION_PLOT_H

#include <stddef.h>
#include "common/err.h"

typedef struct plot_point {
    size_t group;            /* index into the group names */
    double meas, lo, hi;     /* measured value and its spread (lo = hi = meas when none) */
    double pred;
} plot_point_t;

/* `axis` names the quantity on both axes. Errors: ERR_IO (script not writable, gnuplot failed or
 * wrote a bad plot: nothing of STEM changes). *note is "" or says why there is no SVG/PNG. */
int plot_pred_vs_meas(const char *dir, const char *stem, const char *axis, const char *const *groups,
                      size_t n_groups, const plot_point_t *pts, size_t n_pts, char *note, size_t note_len,
                      err_t *e);

#endif
