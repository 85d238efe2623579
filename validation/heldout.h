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
 * A rule matches a row when every condition it names holds: `suite` and `op` equal; `name_prefix`
 * (held-out rules) begins the row's variant (a replay workload's name, e.g. "rdev-"); `min_n_tokens` /
 * `max_n_tokens` bound n_tokens (a row without n_tokens meets no min and every max);
 * `single_only` requires an empty concurrent_id; `key_mod: M, key_rest: R` takes only cases whose
 * heldout_case_key is R modulo M; `sealed: true` makes the group sealed (HELDOUT_SEALED). `split_by: policy` (or `method`, `op`) appends
 * ":<value>" to the group name; `policy_kind` appends the policy up to its first ':' (kbench's
 * "procs:4" → "procs"). A row no rule takes is unused. */
#ifndef ODSIM_VALIDATION_HELDOUT_H
#define ODSIM_VALIDATION_HELDOUT_H

#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "validation/kbcsv.h"

typedef struct heldout heldout_t;

/* HELDOUT_SEALED: held out by a `sealed: true` rule, validated only when asked (odsim validate --sealed). */
typedef enum { HELDOUT_UNUSED = 0, HELDOUT_FIT, HELDOUT_HELD, HELDOUT_SEALED } heldout_class_t;

/* Loads a rule file. Errors: ERR_IO, ERR_PARSE, ERR_INVAL (file:line:col and key), ERR_NOMEM. */
int heldout_load(const char *path, heldout_t **out, err_t *e);
/* As heldout_load from text; `name` stands for the file name. */
int heldout_load_string(const char *name, const char *text, heldout_t **out, err_t *e);
void heldout_free(heldout_t *h);

/* Classifies r. For HELDOUT_HELD and HELDOUT_SEALED the group name is written to group (truncated to
 * group_len). */
heldout_class_t heldout_classify(const heldout_t *h, const kbrow_t *r, char *group, size_t group_len);

/* The case key the `key_mod` rules split on: str_fnv1a (common/str.h: FNV-1a 64 with offset basis
 * 1469598103934665603) of "METHOD|N_TOKENS|SESSIONS",
 * SESSIONS the larger of streams and procs (1 when both are empty), N_TOKENS -1 when empty; for the
 * prefill suite "METHOD|N_TOKENS|CHUNK_TOKENS|SESSIONS" (the context, the chunk's tokens, CHUNK_TOKENS
 * -1 when empty); every row of one configuration (its sessions' rows and their aggregate) has the
 * same key. */
uint64_t heldout_case_key(const kbrow_t *r);

/* FNV-1a 64 of the rule text, for provenance. */
unsigned long long heldout_hash(const heldout_t *h);

#endif
