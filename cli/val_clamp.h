/* val_clamp — whether `odsim validate` flags a case: its prediction predicted again with the
 * calibration parameters it used outside their fitted range clamped into it (models/calib.h
 * calib_clamp), flagged when that moves a compared value by more than CMP_FLAG_PCT.
 *
 * Only parameters whose cost term reads its predictor through calib_x (calib_flag_t.clamps) are
 * clamped; a term flat in its predictor (a fixed time or an efficiency
 * fitted over a range of sizes, a curve already flat past its last knot) would not move. When
 * clamping all of them together moves the case, each is clamped alone to say which ones do
 * (cmp_case_t.flagged_by); a case whose clamped prediction fails is flagged. Assumed parameters are
 * not clamped (docs/calibration.md). */
#ifndef ODSIM_CLI_VAL_CLAMP_H
#define ODSIM_CLI_VAL_CLAMP_H

#include <stddef.h>
#include "common/err.h"
#include "validation/compare.h"

/* Predicts the case again with the comma-separated parameters `clamp` clamped into their range,
 * into *out. Errors: ERR_NOMEM (fatal); any other: the clamped prediction failed. */
typedef int (*val_clamp_fn)(void *arg, const char *clamp, cmp_pred_t *out, err_t *e);

/* Decides whether case i of c (predicted) is flagged, `names` the parameters its prediction used
 * outside their range whose term clamps (calib_clamp_list: nothing to do when ""), predicting
 * through fn. Errors: ERR_NOMEM. */
int val_clamp_case(cmp_t *c, size_t i, const char *names, val_clamp_fn fn, void *arg, err_t *e);

#endif
