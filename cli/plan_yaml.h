/* plan_yaml — a built-in method's plan written as a whole user plan (docs/plans.md): `odsim plan
 * --show-yaml`. The plan's ops are the replay ops cli/plan_replay.h maps them to (so it is as
 * approximate as that mapping), named by the plan ops' kinds, laid out as the user plan's `step`,
 * `layer` and `end` lists when every layer's ops are alike (the same paths, sizes and dependencies,
 * `prev.ID` for the previous layer's), else all in `step`. An op whose sizes differ between the plan
 * at context C and at 2C gets `scale: context`. */
#ifndef ODSIM_CLI_PLAN_YAML_H
#define ODSIM_CLI_PLAN_YAML_H

#include <stdint.h>
#include <stdio.h>
#include "cli/plan_replay.h"
#include "kernels/replay_fmt.h"
#include "sim/plan.h"

typedef struct plan_yaml_in {
    const plan_t *plan;               /* the plan at context (its kinds and layers) */
    const rf_session_t *at_c, *at_2c; /* its replay mapping at context and at twice the context */
    const plan_replay_note_t *note;   /* the mapping of at_c (its source ops) */
    uint64_t context;
    int layers;                       /* the model's */
    const char *name;                 /* the plan's name (docs/replay.md's charset) */
    const char *what;                 /* the comment line naming where it came from */
} plan_yaml_in_t;

/* Writes the plan as YAML to f: a comment line saying it is approximate, then the plan. Returns 0,
 * or -1 when the stream reports an error. */
int plan_yaml_write(FILE *f, const plan_yaml_in_t *in);

#endif
