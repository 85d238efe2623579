/* trust — which held-out validation group covers an answer's regime, and that group's error.
 *
 * validation/trust.yaml declares, per group, the regime its measured cases cover (what one case
 * times, serving modes, sessions per GPU, context tokens, model, box and profile) and its error as
 * `odsim validate` reports it. trust_match takes a point's regime and finds the first group of the
 * same kind that covers it whole; or, when none does, says in which respects the point leaves each
 * such group and which other groups measured the regime along those respects (the nearest
 * evidence). */
#ifndef ODSIM_VALIDATION_TRUST_H
#define ODSIM_VALIDATION_TRUST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include "common/err.h"

typedef struct trust_group {
    char *name, *about, *measures, *model, *box, *calibration, *origin, *note, *command;
    char **modes;                  /* serving modes (n_modes 0: one session alone, no mode) */
    size_t n_modes;
    double sessions_lo, sessions_hi;  /* per GPU */
    double context_lo, context_hi;    /* tokens; NAN: the cases have no context */
    long cases;
    double median_pct, max_pct;
} trust_group_t;

typedef struct trust trust_t;

/* Loads a trust file (validation/trust.yaml). Errors: ERR_IO, ERR_PARSE, ERR_INVAL (file:line:col
 * and key: a missing or unknown key, a range with lo > hi), ERR_NOMEM. */
int trust_load(const char *path, trust_t **out, err_t *e);
void trust_free(trust_t *t);
size_t trust_n_groups(const trust_t *t);
const trust_group_t *trust_group_at(const trust_t *t, size_t i);

/* A point's regime. NULL strings and NAN numbers are unknown before the run (said as such). */
typedef struct trust_regime {
    const char *measures;          /* as the groups' `measures` */
    const char *mode;              /* serving mode name (exec_mode_names) */
    double sessions;               /* per GPU */
    const char *sessions_why;      /* when sessions is NAN: why it is not known */
    double context_lo, context_hi; /* tokens */
    const char *context_why;       /* when the context is NAN: why */
    const char *model, *box;
    const char *calibration;       /* as given (trust_match asks same_calib whether it is a group's) */
    const char *what_if;           /* non-NULL: the hardware differs from the box's own (what) */
} trust_regime_t;

typedef struct trust_evidence {
    const trust_group_t *g;
    char *why;                     /* the respect it speaks to ("context 768Ki-1Mi") */
} trust_evidence_t;

typedef struct trust_answer {
    const trust_group_t *covered;  /* the covering group, or NULL: outside every validated regime */
    char **outside;                /* why not, against each group of the point's kind */
    size_t n_outside;
    trust_evidence_t *nearest;     /* the groups measured along the respects it leaves, and groups
                                    * of other kinds that make up part of the answer (prefill) */
    size_t n_nearest;
} trust_answer_t;

/* Matches r against t. same_calib(group calibration path, arg) tells whether the point's profile
 * is the group's. On success *out is filled (trust_answer_free). Errors: ERR_NOMEM. */
int trust_match(const trust_t *t, const trust_regime_t *r, bool (*same_calib)(const char *, void *), void *arg,
                trust_answer_t *out, err_t *e);
void trust_answer_free(trust_answer_t *a);

/* The answer as text lines, the first prefixed by `lead` ("validation, point 0 (dense): "), the
 * others indented; ends with a newline. */
void trust_answer_print(FILE *fp, const char *lead, const trust_answer_t *a);
/* As text in one string (caller frees), for telling answers apart; NULL when out of memory. */
char *trust_answer_text(const trust_answer_t *a);
/* The answer and the regime as JSON: {regime, covered_by (group or null), outside [..], nearest
 * [{group..., why}]}. */
json_t *trust_answer_json(const trust_regime_t *r, const trust_answer_t *a);

/* Token counts as people write them: 786432 → "768Ki", 1048576 → "1Mi", others in full. */
void trust_tokens(char *buf, size_t n, double tokens);

#endif
