/* vflags — `odsim validate`'s summary of the calibration flags, per parameter.
 *
 * Each case's prediction lists the calibration parameters it used outside their fitted range or
 * whose origin is assumed (cmp_case_t.flags: models/calib.h calib_flags_print lines). A case is
 * flagged only when clamping its out-of-range uses into their range moves a compared value by more
 * than CMP_FLAG_PCT (cmp_set_clamp); assumed parameters have no range, never flag a case, and are
 * counted apart (docs/calibration.md). Per parameter the summary counts the cases that used it
 * outside its range (whether its cost term clamps, or is flat in its predictor there), those it
 * flags (its clamp alone moves them: cmp_case_t.flagged_by), and the cases that used it assumed. */
#ifndef ODSIM_VALIDATION_VFLAGS_H
#define ODSIM_VALIDATION_VFLAGS_H

#include <jansson.h>
#include <stdio.h>
#include "validation/compare.h"

/* The summary as text lines: the flagged count and the rule, then a line per parameter. */
void vflags_text(FILE *fp, const cmp_t *c);

/* The summary as JSON: {"flagged": N, "of": M, "threshold_pct": 1, "outside": [{"name", "clamps",
 * "cases", "flagged"}], "assumed": [{"name", "cases"}]}. NULL when out of memory. */
json_t *vflags_json(const cmp_t *c);

#endif
