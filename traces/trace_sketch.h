/* trace_sketch — a distribution of non-negative values in bounded memory, for `odsim trace info`.
 *
 * The first TRACE_SKETCH_EXACT values are kept and their percentiles are exact (nearest rank). Past
 * that the values move into fixed log buckets: each power of two split into TRACE_SKETCH_SUB equal
 * parts, so a percentile is its bucket's midpoint, within 1/(2·TRACE_SKETCH_SUB) = 0.2% of the true
 * nearest-rank value (relative), clamped to [min, max]. Count, mean, min and max stay exact. Memory
 * is at most 8·TRACE_SKETCH_EXACT bytes, then 8·TRACE_SKETCH_SUB·96 (196 KB), whatever the count. */
#ifndef ODSIM_TRACES_TRACE_SKETCH_H
#define ODSIM_TRACES_TRACE_SKETCH_H

#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

#define TRACE_SKETCH_EXACT 65536u
#define TRACE_SKETCH_SUB 256u

typedef struct trace_sketch {
    uint64_t n;
    double sum, min, max;
    double *v;               /* exact values while n <= TRACE_SKETCH_EXACT, else NULL */
    size_t cap;
    uint64_t *bucket;        /* log buckets once past TRACE_SKETCH_EXACT, else NULL */
    uint64_t zeros;          /* values of 0 (and below the smallest bucket), bucketed */
} trace_sketch_t;

/* Adds x (>= 0; a negative value counts as 0). Errors: ERR_NOMEM (the sketch is unchanged). */
int trace_sketch_add(trace_sketch_t *k, double x, err_t *e);
/* The nearest-rank p-quantile (0 < p <= 1): exact, or within the bucket error above; 0 when empty.
 * Sorts the exact values in place. */
double trace_sketch_quantile(trace_sketch_t *k, double p);
/* Whether the percentiles are exact (no more than TRACE_SKETCH_EXACT values). */
int trace_sketch_exact(const trace_sketch_t *k);
void trace_sketch_free(trace_sketch_t *k);

#endif
