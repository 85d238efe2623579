#include "sim/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

struct hist {
    uint64_t *counts;  /* counts[k] is bucket base + k */
    int32_t base;
    size_t n;          /* buckets allocated */
    uint64_t zero;     /* values ≤ 0 */
    uint64_t count;
    double sum, min, max;
};

/* ln γ with γ = (1 + α)/(1 − α). */
static double ln_gamma(void) { return log1p(2.0 * HIST_REL_ERR / (1.0 - HIST_REL_ERR)); }

static int32_t bucket_of(double v) { return (int32_t)ceil(log(v) / ln_gamma()); }

static double bucket_value(int32_t i)
{
    double g = exp(ln_gamma());
    return 2.0 * exp((double)i * ln_gamma()) / (g + 1.0);
}

hist_t *hist_new(void) { return calloc(1, sizeof(hist_t)); }

void hist_free(hist_t *h)
{
    if (!h) return;
    free(h->counts);
    free(h);
}

void hist_reset(hist_t *h)
{
    free(h->counts);
    memset(h, 0, sizeof *h);
}

/* Makes buckets [lo, hi] addressable, keeping the counts. */
static int cover(hist_t *h, int32_t lo, int32_t hi)
{
    if (h->n) {
        if (lo >= h->base && hi < h->base + (int32_t)h->n) return 0;
        if (h->base < lo) lo = h->base;
        if (h->base + (int32_t)h->n - 1 > hi) hi = h->base + (int32_t)h->n - 1;
    }
    size_t n = (size_t)(hi - lo) + 1;
    uint64_t *c = calloc(n, sizeof *c);
    if (!c) return ERR_NOMEM;
    if (h->n) memcpy(c + (h->base - lo), h->counts, h->n * sizeof *c);
    free(h->counts);
    h->counts = c;
    h->base = lo;
    h->n = n;
    return 0;
}

static void note(hist_t *h, double v, uint64_t k, double sum)
{
    if (!h->count || v < h->min) h->min = v;
    if (!h->count || v > h->max) h->max = v;
    h->count += k;
    h->sum += sum;
}

int hist_add(hist_t *h, double v)
{
    if (!isfinite(v)) return ERR_INVAL;
    if (v <= 0) {
        h->zero++;
    } else {
        int32_t i = bucket_of(v);
        int rc = cover(h, i, i);
        if (rc) return rc;
        h->counts[i - h->base]++;
    }
    note(h, v, 1, v);
    return 0;
}

int hist_merge(hist_t *dst, const hist_t *src)
{
    if (!src->count) return 0;
    if (src->n) {
        int rc = cover(dst, src->base, src->base + (int32_t)src->n - 1);
        if (rc) return rc;
        for (size_t k = 0; k < src->n; k++) dst->counts[src->base - dst->base + (int32_t)k] += src->counts[k];
    }
    dst->zero += src->zero;
    /* min and max both go through note(); the count is added once. */
    note(dst, src->min, src->count, src->sum);
    if (src->max > dst->max) dst->max = src->max;
    return 0;
}

uint64_t hist_count(const hist_t *h) { return h->count; }
double hist_mean(const hist_t *h) { return h->count ? h->sum / (double)h->count : 0.0; }
double hist_min(const hist_t *h) { return h->count ? h->min : 0.0; }
double hist_max(const hist_t *h) { return h->count ? h->max : 0.0; }

double hist_quantile(const hist_t *h, double q)
{
    if (!h->count) return 0.0;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    uint64_t rank = (uint64_t)ceil(q * (double)h->count);
    if (rank < 1) rank = 1;
    uint64_t seen = h->zero;
    double v = h->max;
    if (seen >= rank) {
        v = 0.0;
    } else {
        for (size_t k = 0; k < h->n; k++) {
            seen += h->counts[k];
            if (seen >= rank) {
                v = bucket_value(h->base + (int32_t)k);
                break;
            }
        }
    }
    if (v < h->min) v = h->min;
    if (v > h->max) v = h->max;
    return v;
}

double hist_tw_mean(const hist_tw_t *tw, int64_t t_ps)
{
    return t_ps > 0 ? hist_tw_integral(tw, t_ps) / (double)t_ps : 0.0;
}
