/* cost_params — the table declaring every cost-model parameter once (models/cost_params.c): name,
 * unit, bound, meaning, and the cost_t field it fills with its scale. */
#ifndef ODSIM_MODELS_COST_PARAMS_H
#define ODSIM_MODELS_COST_PARAMS_H

#include <stddef.h>
#include "models/hwcat.h"

extern const hw_param_def_t cost_param_defs[];
extern const size_t cost_param_count;

/* A curve: one parameter whose points are data. A profile writes it as
 *     gather_rows_Mps: {unit: "Mrows/s", points: {256MiB: {value: .., origin: ..}, 1GiB: {..}}}
 * and each point becomes the knot parameter <name>_<label> (prefix + label), which the cost forms
 * read; labels are the knots' regions (models/cost.h). */
typedef struct cost_curve {
    const char *prefix;         /* "<name>_" */
    int n_knots;
    const char *const *knots;   /* the knots' parameter names, ascending region */
} cost_curve_t;
extern const cost_curve_t cost_curves[];
extern const size_t cost_curve_count;

/* The curve called name ("gather_rows_Mps"), or NULL. */
const cost_curve_t *cost_curve_find(const char *name);
/* The curve whose knot parameter key is (its index in *knot when knot is not NULL), or NULL. */
const cost_curve_t *cost_curve_of(const char *key, int *knot);
/* The index of the knot labelled label ("256MiB") of cv, or -1. */
int cost_curve_knot(const cost_curve_t *cv, const char *label);

#endif
