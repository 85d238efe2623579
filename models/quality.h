/* quality — published quality of each method against budget and k, as data with its origin
 * (models/catalog/quality.yaml). A lookup returns only points that exist; where none matches it
 * answers ERR_NOTFOUND with "no data ..." and the method's note, never an interpolated value. */
#ifndef ODSIM_MODELS_QUALITY_H
#define ODSIM_MODELS_QUALITY_H

#include <stdbool.h>
#include <stddef.h>
#include "common/err.h"

typedef struct quality_point {
    const char *method, *metric, *claim, *model, *context, *task, *budget_note;
    const char *origin;  /* paper, table or figure (or "by definition") */
    const char *source;  /* how the figure was obtained: "published" for the table's points */
    double value;        /* NAN for a claim */
    double budget_bits;  /* NAN when the source gives none */
    double k;            /* selected tokens, NAN when none */
    double k_fraction;   /* selected fraction of the context, NAN when none */
    double page;         /* landmark page tokens, NAN when none */
    double context_tokens; /* the context length the figure holds for, NAN when not one length */
    bool approx;
} quality_point_t;

typedef struct quality quality_t;

/* Loads a quality table. Errors: ERR_IO, ERR_PARSE, ERR_INVAL (unknown key, method or metric, a
 * point with neither value nor claim, a point without origin: file:line:col and key), ERR_NOMEM. */
int quality_load(const char *path, quality_t **out, err_t *e);
int quality_load_string(const char *name, const char *text, quality_t **out, err_t *e);
void quality_free(quality_t *q);

/* Whether metric is declared (the table's `metrics:`), and if so whether higher is better. */
bool quality_metric(const quality_t *q, const char *metric, bool *higher_better);
/* The declared metrics, comma-separated, into buf (for messages). */
void quality_metric_names(const quality_t *q, char *buf, size_t n);

/* The method's note ("" when none). */
const char *quality_note(const quality_t *q, const char *method);

/* Numeric points of `method` for `metric` (NULL: any) at budget_bits and k (NAN: any; matched
 * exactly, a point giving none matching any; a point giving k as a share of its context matches only
 * k NAN), at most max into out, count in *n. Errors: ERR_NOTFOUND ("no data for ...", with the
 * method's note and how many claims exist) when none matches. */
int quality_lookup(const quality_t *q, const char *method, const char *metric, double budget_bits, double k,
                   const quality_point_t **out, size_t max, size_t *n, err_t *e);

/* Every point (numeric or claim) of the table; NULL when i is out of range. */
const quality_point_t *quality_at(const quality_t *q, size_t i);

#endif
