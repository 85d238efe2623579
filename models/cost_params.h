/* cost_params — the table declaring every cost-model parameter once (models/cost_params.c): name,
 * unit, bound, meaning, and the cost_t field it fills with its scale. */
#ifndef ODSIM_MODELS_COST_PARAMS_H
#define ODSIM_MODELS_COST_PARAMS_H

#include <stddef.h>
#include "models/hwcat.h"

extern const hw_param_def_t cost_param_defs[];
extern const size_t cost_param_count;

#endif
