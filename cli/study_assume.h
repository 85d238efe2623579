/* study_assume — the assumed parameters a result depends on: each assumed calibration parameter
 * (origin "assumed: ...": copied from another platform, a preset without measurement) whose ±10%
 * change moves a plan's standalone time by more than 0.5%, with its elasticity, found by
 * re-planning with the parameter perturbed. `odsim plan` asks it of its own plan, `odsim run` of
 * the plan of one decode step of each point. */
#ifndef ODSIM_CLI_STUDY_ASSUME_H
#define ODSIM_CLI_STUDY_ASSUME_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include "cli/study.h"
#include "sim/plan.h"

typedef struct study_assumption {
    char *name, *origin;
    double value;           /* as used */
    double elasticity;      /* d ln(time) / d ln(value), from the ±10% points */
    double rel_lo, rel_hi;  /* relative change of the time at 0.9x and 1.1x the value */
} study_assumption_t;

typedef struct study_assumptions {
    study_assumption_t *v;
    size_t n;
    uint64_t context_tokens;
    uint32_t new_tokens;
    double time_us;         /* the plan's standalone time, unperturbed */
} study_assumptions_t;

/* The assumptions of the plan of req (a decode step or prefill chunk) of point i of s, alone on an
 * idle machine, into *out (free with study_assumptions_free). Errors: those of study_alone_open and
 * of building the plan. */
int study_assumptions_of(study_t *s, size_t i, const plan_request_t *req, study_assumptions_t *out, err_t *e);
/* As study_assumptions_of for a run's point: the plan of one decode step at the context its
 * workload reaches (a probe's n_tokens, a generator's max_context_tokens, else 1M tokens). */
int study_assumptions_run(study_t *s, size_t i, study_assumptions_t *out, err_t *e);
void study_assumptions_free(study_assumptions_t *a);

/* Text lines naming each assumption (nothing when there are none). */
void study_assumptions_print(FILE *fp, const study_assumptions_t *a);
/* The `assumptions` array: {name, value, origin, elasticity, time_change_at_0.9x, time_change_at_1.1x}. */
json_t *study_assumptions_json(const study_assumptions_t *a);

#endif
