/* Shared fixtures of the models tests: the committed catalogs, a resolved machine, its engine. */
#ifndef ODSIM_TESTS_MODELS_HELPERS_H
#define ODSIM_TESTS_MODELS_HELPERS_H

#include "models/calib.h"
#include "models/hwcat.h"
#include "models/hwinst.h"
#include "models/llm.h"
#include "models/provider.h"
#include "sim/plan.h"
#include "sim/sim.h"

typedef struct tmachine {
    hwcat_t *cat;
    llmcat_t *llms;
    hw_t hw;
    calib_t *cal;
    sim_t *sim;
    llm_t m;
} tmachine_t;

/* Path of a file under the source tree (ODSIM_ROOT or the working directory). */
const char *th_path(const char *rel, char *buf, size_t n);
/* Loads catalogs, resolves box (and link, NULL for the GPU's), model; builds the engine. Asserts. */
void th_machine(tmachine_t *t, const char *box, const char *link, const char *model);
void th_machine_free(tmachine_t *t);
/* A method's provider from its settings `yaml` on t's machine and model (caller frees). Asserts. */
provider_t *th_provider(tmachine_t *t, const char *yaml);
/* th_provider's provider (caller frees) and its plan of `phase` at ctx tokens with new_tokens into
 * *plan (initialised here; caller frees), validated. Asserts. */
provider_t *th_plan(tmachine_t *t, const char *yaml, plan_phase_t phase, uint64_t ctx, uint32_t new_tokens, plan_t *plan);

#endif
