/* study_trust — which held-out validation group covers each point of a study, and its error
 * (validation/trust.h): a point's regime from its scenario, the answer in `odsim run`'s and `odsim
 * capacity`'s first lines and in their JSON (`validation`). */
#ifndef ODSIM_CLI_STUDY_TRUST_H
#define ODSIM_CLI_STUDY_TRUST_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include "cli/study.h"
#include "validation/trust.h"

#define STUDY_TRUST_FILE "validation/trust.yaml"

typedef struct study_trust {
    trust_regime_t r;              /* its strings point into the buffers below */
    trust_answer_t a;
    char measures[32], mode[32], model[160], box[64], calibration[1024], what_if[256];
} study_trust_t;

/* Loads STUDY_TRUST_FILE under s's data root. Errors: those of trust_load. */
int study_trust_load(const study_t *s, trust_t **out, err_t *e);

/* The regime of point i of s and the answer of t for it: what it measures (a generator's or trace's
 * sessions: whole-model decode steps; a probe: its op, layer step, session step or prefill chunk),
 * its serving mode, its sessions per GPU (`sessions` when not 0, else a closed population's users;
 * over the box's GPUs, rounded up), its context from the sessions' initial median to their maximum,
 * its model (with any shape override), box (any other hardware key is a what-if) and profile.
 * Errors: those of resolving the point, ERR_NOMEM. */
int study_trust_of(study_t *s, const trust_t *t, size_t i, uint32_t sessions, study_trust_t *out, err_t *e);
void study_trust_free(study_trust_t *v);

/* The answers of points first..first+n-1 (v[0..n)) as text: one answer for all when they agree,
 * else one per point, each led by "validation, point I (LABEL): ". */
void study_trust_print(FILE *fp, const study_t *s, const study_trust_t *v, size_t first, size_t n);
/* One point's `validation` object (trust_answer_json). */
json_t *study_trust_json(const study_trust_t *v);

#endif
