/* study_alone — one sweep point of a study resolved for a plan alone on an idle machine (odsim
 * plan): its machine, calibration, LLM shape and method, assembled exactly as a run's replication
 * assembles them, so plan and run answer the same question with the same numbers. */
#ifndef ODSIM_CLI_STUDY_ALONE_H
#define ODSIM_CLI_STUDY_ALONE_H

#include "cli/study.h"
#include "models/calib.h"
#include "models/hwcat.h"
#include "models/method.h"
#include "sim/sim.h"

typedef struct study_alone study_alone_t;

/* Resolves point i of s: hardware, calibration (profile, what-ifs, presets), the machine built in a
 * fresh engine, and the method. *out owns them (free with study_alone_free). Errors: as
 * study_run's before it simulates. */
int study_alone_open(study_t *s, size_t i, study_alone_t **out, err_t *e);
void study_alone_free(study_alone_t *a);

const hw_t *study_alone_hw(const study_alone_t *a);
calib_t *study_alone_calib(study_alone_t *a);
sim_t *study_alone_sim(study_alone_t *a);
const method_t *study_alone_method(const study_alone_t *a);

#endif
