/* heldout — which measured rows the fitter may use and which are held out for validation.
 *
 * The rule lives in a file (validation/heldout.yaml), fixed before predictions are compared:
 *
 *   heldout:                       # tried first, in order; the first match wins
 *     - {group: step, suite: step, op: layer_step}
 *     - {group: step_stage, suite: step}
 *     - {group: concurrency, suite: concurrency, split_by: policy_kind}
 *     - {group: context, min_n_tokens: 262145}
 *   fit:                           # then these, in order
 *     - {suite: link}
 *     - {suite: kernels, single_only: true, max_n_tokens: 262144}
 *
 * A rule matches a row when every condition it names holds: `suite` and `op` equal; `min_n_tokens` /
 * `max_n_tokens` bound n_tokens (a row without n_tokens meets no min and every max);
 * `single_only` requires an empty concurrent_id. `split_by: policy` (or `method`, `op`) appends
 * ":<value>" to the group name; `policy_kind` appends the policy up to its first ':' (kbench's
 * "procs:4" → "procs"). A row no rule takes is unused. */
#ifndef ODSIM_VALIDATION_HELDOUT_H
#define ODSIM_VALIDATION_HELDOUT_H

#include <stddef.h>
#include "common/err.h"
#include "validation/kbcsv.h"

typedef struct heldout heldout_t;

typedef enum { HELDOUT_UNUSED = 0, HELDOUT_FIT, HELDOUT_HELD } heldout_class_t;

/* Loads a rule file. Errors: ERR_IO, ERR_PARSE, ERR_INVAL (file:line:col and key), ERR_NOMEM. */
int heldout_load(const char *path, heldout_t **out, err_t *e);
/* As heldout_load from text; `name` stands for the file name. */
int heldout_load_string(const char *name, const char *text, heldout_t **out, err_t *e);
void heldout_free(heldout_t *h);

/* Classifies r. For HELDOUT_HELD the group name is written to group (truncated to group_len). */
heldout_class_t heldout_classify(const heldout_t *h, const kbrow_t *r, char *group, size_t group_len);

/* FNV-1a 64 of the rule text, for provenance. */
unsigned long long heldout_hash(const heldout_t *h);

#endif
