/* trace_sketch — exact values up to a bound, then fixed log buckets (see trace_sketch.h). */
#include "traces/trace_sketch.h"

#include "common/grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Binary exponents bucketed: values from 2^-31 (below a nanosecond in seconds) to 2^65 (above any
 * uint64 count); smaller values count as zero, larger ones in the top bucket. */
enum { EXP_MIN = -30, EXP_MAX = 65, N_EXP = EXP_MAX - EXP_MIN + 1 };
#define N_BUCKETS ((size_t)N_EXP * TRACE_SKETCH_SUB)

/* Bucket of x > 0: x = m·2^ex with m in [0.5, 1); the mantissa's half-open interval split in SUB parts. */
static long bucket_of(double x)
{
    int ex;
    double m = frexp(x, &ex);
    if (ex < EXP_MIN) return -1;
    if (ex > EXP_MAX) return (long)N_BUCKETS - 1;
    size_t sub = (size_t)((m - 0.5) * 2.0 * TRACE_SKETCH_SUB);
    if (sub >= TRACE_SKETCH_SUB) sub = TRACE_SKETCH_SUB - 1;
    return (long)((size_t)(ex - EXP_MIN) * TRACE_SKETCH_SUB + sub);
}

static double bucket_mid(size_t b)
{
    int ex = (int)(b / TRACE_SKETCH_SUB) + EXP_MIN;
    double m = 0.5 + ((double)(b % TRACE_SKETCH_SUB) + 0.5) / (2.0 * TRACE_SKETCH_SUB);
    return ldexp(m, ex);
}

static void bucket_add(trace_sketch_t *k, double x)
{
    long b = x > 0 ? bucket_of(x) : -1;
    if (b < 0) k->zeros++;
    else k->bucket[b]++;
}

/* Moves the exact values into buckets. */
static int to_buckets(trace_sketch_t *k, err_t *e)
{
    k->bucket = calloc(N_BUCKETS, sizeof *k->bucket);
    if (!k->bucket) return err_set(e, ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < k->n; i++) bucket_add(k, k->v[i]);
    free(k->v);
    k->v = NULL;
    k->cap = 0;
    return ERR_OK;
}

int trace_sketch_add(trace_sketch_t *k, double x, err_t *e)
{
    if (!(x > 0)) x = 0;
    if (!k->bucket && k->n == TRACE_SKETCH_EXACT) {
        int rc = to_buckets(k, e);
        if (rc) return rc;
    }
    if (k->bucket) {
        bucket_add(k, x);
    } else {
        if (grow_to((void **)&k->v, &k->cap, k->n + 1, sizeof *k->v)) return err_set(e, ERR_NOMEM, "out of memory");
        k->v[k->n] = x;
    }
    if (!k->n || x < k->min) k->min = x;
    if (!k->n || x > k->max) k->max = x;
    k->n++;
    k->sum += x;
    return ERR_OK;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double trace_sketch_quantile(trace_sketch_t *k, double p)
{
    if (!k->n) return 0;
    uint64_t r = (uint64_t)((double)k->n * p + 0.999999999);
    if (r < 1) r = 1;
    if (r > k->n) r = k->n;
    if (!k->bucket) {
        qsort(k->v, k->n, sizeof *k->v, cmp_d);
        return k->v[r - 1];
    }
    uint64_t seen = k->zeros;
    if (r <= seen) return k->min;
    for (size_t b = 0; b < N_BUCKETS; b++) {
        seen += k->bucket[b];
        if (seen >= r) {
            double v = bucket_mid(b);
            return v < k->min ? k->min : v > k->max ? k->max : v;
        }
    }
    return k->max;
}

int trace_sketch_exact(const trace_sketch_t *k) { return !k->bucket; }

void trace_sketch_free(trace_sketch_t *k)
{
    free(k->v);
    free(k->bucket);
    memset(k, 0, sizeof *k);
}
