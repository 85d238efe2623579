/* uplan — plans as data (docs/plans.md): a user's description of an implementation's decode step, or
 * edits of a built-in method's plan, read from YAML (common/cfg.h).
 *
 * A whole plan lists ops in replay terms (kernels/replay_fmt.h: a path, a stream, `after`
 * dependencies and the path's sizes) once per step before the layers (`step`), in every layer
 * (`layer`) and once after them (`end`); at a context of n tokens it is a replay session (step ops,
 * layers 0..L-1, end ops), its `scale: context` ops' sizes grown by n over the plan's context, and is
 * costed op by op with models/replay.h's forms, so that its emitted replay file is exact.
 *
 * Edits change the plan a built-in provider (models/provider.h) builds every step: set an op's time,
 * drop it (its successors inherit its dependencies), replace it by a replay op, or add a replay op
 * after it. Each edit matches ops by kind (and layer); one that matches no op of the plan at the
 * file's context is an error (uplan_check_edits). */
#ifndef ODSIM_MODELS_UPLAN_H
#define ODSIM_MODELS_UPLAN_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"
#include "kernels/replay_fmt.h"
#include "models/cost.h"
#include "models/hwcat.h"
#include "models/provider.h"
#include "models/replay.h"
#include "sim/plan.h"

#define UPLAN_VERSION 1
#define UPLAN_ID_MAX 31          /* characters of an op id */
#define UPLAN_WHERE_MAX 320      /* "FILE:LINE:COL" of an op or edit, for messages */
#define UPLAN_MAX_LAYERS 1024

typedef enum { UPLAN_STEP = 0, UPLAN_LAYER, UPLAN_END, UPLAN_LISTS } uplan_list_t;

#define UPLAN_MAX_BACK 8            /* prevK.ID: at most this many layers back */

/* An `after` entry: op `op` of list `list`; for a layer op, `back` layers before the op's own (0:
 * the same layer; from `end`, 1 is the last layer). */
typedef struct uplan_ref {
    uint8_t list;
    uint8_t back;
    uint32_t op;
} uplan_ref_t;

typedef struct uplan_op {
    char id[UPLAN_ID_MAX + 1];   /* "" when not given */
    int kind;                    /* op kind (models/opkind.h) reports name it by */
    bool kind_given;             /* kind given in the file (a replacement keeps the matched op's otherwise) */
    bool stream_given;
    rf_op_t op;                  /* path, stream and sizes at the plan's context (its after unused) */
    bool scale_context;          /* pieces, span, bytes, flops, us grow with the context */
    uint32_t n_after;
    uplan_ref_t after[RF_MAX_AFTER];
    char where[UPLAN_WHERE_MAX];
} uplan_op_t;

typedef enum { UPLAN_EDIT_US = 0, UPLAN_EDIT_DROP, UPLAN_EDIT_REPLACE, UPLAN_EDIT_ADD } uplan_edit_what_t;

typedef struct uplan_edit {
    uplan_edit_what_t what;
    int kind;                    /* the matched op kind */
    int layer;                   /* the matched layer; -1: any op of that kind, per-step ones included */
    uplan_op_t op;               /* UPLAN_EDIT_REPLACE, UPLAN_EDIT_ADD; UPLAN_EDIT_US: a spin of the
                                  * op's time (us, scale_context) */
    char where[UPLAN_WHERE_MAX];
} uplan_edit_t;

typedef struct uplan {
    char name[RF_NAME_MAX + 1];
    char file[UPLAN_WHERE_MAX];
    uint64_t context;            /* tokens the sizes are stated at */
    bool whole;                  /* a whole plan (step/layer/end) or edits */
    int layers;                  /* whole: layers per step; 0: the model's */
    uint64_t region_bytes;       /* whole: host bytes at the plan's context; 0: the widest span */
    uplan_op_t *ops[UPLAN_LISTS];
    uint32_t n_ops[UPLAN_LISTS];
    uplan_edit_t *edits;
    uint32_t n_edits;
} uplan_t;

/* Reads the plan file at path. Errors: ERR_IO, ERR_PARSE, ERR_INVAL and ERR_RANGE naming
 * FILE:LINE:COL and the key (unknown keys, paths, kinds, ids; forward, self or unknown `after`; a size
 * outside docs/replay.md's range), ERR_NOMEM. */
int uplan_load(const char *path, uplan_t **out, err_t *e);
/* As uplan_load from text[0..len); name stands for the file in messages. */
int uplan_parse(const char *name, const char *text, size_t len, uplan_t **out, err_t *e);
/* Frees a plan; NULL is ok. */
void uplan_free(uplan_t *u);

/* The layers a whole plan's step has on a model of model_layers layers. */
int uplan_layers(const uplan_t *u, int model_layers);

/* Op o of u as a replay op at context n (no `after`): its sizes grown by n over u's context where it
 * scales (rounded up, at least 1). Errors: ERR_RANGE (a grown size beyond docs/replay.md's range,
 * naming the op's FILE:LINE:COL). */
int uplan_eval_op(const uplan_t *u, const uplan_op_t *o, uint64_t n, rf_op_t *r, err_t *e);

/* A whole plan's step at `context` tokens and `layers` layers as a replay session (*s zeroed first:
 * region, ops in issue order) and each op's label (labels: RF_MAX_OPS entries, or NULL). Errors:
 * ERR_RANGE (more than RF_MAX_OPS ops; a grown size or the region beyond the format's range, naming
 * the op's FILE:LINE:COL), ERR_INVAL (not a whole plan). */
int uplan_session(const uplan_t *u, uint64_t context, int layers, rf_session_t *s, replay_label_t *labels, err_t *e);

/* Applies u's edits to plan in (built at context tokens) into out (reset first, same phase and
 * tokens), replacements and additions costed with models/replay.h's forms on paths pa. matched
 * (u->n_edits entries, or NULL) receives how many ops each edit matched. Errors: ERR_INVAL (two
 * edits that set, drop or replace one op), those of replay_cost_op, ERR_NOMEM. */
int uplan_apply_edits(const uplan_t *u, const plan_t *in, uint64_t context, const cost_t *c, const cost_paths_t *pa,
                      plan_t *out, uint32_t *matched, err_t *e);

/* Checks that each of u's edits matches an op of p's decode plan at u's context on GPU 0 of sim (the
 * machine hw). Errors: ERR_INVAL naming the edit's FILE:LINE:COL and what it matched nothing in;
 * those of provider_build and uplan_apply_edits. */
int uplan_check_edits(const uplan_t *u, provider_t *p, const sim_t *sim, const hw_t *hw, err_t *e);

/* A plan provider running u (borrowed: it must outlive the provider) on model layers `layers`:
 * a whole plan's step (the same op list for a decode step or a prefill chunk, its footprint its
 * region on the host and its ops' device buffers in HBM; base {NULL}), or base's plans edited (base's
 * footprint; base is owned by the provider from then on, destroyed with it). cost (borrowed) costs
 * the ops.
 * Errors: ERR_NOMEM. */
int uplan_provider(const uplan_t *u, int layers, const hw_t *hw, const cost_t *cost, plan_provider_t base,
                   plan_provider_t *out, err_t *e);

/* Builds a whole plan's step at context tokens into out (appended; labels its ops) for GPU gpu of
 * sim: what the provider builds, for `odsim plan`. Errors: those of uplan_session and
 * replay_cost_session, ERR_NOTFOUND (a resource missing). */
int uplan_build_whole(const uplan_t *u, uint64_t context, int layers, const hw_t *hw, const cost_t *cost,
                      const sim_t *sim, int gpu, plan_t *out, err_t *e);

#endif
