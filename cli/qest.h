/* qest — odsim's own quality estimates: every method's selection (kernels/ref/select.h) on every layer,
 * KV head and decode step of a key source (synthetic keys, validation/kvsynth.h, or a user's dump,
 * validation/kvdump.h), averaged into one row per method and setting.
 *
 * A row's metrics are means over all steps (layers × KV heads × steps) with their standard errors;
 * each (layer, KV head)'s own mean attention error is kept for per-setting comparisons. The pertoken
 * channels are calibrated on the same (layer, KV head)'s queries (an optimistic choice for pertoken);
 * a dump without values gets N(0, 1) values drawn from the seed. hashattn is never estimated: its
 * signatures are learned and odsim trains none (its row says `not comparable`; lsh is the untrained
 * counterpart). */
#ifndef ODSIM_CLI_QEST_H
#define ODSIM_CLI_QEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "kernels/ref/select.h"
#include "validation/kvdump.h"
#include "validation/kvsynth.h"

#define QEST_MAX_ROWS 64

typedef struct qest_stat {
    double sum, sum2;
} qest_stat_t;

typedef struct qest_row {
    const char *method;       /* name as users type it */
    int kind;                 /* kref_sel_method_t; -1: not comparable */
    double budget_bits;       /* pertoken, sparq, fathom, lsh */
    int page;                 /* landmark */
    const char *why;          /* not comparable, or why the setting does not apply to the keys */
    char note[160];           /* the text `why` points at when it names the keys' numbers */
    long n;                   /* steps measured */
    qest_stat_t recall, kept_mass, attn_error;
    double read_bits, plane_bits, active;   /* means over steps */
    double tokens;            /* mean tokens selected per set (landmark: whole pages) */
    double *entry_error;      /* per (layer, KV head): mean attention error */
} qest_row_t;

typedef struct qest_opts {
    int k;                    /* tokens selected; 0: ceil(n / sparsity) */
    int sparsity;
    int per_head;             /* 0: one selection per KV head; 1: per query head */
    uint64_t seed;            /* lsh projections, values of a dump without them */
} qest_opts_t;

typedef struct qest_source {
    const kvsynth_params_t *synth;   /* one of the two */
    const kvdump_t *dump;
    size_t entries;
} qest_source_t;

/* What the source held, for the report's first lines. */
typedef struct qest_summary {
    size_t entries, steps;
    int dim, group;
    size_t n_min, n_max;
    int k_min, k_max;
    bool values_drawn;
} qest_summary_t;

/* Appends the rows of `spec` to rows[*n]: "NAME" (its default settings) or "NAME:A,B,..." (bits, or
 * pages for landmark). Names: dense exact pertoken sparq fathom landmark lsh hashattn. Errors:
 * ERR_INVAL naming the spec (unknown method, bad number), ERR_RANGE (more than QEST_MAX_ROWS). */
int qest_add_rows(const char *spec, qest_row_t *rows, size_t *n, err_t *e);
/* The methods the estimator runs by default, in order (the registered methods by their selection,
 * and the references exact and lsh): qest_default_method(i) for i < qest_n_defaults(), NULL for a
 * selection no registered method has. */
size_t qest_n_defaults(void);
const char *qest_default_method(size_t i);

/* Runs every row over every step of the source. Errors: those of the source (naming its file),
 * ERR_NOMEM. */
int qest_run(const qest_source_t *src, const qest_opts_t *o, qest_row_t *rows, size_t n_rows,
             qest_summary_t *sum, err_t *e);

/* Mean and standard error of a row's statistic (se 0 for fewer than 2 steps). */
void qest_mean_se(const qest_row_t *r, const qest_stat_t *s, double *mean, double *se);

/* Frees the rows' per-entry arrays. */
void qest_rows_free(qest_row_t *rows, size_t n);

#endif
