/* hist — mergeable log-bucketed histograms (latencies) and time-weighted averages (utilisation).
 *
 * Histogram: a value v > 0 falls in bucket i = ceil(log_γ v) with γ = (1 + α)/(1 − α), α = HIST_REL_ERR;
 * a bucket reports 2γ^i/(γ + 1), which is within relative error α of every value in (γ^(i−1), γ^i]
 * (the DDSketch construction). So every percentile is within HIST_REL_ERR of the exact nearest-rank
 * percentile of the recorded values (plus ~1e-12 of floating-point rounding at bucket edges); count,
 * sum (mean), min and max are exact. Zero and negative values are counted in a separate zero bucket
 * and reported as 0. Buckets cover only the range seen so far, so an idle histogram is small.
 * Merging adds bucket counts: merge(a, b) equals one histogram fed both value streams. */
#ifndef ODSIM_SIM_HIST_H
#define ODSIM_SIM_HIST_H

#include <stddef.h>
#include <stdint.h>

#define HIST_REL_ERR 0.005

typedef struct hist hist_t;

/* Creates an empty histogram; NULL when out of memory. */
hist_t *hist_new(void);
/* Frees h. NULL is ok. */
void hist_free(hist_t *h);
/* Forgets every value (a measurement window starting anew). */
void hist_reset(hist_t *h);
/* Records one value (not NaN). Returns 0, ERR_INVAL for NaN or infinity, ERR_NOMEM (h unchanged). */
int hist_add(hist_t *h, double v);
/* Adds every value recorded in src to dst (src unchanged). Returns 0 or ERR_NOMEM (dst unchanged). */
int hist_merge(hist_t *dst, const hist_t *src);
uint64_t hist_count(const hist_t *h);
/* Exact mean, min and max of the recorded values; 0 when empty. */
double hist_mean(const hist_t *h);
double hist_min(const hist_t *h);
double hist_max(const hist_t *h);
/* The nearest-rank q-quantile (q in [0, 1]; 0.99 is p99) within HIST_REL_ERR, clamped to
 * [min, max]; 0 when empty. */
double hist_quantile(const hist_t *h, double q);

/* A time-weighted average of a piecewise-constant value (a resource's utilisation). A plain value
 * type: embed it and zero-initialise it (value 0 from time 0). */
typedef struct hist_tw {
    double integral;  /* ∫ value dt over [0, t_ps], in value·ps */
    double value;     /* current value */
    int64_t t_ps;     /* time of the last change */
} hist_tw_t;

/* ∫ value dt over [0, t_ps] in value·ps (t_ps ≥ the last change). Inline: the solver sets two per
 * constraint on every re-solve. */
static inline double hist_tw_integral(const hist_tw_t *tw, int64_t t_ps)
{
    return tw->integral + tw->value * (double)(t_ps - tw->t_ps);
}
/* Sets the value from t_ps on (t_ps ≥ the last change). */
static inline void hist_tw_set(hist_tw_t *tw, int64_t t_ps, double value)
{
    tw->integral = hist_tw_integral(tw, t_ps);
    tw->t_ps = t_ps;
    tw->value = value;
}
/* Mean value over [0, t_ps]; 0 when t_ps ≤ 0. */
double hist_tw_mean(const hist_tw_t *tw, int64_t t_ps);

#endif
